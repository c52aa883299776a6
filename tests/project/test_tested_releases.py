"""Each declared range (``verl_hadw/__init__.py``) holds only releases that passed their adapter's tests, as the
sweep's table in ``docs/install.md`` records them (``nox -t sweep`` writes it; noxfile.py's ``RELEASES`` lists what
it runs): its lowest release passed, every release inside it passed, a release it leaves out (``!=``) failed, and it
admits no release above the newest one tested."""

import ast
import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from repo_paths import ROOT

import verl_hadw

RANGES = {"verl": verl_hadw.VERL_RANGE, "trl": verl_hadw.TRL_RANGE, "ms-swift": verl_hadw.SWIFT_RANGE,
          "axolotl": verl_hadw.AXOLOTL_RANGE, "transformers": verl_hadw.TRANSFORMERS_RANGE}
BEGIN, END = "<!-- tested releases: nox -t sweep writes this table -->", "<!-- end of tested releases -->"


def swept() -> dict[str, list[str]]:
    """noxfile.py's ``RELEASES`` (read, not imported: nox is not installed here)."""
    for node in ast.parse((ROOT / "noxfile.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "RELEASES":
            return ast.literal_eval(node.value)
    raise AssertionError("noxfile.py defines no RELEASES")


def table(page: str) -> list[tuple[str, str, str, str]]:
    """(framework, release, result, date) of each row between the page's two markers."""
    body = page.split(BEGIN)[1].split(END)[0]
    return re.findall(r"^\| ([\w-]+) \| ([\d.]+) \| (passed|failed) \| (\d{4}-\d\d-\d\d) \|$", body, re.M)


def range_problems(spec: SpecifierSet, results: dict[str, str]) -> list[str]:
    """What is wrong with ``spec`` for these results (release -> passed / failed); empty when nothing is."""
    inside = sorted((r for r in results if Version(r) in spec), key=Version)
    if not inside:
        return ["no tested release inside it"]
    problems = [f"{r} failed" for r in inside if results[r] != "passed"]
    lower = {Version(s.version) for s in spec if s.operator == ">="}
    if lower != {Version(inside[0])}:
        problems.append(f"its lower bound is not its lowest tested release {inside[0]}")
    newest = Version(inside[-1])
    if {(s.operator, Version(s.version)) for s in spec if s.operator not in (">=", "!=")} != {("<", Version(
            f"{newest.major}.{newest.minor + 1}"))}:
        problems.append(f"its upper bound is not <{newest.major}.{newest.minor + 1}, past the newest tested {newest}")
    for left_out in (s for s in spec if s.operator == "!="):  # a release left out of the range is one that failed
        if not any(left_out.contains(r) is False and results[r] == "failed" for r in results):
            problems.append(f"{left_out} leaves out no release that failed")
    return problems


def test_the_table_holds_one_result_for_every_release_the_sweep_runs():
    rows = table((ROOT / "docs" / "install.md").read_text())
    assert [(f, r) for f, r, _, _ in rows] == [(f, r) for f, releases in swept().items() for r in releases]


@pytest.mark.parametrize("framework", list(RANGES))
def test_each_range_holds_only_releases_that_passed(framework):
    results = {r: result for f, r, result, _ in table((ROOT / "docs" / "install.md").read_text()) if f == framework}
    assert range_problems(SpecifierSet(RANGES[framework]), results) == []
    assert f"`{RANGES[framework]}`" in (ROOT / "docs" / "install.md").read_text()  # the page says the range


def test_a_range_wider_than_what_passed_is_named():
    results = {"1.0.0": "passed", "1.1.0": "failed", "1.2.0": "passed"}
    assert range_problems(SpecifierSet(">=1.0.0,<1.3"), results) == ["1.1.0 failed"]
    assert range_problems(SpecifierSet(">=1.0.0,<2"), {"1.0.0": "passed"}) == [
        "its upper bound is not <1.1, past the newest tested 1.0.0"]
    assert range_problems(SpecifierSet(">=0.9,<1.1"), {"1.0.0": "passed"}) == [
        "its lower bound is not its lowest tested release 1.0.0"]
    assert range_problems(SpecifierSet(">=1.0.0,!=1.1.*,<1.3"), results) == []  # the failed release left out
    assert range_problems(SpecifierSet(">=1.0.0,!=1.2.*,<1.3"), results) == [
        "1.1.0 failed", "its upper bound is not <1.2, past the newest tested 1.1.0",
        "!=1.2.* leaves out no release that failed"]

"""What the docs cite exists: repository paths in code spans (`verl_hadw/core/anchor/machine.py`, `configs/cpu/`),
test files and test names (`tests/e2e/test_e2e_cpu.py`, `test_anchor_actor.py::test_...`, `::test_...…` after a file,
a bare `test_name`), and the links of README.md and CONTRIBUTING.md (files and anchors; the docs pages' own links
are checked by `mkdocs build --strict`, tests/project/test_docs_build.py). Test names are read with ast, not by
pytest. A test file cited with its folder (`tests/<package>/test_x.py`) must be there; cited alone (`test_x.py`), in
any folder of tests/ (test file names are unique there)."""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from markdown.extensions.toc import slugify
from repo_paths import ROOT
from test_docs_commands import SPAN, doc_files, without_fences

PATH = re.compile(r"(?P<path>(?:verl_hadw|configs|scripts|benchmarks|tests|docs|\.ci)/[\w./*-]*)(?::[\d, -]+)?")
TEST_REF = re.compile(r"(?P<folder>tests/(?:\w+/)*)?(?P<file>test_\w+\.py)?(?:::(?P<name>\w+))?(?P<prefix>…|\.\.\.)?")
# a test named alone (two words at least: `test_freq` is verl's config key): in any test file
BARE_TEST = re.compile(r"(?P<name>test_[a-z0-9]+_\w+?)(?P<prefix>…|\.\.\.)?")
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@lru_cache(maxsize=None)
def names_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))


@lru_cache(maxsize=None)
def python_files() -> tuple[Path, ...]:
    """Every Python file of tests/: each package's folder, the ms-swift adapter's too, and the helpers."""
    return tuple(sorted((ROOT / "tests").rglob("*.py")))


def all_test_names() -> frozenset[str]:
    return frozenset().union(*(names_in(p) for p in python_files()))


def cited_file(folder: str | None, name: str) -> Path | None:
    """``tests/<folder>/<name>`` if the reference names its folder, else the one file so named anywhere in tests/."""
    if folder:
        return ROOT / folder / name if (ROOT / folder / name).is_file() else None
    return next((p for p in python_files() if p.name == name), None)


def cited(name: str, names: frozenset[str], prefix: bool) -> bool:
    return any(n.startswith(name) for n in names) if prefix else name in names


def stale_test_references(text: str) -> list[str]:
    """Every test reference in ``text`` that names no file or no test; ``::name`` reads the line's last file."""
    stale = []
    for line in without_fences(text).splitlines():
        file = None
        for span in SPAN.findall(line):
            if bare := BARE_TEST.fullmatch(span):
                if not cited(bare["name"], all_test_names(), bool(bare["prefix"])):
                    stale.append(f"{span}: no such test in tests/")
                continue
            m = TEST_REF.fullmatch(span)
            if not m or not (m["file"] or m["name"]):
                continue
            if m["file"]:
                file = cited_file(m["folder"], m["file"])
                if file is None:
                    stale.append(f"{span}: no {m['folder']}{m['file']}" if m["folder"] else
                                 f"{span}: no {m['file']} in tests/")
                    continue
            if m["name"]:
                if file is None:
                    stale.append(f"{span}: no test file before it on its line")
                elif not cited(m["name"], names_in(file), bool(m["prefix"])):
                    stale.append(f"{span}: no test {m['name']} in {file.relative_to(ROOT)}")
    return stale


def stale_paths(text: str) -> list[str]:
    """Repository paths named in code spans that exist nowhere (globs must match; <placeholders> are skipped)."""
    stale = []
    for span in SPAN.findall(without_fences(text)):
        m = PATH.fullmatch(" ".join(span.split()))
        if not m or "<" in span:
            continue
        path = m["path"]
        if not (list(ROOT.glob(path.rstrip("/"))) if "*" in path else (ROOT / path).exists()):
            stale.append(path)
    return stale


def heading_anchors(page: Path) -> set[str]:
    """The anchors MkDocs gives the headings of ``page`` (python-markdown's toc slugify on the heading text)."""
    anchors = set()
    for line in without_fences(page.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            anchors.add(slugify(re.sub(r"[`*]", "", m[1]).strip(), "-"))
    return anchors


def test_every_cited_test_and_path_exists():
    stale = []
    for page in doc_files():
        text = page.read_text(encoding="utf-8")
        stale += [f"{page.relative_to(ROOT)}: {s}" for s in stale_test_references(text) + stale_paths(text)]
    assert not stale, "the docs cite what does not exist:\n" + "\n".join(stale)


def test_the_checks_catch_a_stale_reference():
    line = "| x | `test_anchor_actor.py::test_actor_and_in_process_trajectories_are_identical`, `::test_gone_…` |"
    assert stale_test_references(line) == [
        "::test_gone_…: no test test_gone_ in tests/verl/test_anchor_actor.py"]
    assert stale_test_references("`tests/test_nothing.py`") == ["tests/test_nothing.py: no tests/test_nothing.py"]
    assert stale_test_references("`test_killed_actor_is_rebuilt_…` and `test_never_written`") == [
        "test_never_written: no such test in tests/"]
    assert stale_paths("`verl_hadw/core/anchor/machine.py`, `configs/eval/*.yaml`, `scripts/gone.sh`") == [
        "scripts/gone.sh"]


def test_readme_and_contributing_links_resolve():
    broken = []
    for page in (ROOT / "README.md", ROOT / "CONTRIBUTING.md"):
        for target in LINK.findall(SPAN.sub("", without_fences(page.read_text(encoding="utf-8")))):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and anchor not in heading_anchors(path):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
    assert heading_anchors(ROOT / "docs" / "reliability.md") >= {"resuming-under-changed-options-one-table"}

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

import pytest

# The tests' helpers (fixtures, stand-ins, the launches) is tests/helpers/, imported by name
# (``from batches import ...``): on sys.path before anything imports it, in every process that loads this conftest
# (the session, its xdist workers, the framework environments' pytest). tests/ has no __init__.py (tests/README.md).
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from repo_paths import TESTS  # noqa: E402

pytest_plugins = ["launches"]  # verl's real main_ppo launches, as session fixtures (tests/helpers/launches.py)

# Which frameworks this environment has, asked of the installed distributions: with tests/ on sys.path, each test
# folder named like a framework (tests/verl/, tests/swift/, tests/axolotl/) would be found as a namespace package.
INSTALLED = importlib.metadata.packages_distributions()
# ms-swift pins trl<1.0 and Axolotl its own TRL: their adapters' tests run in their own nox sessions (noxfile.py), not
# beside verl and the newest TRL; here only what needs no framework (Axolotl's HadwArgs, held to the core's
# declarations). The comparison across frameworks reads what those sessions kept: nox -s compare runs it.
RUN_HERE = {"swift": set(), "axolotl": {"test_axolotl_args.py"}}
collect_ignore = [str(p.relative_to(TESTS)) for framework, runs in RUN_HERE.items() if framework not in INSTALLED
                  for p in sorted((TESTS / framework).glob("test_*.py")) if p.name not in runs]
if not os.environ.get("VERL_HADW_COMPARE"):
    collect_ignore.append("hf_trainer/test_across_frameworks.py")
# verl 0.9.0's own main_ppo runs: where verl 0.9.0 is the installed verl (nox -s verl-0.9.0)
if "verl" not in INSTALLED or importlib.metadata.version("verl") != "0.9.0":
    collect_ignore.append("e2e/test_verl090_e2e.py")


def pytest_configure(config):
    """One torch thread in the test process, as in every process of a launch (``verl_hadw.cpu.platform``): beside
    the launches on 2 cores, torch's default of a thread per core left a test's OpenMP threads spinning against
    them (a 2 s CPU-rollout test took 94 s)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a fresh process: no anchors, no buffered metrics, verl's step unset. Without verl (the
    TRL, ms-swift and Axolotl sessions) verl's adapter cannot be imported, so it holds nothing."""
    if "verl" not in INSTALLED:
        yield
        return
    from verl_hadw.verl import process_state

    process_state.reset()
    yield
    process_state.reset()


NOT_PASSED = ("skipped", "xfailed", "xpassed")  # a test either passes or fails: nothing here is skipped


def pytest_sessionfinish(session, exitstatus):
    """A skipped, xfailed or xpassed test fails the run (in the controller, which holds every worker's reports)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if hasattr(session.config, "workerinput") or reporter is None:
        return
    found = {kind: len(reporter.stats[kind]) for kind in NOT_PASSED if reporter.stats.get(kind)}
    if found and exitstatus == pytest.ExitCode.OK:
        reporter.write_line(f"FAILED: tests that did not pass or fail: {found} (nothing here is skipped)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

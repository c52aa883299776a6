import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The tests' helpers (fixtures, stand-ins, the environments' scripts) is tests/helpers/, imported by name
# (``from batches import ...``): on sys.path before anything imports it, in every process that loads this conftest
# (the session, its child pytest, the framework environments' pytest). tests/ has no __init__.py (tests/README.md).
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from repo_paths import HELPERS, TESTS  # noqa: E402

pytest_plugins = ["own_process"]  # tests that start a Ray driver run in a child pytest

# Which frameworks this environment has, asked of the installed distributions: with tests/ on sys.path, each test
# folder named like a framework (tests/verl/, tests/swift/, tests/axolotl/) would be found as a namespace package.
INSTALLED = importlib.metadata.packages_distributions()
# The ms-swift adapter's tests need ms-swift, which pins trl<1.0 and so never shares this environment (TRL 1.x): they
# run in their own virtualenvs (tests/helpers/swift_environment.py), not here; the environments' reader does.
# Axolotl's likewise (it pins its TRL): tests/helpers/axolotl_environment.py runs them, the reader reads it. Here
# run the readers and what needs no framework (Axolotl's HadwArgs, held to the core's declarations).
RUN_HERE = {"swift": {"test_swift_environment.py"},
            "axolotl": {"test_axolotl_environment.py", "test_axolotl_args.py"}}
collect_ignore = [str(p.relative_to(TESTS)) for framework, runs in RUN_HERE.items() if framework not in INSTALLED
                  for p in sorted((TESTS / framework).glob("test_*.py")) if p.name not in runs]


def pytest_configure(config):
    """One torch thread in the test process, as in every process of a launch (``verl_hadw.cpu.platform``): beside
    the launches on 2 cores, torch's default of a thread per core left a test's OpenMP threads spinning against
    them (a 2 s CPU-rollout test took 94 s)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a fresh process: no anchors, no buffered metrics, verl's step unset. Without verl (the
    the TRL environment, tests/helpers/trl_environment.py) verl's adapter cannot be imported, so it holds
    nothing."""
    if "verl" not in INSTALLED:
        yield
        return
    from verl_hadw.verl import process_state

    process_state.reset()
    yield
    process_state.reset()


# ------------------------------------------------------------------------- the session's main_ppo launches
E2E_TABLE = pytest.StashKey[str]()


def launches_of(items) -> list[str]:
    """The launches the tests name with ``@pytest.mark.e2e``, in order, each once."""
    names = []
    for item in items:
        for marker in item.iter_markers("e2e"):
            from e2e_runs import LAUNCHES  # verl's: only where a test reads a launch (the TRL environment has no verl)

            unknown = [n for n in marker.args if n not in LAUNCHES]
            if unknown:
                raise pytest.UsageError(f"{item.nodeid}: unknown e2e launch {unknown}; see tests/helpers/e2e_runs.py")
            names += [n for n in marker.args if n not in names]
    return names


@pytest.hookimpl(trylast=True)  # after -m / -k have deselected what will not run
def pytest_collection_modifyitems(config, items):
    """The tests that read main_ppo launches (``@pytest.mark.e2e``) go last, so that the launches, started when the
    session's first test runs (``_e2e_stage``), overlap every other test; before them the ``ray_driver`` and ``beside``
    tests, which run in a child pytest started with the session's tests (``own_process.py``): it overlaps them too."""
    from own_process import in_child

    launches_of(items)  # an unknown launch name fails the collection
    items.sort(key=lambda item: (item.get_closest_marker("e2e") is not None, in_child(item)))  # stable within


class Stage:
    """The launches' stage (tests/helpers/e2e_stage.py), a process of its own; ``result(name)`` waits for a
    launch's record and gives what the tests read (``e2e_runs.load``). A launch that failed fails its readers with its
    log tail."""

    def __init__(self, root: Path, names: list[str], proc: subprocess.Popen | None):
        self.root, self.names, self.proc = root, names, proc

    def result(self, name: str, timeout: float = 3600):
        from e2e_runs import load
        from e2e_stage import read_record

        if name not in self.names:
            raise AssertionError(f"{name} is not a launch of this session: name it in the test's e2e marker")
        deadline = time.monotonic() + timeout
        while (record := read_record(self.root, name)) is None:
            if self.proc is not None and self.proc.poll() is not None and read_record(self.root, name) is None:
                raise RuntimeError(f"the e2e stage exited ({self.proc.returncode}) without running {name}:\n"
                                   + self.log_tail())
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not finish within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(1)
        if record["status"] != "ok":
            raise RuntimeError(f"launch {name} failed:\n{record['error'][-8000:]}")
        return load(record["result"])

    def log_tail(self) -> str:
        log = self.root / "stage.log"
        return log.read_text()[-6000:] if log.exists() else "(no stage log)"

    def close(self) -> None:
        """A session that ended early kills what still runs, so that no Ray node outlives it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        import psutil

        for child in psutil.Process(self.proc.pid).children(recursive=True):  # Ray's processes leave the group
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture(scope="session", autouse=True)
def _e2e_stage(request, tmp_path_factory):
    """Starts the selected tests' launches at the session's first test, in the stage's own process
    (tests/helpers/e2e_stage.py). ``VERL_HADW_E2E_DIR`` reuses the records a stage left in that folder and runs the
    rest."""
    names = launches_of(request.session.items)  # the tests that will run, after -m / -k
    if not names:
        yield None
        return
    from e2e_runs import LAUNCHES
    from e2e_stage import chains, read_record, workers_from_env

    every = [n for chain in chains(LAUNCHES, names) for n in chain]  # with the launches they resume from
    reuse = os.environ.get("VERL_HADW_E2E_DIR")
    root = Path(reuse) if reuse else tmp_path_factory.mktemp("e2e")
    root.mkdir(parents=True, exist_ok=True)
    todo = [n for n in every if reuse is None or read_record(root, n) is None]
    proc = None
    if todo:
        cmd = [sys.executable, str(HELPERS / "e2e_stage.py"), "--root", str(root),
               "--workers", str(workers_from_env()), *todo]
        with open(root / "stage.log", "a") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stage = Stage(root, every, proc)
    yield stage
    stage.close()
    from e2e_stage import launch_table

    request.config.stash[E2E_TABLE] = (f"main_ppo launches ({workers_from_env()} at a time, {root}):\n"
                                       + launch_table(root, every))


def pytest_terminal_summary(terminalreporter, config):
    """The launches' own wall times, beside pytest's --durations (where a test shows only its wait)."""
    if E2E_TABLE in config.stash:
        terminalreporter.write_line(config.stash[E2E_TABLE])


@pytest.fixture
def e2e(_e2e_stage, request):
    """The session's stage; ``e2e.result(name)`` waits for a launch named by the test's ``e2e`` marker."""
    marker = request.node.get_closest_marker("e2e")
    assert marker is not None, "a test that reads main_ppo launches names them: @pytest.mark.e2e('name', ...)"
    return _e2e_stage

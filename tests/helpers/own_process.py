"""Tests that hold a Ray driver run in a pytest process of their own (``@pytest.mark.ray_driver``).

Why: ``ray.shutdown()`` leaves Ray's GCS-client I/O thread and gRPC's threads (``gcs_client_io_s``,
``grpc_global_tim``, ``event_engine``, ``default-executo``, ``resolver-execut``, ``timer_manager``) running in the
process that called ``ray.init()``. At interpreter exit they run on while the libraries' static objects are torn
down, the class of crash behind a suite that passed every test and exited 139 (a thread jumping into freed memory).
So the session's own process never starts a Ray driver: all ``ray_driver`` tests of the session run in one child
pytest, started as the session's tests begin and running beside them (they come last in the session's order),
which reports every test back (pytest's own report serialisation, as pytest-xdist does)
and then ends without the interpreter's teardown (``os._exit`` with its pytest status: Ray's threads die with it).
The parent reports each test as the child ran it: pass, failure with its traceback, duration. A child that dies
before it reported a test fails that test with the child's output tail.

``sessionfinish`` then checks the parent: no thread of Ray or gRPC may be alive at its end (``ray_threads_alive``).

The child also takes the tests marked ``@pytest.mark.beside``: tests that spend their time in processes they start
(fake clusters, fresh interpreters), so that the session's one process is not the last to finish on 2 cores while the
other idles. A test that reads the session's launches (``e2e``) stays in the parent, which holds the stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

CHILD = "VERL_HADW_OWN_PROCESS_REPORTS"  # set in the child: where it writes its reports
RAY_THREADS = ("gcs_client_io_s", "grpc_global_tim", "event_engine", "default-executo", "resolver-execut",
               "timer_manager", "core_worker_io")  # Linux thread names (15 characters at most) Ray's drivers leave
CHILD_TIMEOUT = 3600


def native_threads() -> list[str]:
    """The names of this process's threads, native ones included (``/proc/self/task``)."""
    names = []
    for tid in sorted(os.listdir("/proc/self/task")):
        try:
            names.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:
            pass
    return names


def ray_threads_alive() -> list[str]:
    return [name for name in native_threads() if name.startswith(RAY_THREADS)]


def pytest_configure(config):
    config.addinivalue_line("markers", "ray_driver: starts a Ray driver in the test process; runs in a child pytest "
                                       "(tests/helpers/own_process.py)")
    config.addinivalue_line("markers", "beside: runs in the child pytest beside the session's tests (it spends its "
                                       "time in processes it starts; tests/helpers/own_process.py)")
    config.stash[_STATE] = {"reports": None, "status": 0}


def in_child(item) -> bool:
    """Whether the child pytest runs ``item``: a ``ray_driver`` or ``beside`` test that reads no launch."""
    marked = item.get_closest_marker("ray_driver") is not None or item.get_closest_marker("beside") is not None
    return marked and item.get_closest_marker("e2e") is None


_STATE = pytest.StashKey[dict]()


# ----------------------------------------------------------------------------------------------- the child
def pytest_runtest_logreport(report):
    path = os.environ.get(CHILD)
    if path:
        config = _CONFIG[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(path, "a") as f:
            f.write(json.dumps(data) + "\n")


_CONFIG: list = []


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG[:] = [session.config]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_STATE]["status"] = int(exitstatus)
    if os.environ.get(CHILD) or not hasattr(session, "items"):
        return
    alive = ray_threads_alive()
    if alive:  # the parent must end as it started: without Ray's threads (see the module's docstring)
        session.config.stash[_STATE]["alive"] = alive
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    alive = config.stash[_STATE].get("alive")
    if alive:
        terminalreporter.write_line(f"FAILED: threads of a Ray driver are alive in the test process at its end: "
                                    f"{alive}; a test that calls ray.init() needs @pytest.mark.ray_driver", red=True)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if os.environ.get(CHILD):  # everything is reported and printed: end here, before Ray's threads see a teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(config.stash[_STATE]["status"])


# ---------------------------------------------------------------------------------------------- the parent
def _start_child(session) -> dict | None:
    """Start every selected ``ray_driver`` and ``beside`` test in one child pytest, at once (``pytest_runtestloop``):
    it runs beside the session's other tests and launches, and the session orders the child's tests after the others
    (conftest.py), so their reports are usually there when they are reached and no core idles at the end."""
    items = [i for i in session.items if in_child(i)]
    if not items or os.environ.get(CHILD) or session.config.option.collectonly:
        return None
    tmp = tempfile.TemporaryDirectory()
    reports, log = Path(tmp.name) / "reports.jsonl", Path(tmp.name) / "child.log"
    root = session.config.rootpath
    # -P: no working directory (the checkout) on sys.path: the child imports the package its environment installed
    cmd = [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(root),
           *(i.nodeid for i in items)]
    env = dict(os.environ, **{CHILD: str(reports)})
    out = open(log, "w")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    return {"proc": proc, "tmp": tmp, "out": out, "reports_path": reports, "log": log, "began": time.monotonic()}


def _stop_child(child: dict) -> None:
    """Kill the child if it still runs, wait for it and close its log (safe to call twice)."""
    if child["proc"].poll() is None:
        child["proc"].kill()
    child["proc"].wait()
    child["out"].close()


def _finish_child(session, child: dict) -> dict[str, list]:
    """Wait for the child (at most ``CHILD_TIMEOUT`` from its start); its reports by test id."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        child["proc"].wait(timeout=max(1.0, CHILD_TIMEOUT - (time.monotonic() - child["began"])))
    _stop_child(child)
    by_id: dict[str, list] = {}
    path = child["reports_path"]
    for line in path.read_text().splitlines() if path.exists() else []:
        report = session.config.hook.pytest_report_from_serializable(config=session.config, data=json.loads(line))
        by_id.setdefault(report.nodeid, []).append(report)
    return {"reports": by_id, "code": child["proc"].returncode, "tail": child["log"].read_text()[-6000:]}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    state = session.config.stash[_STATE]
    state["child"] = _start_child(session)
    try:
        yield
    finally:
        if state["child"] is not None:  # read or not (a session that ended before it reached the child's tests)
            _stop_child(state["child"])
            state["child"]["tmp"].cleanup()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if os.environ.get(CHILD) or not in_child(item):
        return None
    state = item.config.stash[_STATE]
    if state["reports"] is None:
        state["reports"] = _finish_child(item.session, state["child"])
    child = state["reports"]
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = child["reports"].get(item.nodeid)
    if not reports or not any(r.when == "teardown" for r in reports):
        from _pytest.reports import TestReport

        message = (f"the child pytest of the ray_driver tests (tests/helpers/own_process.py) exited {child['code']} "
                   f"before it reported this test:\n{child['tail']}")
        reports = [*(reports or []), TestReport(item.nodeid, item.location, {}, "failed", message, "call")]
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True

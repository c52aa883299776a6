"""A test that starts a Ray driver runs in a child pytest (tests/machinery/own_process.py), as does a ``beside`` test,
and the session's own process ends without Ray's threads, the ones alive at an interpreter exit that crashed with 139
after every test had passed."""

import subprocess
import sys

import pytest
from repo_paths import MACHINERY

pytestmark = pytest.mark.slow  # two pytest processes, a Ray start

PLANTED = '''
import os
import time

import pytest
import ray

MARK = os.path.join(os.path.dirname(__file__), "child_ran")


def start_and_stop_ray():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    ray.shutdown()


def test_in_the_parent_while_the_child_runs():  # first in the file: it passes only if the child runs meanwhile
    deadline = time.monotonic() + 300
    while not os.path.exists(MARK):
        assert time.monotonic() < deadline, "the child pytest did not run beside the session's other tests"
        time.sleep(0.2)


@pytest.mark.ray_driver
def test_in_the_child_passes():
    assert os.environ.get("VERL_HADW_OWN_PROCESS_REPORTS")  # it ran in the child
    open(MARK, "w").close()


@pytest.mark.beside
def test_beside_runs_in_the_child_too():
    assert os.environ.get("VERL_HADW_OWN_PROCESS_REPORTS")


@pytest.mark.ray_driver
def test_in_the_child_fails():
    assert "planted" == "failure"


def test_in_the_parent_without_the_marker():
    start_and_stop_ray()
'''


def test_ray_drivers_run_in_a_child_and_a_driver_left_in_the_parent_fails_the_session(tmp_path):
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(MACHINERY)!r})\n"
                                          "pytest_plugins = ['own_process']\n")
    (tmp_path / "test_planted.py").write_text(PLANTED)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "--rootdir",
                           str(tmp_path), str(tmp_path / "test_planted.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    assert "PASSED test_planted.py::test_in_the_child_passes" in out  # the child's report, shown by the parent
    assert "PASSED test_planted.py::test_in_the_parent_while_the_child_runs" in out  # the child ran beside it
    assert "PASSED test_planted.py::test_beside_runs_in_the_child_too" in out  # a beside test: the child too
    assert "FAILED test_planted.py::test_in_the_child_fails" in out and "AssertionError" in out
    assert "PASSED test_planted.py::test_in_the_parent_without_the_marker" in out  # the test passed, but:
    assert "threads of a Ray driver are alive in the test process at its end" in out and "gcs_client_io_s" in out
    assert "a test that calls ray.init() needs @pytest.mark.ray_driver" in out


import pytest


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a fresh process: no anchors, no buffered metrics, verl's step unset."""
    from verl_hadw import process_state

    process_state.reset()
    yield
    process_state.reset()


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The CPU demo's 30-step run, once per session (tests/e2e_runs.py::run_demo)."""
    from e2e_runs import run_demo

    return run_demo(tmp_path_factory.mktemp("demo"))

import pytest


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a fresh process: no anchors, no buffered metrics, verl's step unset."""
    from verl_hadw import process_state

    process_state.reset()
    yield
    process_state.reset()

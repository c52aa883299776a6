import pytest


@pytest.fixture(autouse=True)
def _fresh_anchor_state():
    """Each test starts with no anchors, no buffered metrics and verl's step unset."""
    from verl.utils.skip.skip_manager import SkipManager

    from verl_hadw import metrics, steps
    from verl_hadw.anchor import client as anchor_client

    anchor_client.reset()
    steps.reset()
    metrics.reset()
    SkipManager.set_step(-1)
    yield
    anchor_client.reset()
    steps.reset()
    metrics.reset()
    SkipManager.set_step(-1)

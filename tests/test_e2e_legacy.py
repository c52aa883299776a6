"""End to end with verl's legacy trainer (``trainer.use_v1=false``, real ``main_ppo`` on CPU; the session's
``legacy_straight`` and ``legacy_resumed`` launches, tests/e2e_runs.py).

The legacy trainer has no checkpoint hook; the estimator snapshots the anchor beside verl's checkpoints
(``verl_hadw/verl_adapter/legacy_snapshots.py``). A run resumed from the step-2 checkpoint (and snapshot) must log
the same anchor values at step 3 as the uninterrupted run.
"""

import json

import pytest
from e2e_runs import HALF, STRAIGHT

pytestmark = pytest.mark.slow

HADW_METRICS = ["hadw/phi_mean", "hadw/phi_min", "hadw/phi_max", "hadw/frac_amplified", "hadw/actor_recoveries"]
ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t"]


@pytest.mark.e2e("legacy_straight")
def test_legacy_run_snapshots_the_anchor_of_each_checkpoint(e2e):
    straight = e2e.result("legacy_straight")
    log, steps = straight.log, straight.steps
    assert "main_ppo_v0" in log or "Legacy trainer" in log
    assert sorted(steps) == list(range(1, STRAIGHT + 1))
    for values in steps.values():
        assert all(m in values for m in HADW_METRICS)
    assert any(v["critic/advantages/max"] > 0 or v["critic/advantages/min"] < 0 for v in steps.values())
    assert all(steps[s]["hadw/actor_recoveries"] == 0 for s in steps)
    assert steps[2]["hadw/anchor_prior"] == steps[1]["hadw/anchor_posterior"]  # Eq. 12 across real steps
    snapshots = straight.out / "verl_hadw_anchor"
    # step 1 had no checkpoint; verl saves at save_freq and at the last step
    assert sorted(p.name for p in snapshots.iterdir()) == [f"step_{HALF}.json", f"step_{STRAIGHT}.json"]
    saved = json.loads((snapshots / f"step_{STRAIGHT}.json").read_text())
    assert saved["global_step"] == STRAIGHT and saved["state"]["open_step"] == STRAIGHT
    assert saved["state"]["prior"] == steps[STRAIGHT]["hadw/anchor_prior"]
    assert (straight.out / f"global_step_{STRAIGHT}" / "data.pt").exists()


@pytest.mark.e2e("legacy_straight", "legacy_resumed")
def test_legacy_resume_continues_the_anchor_exactly(e2e):
    """Resumed from the uninterrupted run's step-2 checkpoint and anchor snapshot (a job killed after it saved)."""
    straight, resumed = e2e.result("legacy_straight"), e2e.result("legacy_resumed")
    assert "Resuming from" in resumed.log and f"global_step_{HALF}" in resumed.log
    assert sorted(resumed.steps) == list(range(HALF + 1, STRAIGHT + 1))
    for step in range(HALF + 1, STRAIGHT + 1):
        assert {k: resumed.steps[step][k] for k in ANCHOR} == {k: straight.steps[step][k] for k in ANCHOR}, step
        assert resumed.steps[step]["hadw/actor_recoveries"] == 0

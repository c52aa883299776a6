"""End to end with verl's legacy trainer (``trainer.use_v1=false``, real ``main_ppo`` on CPU, ~1 minute a run).

The legacy trainer has no checkpoint hook; the estimator snapshots the anchor beside verl's checkpoints
(``verl_hadw/anchor/legacy_snapshots.py``). A run resumed from the step-2 checkpoint (and snapshot) must log the same
anchor values at steps 3-4 as the uninterrupted run. The legacy trainer's ``main_ppo`` runs are all here.
"""

import json

import pytest
from e2e_runs import checkpoint_copy, main_ppo

pytestmark = pytest.mark.slow

HADW_METRICS = ["hadw/phi_mean", "hadw/phi_min", "hadw/phi_max", "hadw/frac_amplified", "hadw/actor_recoveries"]
ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t"]
LEGACY = ["trainer.use_v1=false", "trainer.save_freq=2"]


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return str(tmp_path_factory.mktemp("assets"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("legacy_runs")


@pytest.fixture(scope="module")
def straight(assets, workdir):
    """The uninterrupted legacy run: 4 steps, checkpoints at steps 2 and 4."""
    _, log, steps = main_ppo(assets, workdir, "straight", *LEGACY, "trainer.total_training_steps=4")
    return log, steps


def test_legacy_run_snapshots_the_anchor_of_each_checkpoint(straight, workdir):
    log, steps = straight
    assert "main_ppo_v0" in log or "Legacy trainer" in log
    assert sorted(steps) == [1, 2, 3, 4]
    for values in steps.values():
        assert all(m in values for m in HADW_METRICS)
    assert any(v["critic/advantages/max"] > 0 or v["critic/advantages/min"] < 0 for v in steps.values())
    assert all(steps[s]["hadw/actor_recoveries"] == 0 for s in steps)
    assert steps[2]["hadw/anchor_prior"] == steps[1]["hadw/anchor_posterior"]  # Eq. 12 across real steps
    snapshots = workdir / "straight" / "verl_hadw_anchor"
    assert sorted(p.name for p in snapshots.iterdir()) == ["step_2.json", "step_4.json"]  # 1 and 3: no checkpoint
    saved = json.loads((snapshots / "step_4.json").read_text())
    assert saved["global_step"] == 4 and saved["state"]["open_step"] == 4
    assert saved["state"]["prior"] == steps[4]["hadw/anchor_prior"]
    assert (workdir / "straight" / "global_step_4" / "data.pt").exists()


def test_legacy_resume_continues_the_anchor_exactly(assets, workdir, straight):
    """Resumed from the uninterrupted run's step-2 checkpoint and anchor snapshot (a job killed after it saved)."""
    checkpoint_copy(workdir, "straight", "resumed", 2)
    _, log, resumed = main_ppo(
        assets, workdir, "resumed", *LEGACY, "trainer.total_training_steps=4", "trainer.resume_mode=auto",
        experiment="straight",
    )
    assert "Resuming from" in log and "global_step_2" in log
    assert sorted(resumed) == [3, 4]
    for step in (3, 4):
        assert {k: resumed[step][k] for k in ANCHOR} == {k: straight[1][step][k] for k in ANCHOR}, step
        assert resumed[step]["hadw/actor_recoveries"] == 0

"""End to end with verl's legacy trainer (``trainer.use_v1=false``, real ``main_ppo`` on CPU, ~1 minute a run).

The legacy trainer has no checkpoint hook; the estimator snapshots the anchor beside verl's checkpoints
(``verl_hadw/anchor/legacy_snapshots.py``). A run stopped after its step-2 checkpoint and resumed must log the same
anchor values at steps 3-4 as the uninterrupted run.
"""

import json

import pytest

from verl_hadw.toy.launch import parse_steps, run

pytestmark = pytest.mark.slow

ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t"]
LEGACY = ["trainer.use_v1=false", "trainer.save_freq=2"]


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return str(tmp_path_factory.mktemp("assets"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("legacy_runs")


def main_ppo(assets, workdir, name, *overrides):
    code, log = run(
        assets,
        [f"trainer.experiment_name={name}", f"trainer.default_local_dir={workdir}/{name}", *LEGACY, *overrides],
        cwd=str(workdir),
    )
    (workdir / f"{name}.log").write_text(log)
    assert code == 0, log[-5000:]
    return log, parse_steps(log)


@pytest.fixture(scope="module")
def straight(assets, workdir):
    """The uninterrupted legacy run: 4 steps, checkpoints at steps 2 and 4."""
    return main_ppo(assets, workdir, "straight", "trainer.total_training_steps=4")


def test_legacy_run_snapshots_the_anchor_of_each_checkpoint(straight, workdir):
    log, steps = straight
    assert "main_ppo_v0" in log or "Legacy trainer" in log
    assert sorted(steps) == [1, 2, 3, 4]
    assert all(steps[s]["hadw/actor_recoveries"] == 0 for s in steps)
    assert steps[2]["hadw/anchor_prior"] == steps[1]["hadw/anchor_posterior"]  # Eq. 12 across real steps
    snapshots = workdir / "straight" / "verl_hadw_anchor"
    assert sorted(p.name for p in snapshots.iterdir()) == ["step_2.json", "step_4.json"]  # 1 and 3: no checkpoint
    saved = json.loads((snapshots / "step_4.json").read_text())
    assert saved["global_step"] == 4 and saved["state"]["open_step"] == 4
    assert saved["state"]["prior"] == steps[4]["hadw/anchor_prior"]
    assert (workdir / "straight" / "global_step_4" / "data.pt").exists()


def test_legacy_resume_continues_the_anchor_exactly(assets, workdir, straight):
    main_ppo(assets, workdir, "resumed", "trainer.total_training_steps=2")
    log, resumed = main_ppo(assets, workdir, "resumed", "trainer.total_training_steps=4", "trainer.resume_mode=auto")
    assert "Resuming from" in log and "global_step_2" in log
    assert sorted(resumed) == [3, 4]
    for step in (3, 4):
        assert {k: resumed[step][k] for k in ANCHOR} == {k: straight[1][step][k] for k in ANCHOR}, step
        assert resumed[step]["hadw/actor_recoveries"] == 0

"""End-to-end checks traded out of CI for its 20-minute budget (docs/cpu.md): run by hand, not collected by the
suite (this file's name is not ``test_*``). Each costs a ``main_ppo`` launch or two that CI's verl 0.9.0 environment now
spends:

- ``verl-hadw study --quick`` through verl's real ``main_ppo`` (~170 core-s: hadw, then grpo at HA-DW's measured
  Φ × lr). CI keeps the statistics, tables and plot on made-up runs (tests/research/test_study.py); ``toy.launch.run``,
  the study's one call into main_ppo, runs in every launch.
- ``algorithm.adv_estimator=gdpo`` with ``+algorithm.dgpo.temperature=2.0``, without the Hydra start-up check: on verl
  0.9.0 (no callback can load) and on 0.9.1 without the callback it is stopped at the first
  advantage (~86 core-s each: the workers start and roll out the first batch); on 0.9.1 with the callback, where verl
  builds it (~37 core-s: Ray and TransferQueue have started). CI keeps the same guard at unit level
  (tests/verl/test_gdpo_with_dgpo_options.py, tests/verl/test_verl_versions.py) and the Hydra start-up
  check on 0.9.0's main_ppo (tests/e2e/test_verl090_e2e.py), which stops it before Ray on 0.9.1 too
  (tests/verl/test_verl_versions.py).
- verl's legacy trainer (``trainer.use_v1=false``) end to end: 3 steps with the anchor snapshotted at each
  checkpoint, and a run resumed from the step-2 checkpoint that logs the same anchor values at step 3 (~175 core-s,
  two launches). CI keeps the snapshot back-end end to end on verl 0.9.0's v1 trainer (the same writer and the same
  restore, tests/e2e/test_verl090_e2e.py) and the legacy trainer's steps through verl's ``compute_advantage`` with
  folders as its ``_save_checkpoint`` writes them (tests/verl/test_legacy_resume.py).

Each test reads the launches of tests/helpers/launches.py it names, with the installed verl; those of verl 0.9.0
need verl 0.9.0 installed (a virtualenv of its own, as the verl-0.9.0 nox session's), the others verl 0.9.1:

    .venv/bin/python -m pytest tests/helpers/by_hand_e2e.py -k "not verl_0_9_0"
    <verl 0.9.0's environment>/bin/python -m pytest tests/helpers/by_hand_e2e.py -k verl_0_9_0
"""

import csv
import importlib.metadata
import json

import pytest
from launches import GDPO_TYPO, HALF, RAY_STARTED, STRAIGHT

from verl_hadw.research import study
from verl_hadw.toy.task import TIERS


@pytest.mark.slow
def test_quick_study_through_main_ppo(quick_study_run):
    """``verl-hadw study --quick`` (the ``quick_study_run`` launch, tests/helpers/launches.py): hadw, then grpo at
    HA-DW's measured Φ × lr, one seed, one step; rerunning skips both runs."""
    from verl_hadw.cli import main

    run = quick_study_run
    assert run.code == 0, run.output[-8000:]
    out, docs = run.out, run.docs
    plan = study.quick_plan(out)
    phi = json.loads((plan.run_dir("grpo_lr_phi", 1) / "phi.json").read_text())
    assert phi["phi"] == pytest.approx(study.measured_phi(plan)) and phi["phi"] > 0
    overrides = json.loads((plan.run_dir("grpo_lr_phi", 1) / "overrides.json").read_text())
    assert f"actor_rollout_ref.actor.optim.lr={phi['lr']:.6g}" in overrides
    assert [o for o in overrides if o.startswith("actor_rollout_ref.actor.optim.lr=")] == [
        f"actor_rollout_ref.actor.optim.lr={phi['lr']:.6g}"]  # one lr: the plan's times Φ
    assert phi["lr"] == pytest.approx(plan.lr * phi["phi"])
    assert "data.train_batch_size=8" in overrides  # the quick plan's batch
    with open(docs / "val_accuracy.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["method"], r["step"]) for r in rows} == {(m, str(s)) for m in ("hadw", "grpo_lr_phi") for s in (0, 1)}
    assert {r["tier"] for r in rows} == {*TIERS, study.ALL}
    assert all(0 <= float(r["val_accuracy"]) <= 1 for r in rows)
    assert (docs / "curves.png").exists()
    done = {m: (plan.run_dir(m, 1) / "DONE").stat().st_mtime for m in ("hadw", "grpo_lr_phi")}
    assert main(["study", "--quick", "--out", str(out)]) == 0  # resumed: nothing left to run
    assert {m: (plan.run_dir(m, 1) / "DONE").stat().st_mtime for m in done} == done


@pytest.mark.slow
def test_gdpo_dgpo_keys_on_verl_0_9_0_stops_before_the_first_update(v090_gdpo_dgpo_keys_run):
    """No start-up check at all (0.9.0 cannot load the callback, the Hydra check removed): nothing of ours stands in
    front of verl's gdpo, whose own assertion (no algorithm.gdpo_reward_keys) stops the first advantage."""
    assert importlib.metadata.version("verl") == "0.9.0"  # the launch runs this interpreter's verl
    run = v090_gdpo_dgpo_keys_run
    assert run.code != 0 and GDPO_TYPO not in run.log
    assert RAY_STARTED in run.log and "verl-hadw start-up check" not in run.log  # it got as far as the trainer
    assert "GDPO requires 'algorithm.gdpo_reward_keys'" in run.log  # verl's own gdpo, untouched
    assert not run.steps  # no step finished: the estimator runs before the step's actor update


@pytest.mark.slow
def test_gdpo_dgpo_keys_on_verl_0_9_1_stops_where_verl_builds_the_callback(v091_gdpo_dgpo_keys_callback_run):
    """The Hydra check removed, the callback left: verl builds it in its driver (a Ray actor) before any worker."""
    assert importlib.metadata.version("verl") == "0.9.1"  # the launch runs this interpreter's verl
    run = v091_gdpo_dgpo_keys_callback_run
    assert run.code != 0 and GDPO_TYPO in run.log
    assert RAY_STARTED in run.log and "verl-hadw start-up check" not in run.log  # in verl's driver, not before Ray
    assert "GDPO requires 'algorithm.gdpo_reward_keys'" not in run.log and not run.steps
    assert "verl_hadw/verl/checkpoint_callback.py" in run.log  # raised where verl built the callback
    assert not any(worker in run.log for worker in ("WorkerDict", "AgentLoopWorker", "HFCPUServer"))  # none started


@pytest.mark.slow
def test_gdpo_dgpo_keys_on_verl_0_9_1_without_the_callback_stops_before_the_first_update(v091_gdpo_dgpo_keys_run):
    """No start-up check at all (no callback, no Hydra check): nothing of ours stands in front of verl's gdpo, whose
    own assertion (no algorithm.gdpo_reward_keys) stops the first advantage."""
    assert importlib.metadata.version("verl") == "0.9.1"  # the launch runs this interpreter's verl
    run = v091_gdpo_dgpo_keys_run
    assert run.code != 0 and GDPO_TYPO not in run.log
    assert RAY_STARTED in run.log and "verl-hadw start-up check" not in run.log  # it got as far as the trainer
    assert "GDPO requires 'algorithm.gdpo_reward_keys'" in run.log  # verl's own gdpo, untouched
    assert not run.steps  # no step finished: the estimator runs before the step's actor update


# ------------------------------------------------------------------------------ verl's legacy trainer
LEGACY_METRICS = ["hadw/phi_mean", "hadw/phi_min", "hadw/phi_max", "hadw/frac_amplified", "hadw/actor_recoveries"]
LEGACY_ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t"]


@pytest.mark.slow
def test_legacy_run_snapshots_the_anchor_of_each_checkpoint(legacy_straight_run):
    straight = legacy_straight_run
    log, steps = straight.log, straight.steps
    assert "main_ppo_v0" in log or "Legacy trainer" in log
    assert sorted(steps) == list(range(1, STRAIGHT + 1))
    for values in steps.values():
        assert all(m in values for m in LEGACY_METRICS)
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


@pytest.mark.slow
def test_legacy_resume_continues_the_anchor_exactly(legacy_straight_run, legacy_resumed_run):
    """Resumed from the uninterrupted run's step-2 checkpoint and anchor snapshot (a job killed after it saved)."""
    straight, resumed = legacy_straight_run, legacy_resumed_run
    assert "Resuming from" in resumed.log and f"global_step_{HALF}" in resumed.log
    assert sorted(resumed.steps) == list(range(HALF + 1, STRAIGHT + 1))
    for step in range(HALF + 1, STRAIGHT + 1):
        expected = {k: straight.steps[step][k] for k in LEGACY_ANCHOR}
        assert {k: resumed.steps[step][k] for k in LEGACY_ANCHOR} == expected, step
        assert resumed.steps[step]["hadw/actor_recoveries"] == 0

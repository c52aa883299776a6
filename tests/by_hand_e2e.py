"""End-to-end checks traded out of CI for its 20-minute budget (docs/cpu.md): run by hand, not collected by the
suite (this file's name is not ``test_*``). Each costs a ``main_ppo`` launch or two that CI's verl 0.9.0 cell now
spends:

- ``verl-hadw study --quick`` through verl's real ``main_ppo`` (~170 core-s: hadw, then grpo at HA-DW's measured
  Φ × lr). CI keeps the statistics, tables and plot on made-up runs (tests/test_study.py); ``toy.launch.run``, the
  study's one call into main_ppo, runs in every launch.
- verl 0.9.0 without any start-up check: the ``gdpo`` slip stopped at the first advantage (~86 core-s: the workers
  start and roll out the first batch). CI keeps the same guard at unit level (tests/test_verl_versions.py) and the
  Hydra start-up check on 0.9.0's main_ppo (tests/test_verl090_e2e.py).

    .venv/bin/python -m pytest tests/by_hand_e2e.py
"""

import csv
import json

import pytest
from e2e_stage import RAY_STARTED
from test_verl090_e2e import SLIP

from verl_hadw.research import study
from verl_hadw.toy.task import TIERS


@pytest.mark.slow
@pytest.mark.e2e("quick_study")
def test_quick_study_through_main_ppo(e2e):
    """``verl-hadw study --quick`` (the session's ``quick_study`` launch, tests/e2e_runs.py): hadw, then grpo at
    HA-DW's measured Φ × lr, one seed, one step; rerunning skips both runs."""
    from verl_hadw.cli import main

    run = e2e.result("quick_study")
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
@pytest.mark.e2e("v090_gdpo_slip")
def test_gdpo_slip_on_verl_0_9_0_stops_before_the_first_update(e2e):
    """No start-up check at all (0.9.0 cannot load the callback, the Hydra check removed): the guard in front of
    verl's gdpo stops the first advantage."""
    run = e2e.result("v090_gdpo_slip")
    assert run.code != 0 and SLIP in run.log
    assert RAY_STARTED in run.log and "verl-hadw start-up check" not in run.log  # it got as far as the trainer
    assert "GDPO requires 'algorithm.gdpo_reward_keys'" not in run.log  # verl's own assertion never ran
    assert not run.steps  # no step finished: the estimator runs before the step's actor update

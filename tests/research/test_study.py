"""``verl-hadw study``: the statistics on made-up runs. Its quick mode through verl's main_ppo is
tests/helpers/by_hand_e2e.py (by hand: CI's budget went to verl 0.9.0's environment)."""

import csv
import json
import math

import numpy as np
import pytest

from verl_hadw.research import study
from verl_hadw.toy.task import TIERS


def fake_run(plan, method, seed, accuracy, phi=None):
    """A finished run directory whose metrics say ``accuracy(step, tier)`` at each validation."""
    run_dir = plan.run_dir(method, seed)
    run_dir.mkdir(parents=True)
    steps = {}
    for step in range(0, plan.steps + 1):
        values = {"critic/score/mean": 0.5} if step else {}
        if phi is not None and step:
            values[study.PHI_METRIC] = phi
        if step % plan.test_freq == 0:
            values.update({study.val_key(t, plan.val_n): accuracy(step, t) for t in TIERS})
        steps[step] = values
    (run_dir / "metrics.json").write_text(json.dumps(steps))
    (run_dir / "DONE").write_text("0 s\n")


def test_tables_intervals_and_paired_tests(tmp_path):
    plan = study.StudyPlan(out=tmp_path, methods=["hadw", "grpo"], seeds=[1, 2, 3], steps=4, test_freq=2)
    offsets = {1: 0.0, 2: 0.1, 3: 0.3}  # per-seed level, shared by both methods: pairing removes it
    for seed, off in offsets.items():
        fake_run(plan, "grpo", seed, lambda s, t, o=off: o + 0.05 * s, phi=None)
        fake_run(plan, "hadw", seed, lambda s, t, o=off, k=seed: o + 0.05 * s + 0.01 * (k + 1) * (s > 0), phi=1.2)
    runs = study.load_runs(plan)
    rows = study.val_table(plan, runs)
    assert {r["step"] for r in rows} == {0, 2, 4}
    assert {r["tier"] for r in rows} == {*TIERS, study.ALL}
    assert len(rows) == 2 * 3 * 3 * (len(TIERS) + 1)
    summary = {(r["method"], r["tier"]): r for r in study.summarise(rows, ["hadw", "grpo"])}
    grpo = summary["grpo", "easy"]
    finals = [o + 0.2 for o in offsets.values()]
    half = 4.302653 * np.std(finals, ddof=1) / math.sqrt(3)  # t(0.975, 2 df)
    assert grpo["final"] == pytest.approx(np.mean(finals)) and grpo["final_ci"] == pytest.approx(half, rel=1e-5)
    assert grpo["auc"] == pytest.approx(np.mean([o + 0.15 for o in offsets.values()]))
    tests = {(r["method"], r["versus"], r["tier"], r["score"]): r for r in study.paired_tests(rows, ["hadw", "grpo"])}
    diff = tests["hadw", "grpo", "all", "final"]
    assert diff["diff"] == pytest.approx(0.03) and diff["ahead"] == 3 and diff["seeds"] == 3
    assert diff["p"] < 0.05  # differences 0.02, 0.03, 0.04: consistent although the seeds' levels differ by 0.3
    assert study.measured_phi(plan) == pytest.approx(1.2)
    paths = study.write_outputs(plan)
    with open(tmp_path / "val_accuracy.csv") as f:
        header = next(csv.reader(f))
    assert header == ["method", "seed", "step", "tier", "val_accuracy"]
    assert (tmp_path / "curves.png").stat().st_size > 10_000 and len(paths) == 4
    assert "hadw − grpo" in (tmp_path / "summary.md").read_text()


def test_plan_refuses_what_it_cannot_run(tmp_path):
    with pytest.raises(ValueError, match="valid"):
        study.StudyPlan(out=tmp_path, methods=["ppo"])
    with pytest.raises(ValueError, match="needs method hadw"):
        study.StudyPlan(out=tmp_path, methods=["grpo", "grpo_lr_phi"])
    with pytest.raises(RuntimeError, match="finished hadw runs"):
        study.measured_phi(study.StudyPlan(out=tmp_path))
    with pytest.raises(ValueError, match="prompts"):
        study.StudyPlan(out=tmp_path, prompts=0)
    with pytest.raises(ValueError, match="lr"):
        study.StudyPlan(out=tmp_path, lr=0)


def test_the_study_sets_its_own_batch_whatever_the_demo_trains(tmp_path):
    """The committed study trained 16 prompts a step at lr 5e-3; its runs say so themselves, so a later change of
    the demo's batch or learning rate (configs/cpu/demo.yaml) leaves a rerun of the study the same study."""
    overrides = study.base_overrides(study.StudyPlan(out=tmp_path), "hadw", 3)
    assert "data.train_batch_size=16" in overrides and "actor_rollout_ref.actor.ppo_mini_batch_size=16" in overrides
    assert "actor_rollout_ref.actor.optim.lr=0.005" in overrides  # the study's lr, whatever the demo's
    assert "data.seed=3" in overrides and "trainer.total_training_steps=30" in overrides


def test_the_arithmetic_runs_go_to_verl_with_the_task_and_are_read_by_its_tiers(tmp_path, monkeypatch):
    """``--task arith``: each run is main_ppo with the task's config and 8 answers a prompt, and its validation is read
    from verl's ``val-core/arith_<tier>/...`` metrics (the toy's keys would read nothing)."""
    import verl_hadw.toy.launch as launch

    plan = study.arith_plan(tmp_path)
    calls = []

    def fake_main_ppo(assets, overrides, **kwargs):
        calls.append((overrides, kwargs))
        values = " - ".join(f"val-core/arith_{t}/acc/mean@4:0.25" for t in TIERS)
        return 0, f"{study.RAY_STARTED}\n(TaskRunner pid=1) step:0 - {values}\n"

    monkeypatch.setattr(launch, "run", fake_main_ppo)
    assert study.run_one(plan, "hadw", 1, log=lambda msg: None)
    overrides, kwargs = calls[0]
    assert kwargs["task"] == "arith" and kwargs["test_rows"] == 400
    assert "actor_rollout_ref.rollout.n=8" in overrides and "actor_rollout_ref.actor.optim.lr=0.0003" in overrides
    rows = study.val_table(plan, study.load_runs(plan))
    assert {(r["tier"], r["val_accuracy"]) for r in rows} == {*((t, 0.25) for t in TIERS), (study.ALL, 0.25)}
    with pytest.raises(ValueError, match="task must be one of toy, arith"):
        study.StudyPlan(out=tmp_path, task="chess")


def test_toy_rows_hold_the_tiers_in_equal_shares_one_data_source_each():
    from verl_hadw.toy.task import compute_score, data_source, make_rows

    rows = make_rows(32, seed=1, split="test")
    assert [r["extra_info"]["tier"] for r in rows[:4]] == list(TIERS)
    for tier in TIERS:
        mine = [r for r in rows if r["extra_info"]["tier"] == tier]
        assert len(mine) == 8 and {r["data_source"] for r in mine} == {data_source(tier)}
    sizes = {tier: {r["extra_info"]["set_size"] for r in rows if r["extra_info"]["tier"] == tier} for tier in TIERS}
    assert sizes["easy"] == {26} and sizes["medium"] == {10} and sizes["hard"] == {5} and sizes["hardest"] <= {2, 3}
    hardest = next(r for r in rows if r["extra_info"]["tier"] == "hardest")
    allowed = hardest["reward_model"]["ground_truth"]
    assert compute_score("x", f" {allowed[0]}<|im_end|>", allowed) == 1.0
    assert compute_score("x", "a", allowed) == 0.0 and compute_score("x", "  ", allowed) == 0.0


def test_runs_start_hadw_first_and_grpo_lr_phi_waits_for_every_hadw_run(tmp_path, monkeypatch):
    import threading
    import time

    plan = study.StudyPlan(out=tmp_path, seeds=[1, 2, 3], steps=2, test_freq=1)
    started, finished, lock = [], set(), threading.Lock()

    def fake_run_one(plan_, method, seed, log=print):  # stands in for main_ppo: a made-up finished run
        with lock:
            started.append((method, seed))
            if method == "grpo_lr_phi":
                assert {("hadw", s) for s in plan.seeds} <= finished
        time.sleep(0.05 if method == "hadw" else 0.01)
        fake_run(plan, method, seed, lambda s, t: 0.5, phi=1.25 if method == "hadw" else None)
        with lock:
            finished.add((method, seed))
        return True

    monkeypatch.setattr(study, "run_one", fake_run_one)
    study.run_study(plan, workers=3, log=lambda msg: None)
    assert started[:3] == [("hadw", 1), ("hadw", 2), ("hadw", 3)]
    assert [m for m, _ in started].count("grpo_lr_phi") == 3 and len(started) == 15
    assert (tmp_path / "curves.png").exists()


def test_comparisons_cover_each_method_against_grpo_and_both_controls():
    pairs = study.comparisons(list(study.METHODS))
    assert {(m, "grpo") for m in study.METHODS if m != "grpo"} <= set(pairs)
    assert ("hadw", "grpo_lr_phi") in pairs  # the step-size control
    assert ("hadw_dgpo", "dgpo") in pairs  # what HA-DW adds to DGPO
    assert study.comparisons(["grpo", "hadw"]) == [("hadw", "grpo")]


def test_grpo_lr_phi_runs_at_the_study_lr_times_the_measured_phi(tmp_path, monkeypatch):
    """run_one's overrides without main_ppo: verl's launcher stands in, answering with a one-step console log."""
    import verl_hadw.toy.launch as launch

    plan = study.StudyPlan(out=tmp_path, methods=["hadw", "grpo_lr_phi"], seeds=[1], steps=1, test_freq=1, lr=4e-3)
    fake_run(plan, "hadw", 1, lambda s, t: 0.5, phi=1.25)
    seen = []

    def fake_main_ppo(assets, overrides, **kwargs):
        seen.append(overrides)
        return 0, f"{study.RAY_STARTED}\n(TaskRunner pid=1) step:1 - critic/score/mean:0.5\n"

    monkeypatch.setattr(launch, "run", fake_main_ppo)
    assert study.run_one(plan, "grpo_lr_phi", 1, log=lambda msg: None)
    lrs = [o for o in seen[0] if o.startswith("actor_rollout_ref.actor.optim.lr=")]
    assert lrs == ["actor_rollout_ref.actor.optim.lr=0.005"]  # 4e-3 x 1.25, once
    phi = json.loads((plan.run_dir("grpo_lr_phi", 1) / "phi.json").read_text())
    assert phi == {"study_lr": 4e-3, "phi": 1.25, "lr": pytest.approx(5e-3)}
    assert "data.train_batch_size=16" in seen[0] and (plan.run_dir("grpo_lr_phi", 1) / "DONE").exists()
    assert not study.run_one(plan, "grpo_lr_phi", 1, log=lambda msg: None) and len(seen) == 1  # done: skipped

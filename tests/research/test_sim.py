"""verl_hadw.research.sim: determinism, verl's batch layout, advantages identical to verl's compute_advantage, the
policy-gradient step, the optimisers' λ behaviour, aggregation, and the ``verl-hadw simulate`` command."""

import csv
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from sim_helpers import SMALL, same_records
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.research.sim.env import Policy, Population, policy_loss, sample_rollout
from verl_hadw.research.sim.methods import METHODS, SUITES, resolve
from verl_hadw.research.sim.report import summarise
from verl_hadw.research.sim.runner import run_many, run_one
from verl_hadw.verl import metrics, process_state
from verl_hadw.verl.config.run_options import parse_run


# ------------------------------------------------------------------------------------- determinism
def test_a_run_is_deterministic_for_a_seed_and_seeds_differ():
    a = run_one(METHODS["hadw"], 5, SMALL)
    b = run_one(METHODS["hadw"], 5, SMALL)
    c = run_one(METHODS["hadw"], 6, SMALL)
    assert len(a) == SMALL.steps + 1 and same_records(a, b)
    assert a[-1]["acc_train"] != c[-1]["acc_train"]
    assert a[-1]["acc_train"] > a[0]["acc_train"]  # it learns


@pytest.mark.slow
def test_run_many_does_not_depend_on_the_worker_count():
    cfg = replace(SMALL, steps=4)
    methods = resolve("grpo,hadw")
    one = run_many(methods, range(2), cfg, workers=1)
    two = run_many(methods, range(2), cfg, workers=2)
    assert len(one) == 2 * 2 * 5 and same_records(one, two)
    assert [r["method"] for r in one[:5]] == ["grpo"] * 5  # sorted by method order, seed, step


# --------------------------------------------------------------------------- verl's batch and path
def test_rollouts_have_verls_batch_layout():
    population = Population.make(SMALL, 0)
    rollout = sample_rollout(Policy(population), SMALL, np.random.default_rng(1), group=8)
    n = SMALL.batch_prompts * 8
    assert rollout.n_pad == (-n) % SMALL.pad_divisor > 0 and len(rollout.uid) == n + rollout.n_pad
    pad = ~rollout.valid
    assert len(set(rollout.uid[pad])) == 1 and str(rollout.uid[pad][0]).startswith("pad")
    assert torch.all(rollout.response_mask[torch.as_tensor(pad)] == 0)
    assert torch.all(rollout.token_level_rewards[torch.as_tensor(pad)] == 0)
    uids, counts = np.unique(rollout.uid[rollout.valid].astype(str), return_counts=True)
    assert len(uids) == SMALL.batch_prompts and np.all(counts == 8)
    first = np.flatnonzero(rollout.uid == uids[0])
    assert np.any(np.diff(first) > 1) or any(np.any(np.diff(np.flatnonzero(rollout.uid == u)) > 1) for u in uids)
    lengths = rollout.response_mask.sum(-1).long()
    valid = torch.as_tensor(rollout.valid)
    assert torch.all(lengths[valid] >= SMALL.min_response_length) and lengths[valid].unique().numel() > 1
    last = rollout.token_level_rewards[valid].gather(1, (lengths[valid] - 1)[:, None]).squeeze(1)
    assert torch.equal(last, torch.as_tensor(rollout.correct[rollout.valid], dtype=torch.float32))
    assert torch.equal(rollout.token_level_rewards.sum(-1)[valid], last)


@pytest.mark.parametrize(
    "name", ["grpo", "hadw", "hadw_ma", "hadw_released", "hadw_fixed0.4", "dgpo", "hadw_dgpo", "grpo_G16"]
)
def test_simulator_advantages_equal_verls_compute_advantage_on_the_same_batches(name):
    method = METHODS[name]
    seen = []
    def on_step(t, rollout, data):
        seen.append((t, rollout, data.batch["advantages"].clone()))

    records = run_one(method, 2, SMALL, on_step=on_step)
    assert [t for t, _, _ in seen] == list(range(1, SMALL.steps + 1))
    # replay every batch through verl's trainer entry point with a fresh anchor, as a trainer would
    process_state.reset()
    config = OmegaConf.create(method.algorithm("replay"))
    for (t, rollout, advantages), record in zip(seen, records[1:]):
        data = DataProto.from_dict(
            tensors={"token_level_rewards": rollout.token_level_rewards, "response_mask": rollout.response_mask},
            non_tensors={"uid": rollout.uid},
        )
        SkipManager.set_step(t)
        expected = compute_advantage(data, method.estimator, config=config).batch["advantages"]
        replay_metrics = metrics.pop(t)
        assert torch.equal(advantages, expected), (name, t)
        assert torch.all(advantages[torch.as_tensor(~rollout.valid)] == 0)
        if method.estimator == "hadw":
            assert record["anchor_prior"] == replay_metrics["hadw/anchor_prior"]
            assert record["phi_mean"] == replay_metrics["hadw/phi_mean"]
    assert any(a.abs().sum() > 0 for _, _, a in seen)


def test_hadw_records_follow_the_anchor_equations():
    records = run_one(METHODS["hadw"], 1, SMALL)
    steps = records[1:]
    assert steps[0]["anchor_prior"] == pytest.approx(steps[0]["batch_acc"])  # C⁻ of step 1 = y_1 (init)
    for prev, cur in zip(steps, steps[1:]):
        assert cur["anchor_prior"] == pytest.approx(prev["anchor_posterior"])  # Eq. 12: C_t⁺ -> C_{t+1}⁻
    grpo = run_one(METHODS["grpo"], 1, SMALL)
    assert math.isnan(grpo[3]["anchor_prior"]) and not math.isnan(steps[2]["phi_mean"])
    assert records[0]["acc_hard"] < records[0]["acc_train"] < 0.5  # many hard prompts at the start


# ------------------------------------------------------------------------------------ the update
def test_policy_gradient_step_matches_the_closed_form():
    population = Population.make(SMALL, 3)
    policy = Policy(population)
    rollout = sample_rollout(policy, SMALL, np.random.default_rng(4), group=8)
    advantages = torch.randn(rollout.response_mask.shape[0], 1) * rollout.response_mask  # any per-row A
    u0, s0 = policy.u.detach().clone(), policy.s.detach().clone()
    p = torch.sigmoid(s0 + u0)
    scale, lr_u, lr_s = 7.0, 0.3, 0.05
    policy.step(policy_loss(policy, rollout, advantages, scale), lr_u, lr_s, SMALL)

    valid = rollout.valid
    prompt = torch.as_tensor(rollout.prompt[valid])
    a = advantages[torch.as_tensor(valid), 0].double()
    r = torch.as_tensor(rollout.correct[valid], dtype=torch.float64)
    score = a * (r - p[prompt])  # A · ∂log π/∂z, whatever the response length
    n_tokens = rollout.response_mask.sum().double()
    du = torch.zeros_like(u0).index_add_(0, prompt, score) * scale / n_tokens
    assert torch.allclose(policy.u.detach() - u0, lr_u * du, atol=1e-12)
    assert torch.allclose(policy.s.detach() - s0, lr_s * du.sum(), atol=1e-12)


def test_rms_optimiser_cancels_lambda_sgd_does_not():
    cfg = replace(SMALL, steps=8)
    rms = replace(cfg, optimizer="rms")
    lam1, lam2 = METHODS["hadw_lam1"], METHODS["hadw_lam2"]
    a, b = run_one(lam1, 0, rms), run_one(lam2, 0, rms)
    assert np.allclose([r["acc_train"] for r in a], [r["acc_train"] for r in b], rtol=0, atol=1e-9)
    assert b[-1]["adv_abs_mean"] == pytest.approx(2 * a[-1]["adv_abs_mean"])  # same batches, advantages × 2
    c, d = run_one(lam1, 0, cfg), run_one(lam2, 0, cfg)
    assert d[-1]["acc_train"] - c[-1]["acc_train"] > 1e-3  # SGD: λ is a step size


# ----------------------------------------------------------------------------- methods and report
def test_every_method_is_a_valid_verl_algorithm_node_and_suites_cover_the_issue():
    for m in METHODS.values():
        node = OmegaConf.create(m.algorithm(f"k/{m.name}"))
        hadw, dgpo = parse_run(node).hadw, parse_run(node).dgpo
        assert hadw.state_key == f"k/{m.name}"
        if m.estimator == "hadw":
            assert hadw.lambda_scale == m.lambda_scale
            assert hadw.anchor.mode == m.hadw.get("anchor", {}).get("mode", "kalman")
            assert hadw.base == m.hadw.get("base", "grpo") and dgpo.dqw
    needed = {"grpo", "grpo_G16", "hadw", "dgpo", "hadw_dgpo", "grpo_lrx1.3", "hadw_normphi", "hadw_fixed0.5",
              "hadw_ma", "hadw_eta1", "hadw_sigacc_eta4", "hadw_lam1.5"}
    assert needed <= set(SUITES["all"])
    assert METHODS["grpo_G16"].group == 16 and METHODS["grpo_lrx1.3"].lr_mult == 1.3
    with pytest.raises(ValueError, match="unknown method"):
        resolve("grpo,hadw_typo")


def test_summary_pairs_seeds_against_grpo():
    def run(method, seed, final_train, final_hard):
        return [{"method": method, "seed": seed, "step": t, "acc_train": 0.3 + t * (final_train - 0.3),
                 "acc_hard": final_hard * t, "acc_heldout": 0.3, "adv_abs_mean": 0.5 * t or float("nan"),
                 "phi_mean": float("nan"), "anchor_prior": float("nan"), "anchor_posterior": float("nan")}
                for t in (0, 1)]

    records = run("grpo", 0, 0.70, 0.30) + run("grpo", 1, 0.60, 0.20)
    records += run("hadw", 0, 0.75, 0.25) + run("hadw", 1, 0.64, 0.30)
    rows = {r["method"]: r for r in summarise(records, resolve("grpo,hadw"))}
    assert rows["hadw"]["acc_train_vs_grpo"] == pytest.approx(0.045)
    assert rows["hadw"]["acc_train_vs_grpo_sd"] == pytest.approx(np.std([0.05, 0.04], ddof=1))
    assert rows["hadw"]["acc_train_wins"] == 2 and rows["hadw"]["acc_hard_wins"] == 1
    assert rows["grpo"]["acc_train_vs_grpo"] == 0.0 and rows["hadw"]["acc_train_final"] == pytest.approx(0.695)
    assert "anchor_lag" not in rows["hadw"]  # no anchor values recorded


@pytest.mark.slow
def test_simulate_command_writes_csv_and_png(tmp_path, capsys):
    from verl_hadw.cli import main

    suite = "grpo,grpo_lrx1.3,hadw,hadw_lam1,hadw_normphi,hadw_fixed0.5,hadw_eta1"
    argv = ["simulate", "--out", str(tmp_path), "--suite", suite, "--seeds", "2", "--steps", "5", "--workers", "1",
            "--prompts", "256", "--batch-prompts", "16", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| hadw_lam1 | 8 | 1 | 1 |" in out and "simulated 14 runs" in out
    with open(tmp_path / "steps.csv") as f:
        steps = list(csv.DictReader(f))
    assert len(steps) == 7 * 2 * 6 and {r["method"] for r in steps} == set(suite.split(","))
    with open(tmp_path / "summary.csv") as f:
        summary = {r["method"]: r for r in csv.DictReader(f)}
    assert float(summary["grpo"]["acc_train_vs_grpo"]) == 0.0 and float(summary["hadw"]["phi_mean"]) > 1.0
    assert float(summary["hadw_eta1"]["anchor_moved"]) < float(summary["hadw"]["anchor_moved"])  # η = 1 barely moves
    for name in ("curves.png", "lambda.png", "anchor.png", "summary.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert (tmp_path / "summary.md").read_text().startswith("| method |")

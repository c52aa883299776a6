"""The authors' released HA-DW code as a run: ``algorithm.hadw.difficulty_from=reward`` and the shipped
``hadw_released_*`` configs, checked against an independent re-implementation of the released estimator.

The reference below is written from the description of ``yangfengkai/HA-DW``'s
``core_algos.compute_ha_dw_outcome_advantage`` and trainer (papers.md §1.4), in NumPy float64, with no
verl_hadw code: the trainer appends the batch mean reward to a deque of the last k before computing the
advantage, the anchor is that deque's mean, p̂ is the group mean reward, D = -sign(p̂ - C)·sign(r - p̂),
Φ = 1.5·exp(D·|p̂ - C|), A = Φ·(r - p̂)/(std_unbiased + ε); without std normalisation A = r - p̂ and no Φ.
"""

from __future__ import annotations

import zlib
from collections import deque

import numpy as np
import pytest
import torch
from batches import algo, flat_config, make_inputs, row_adv
from omegaconf import OmegaConf
from repo_paths import ROOT
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from verl_hadw.repro import catalogue as K
from verl_hadw.repro import compose as C
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage

pytestmark = pytest.mark.filterwarnings("ignore:Disabled critic as algorithm.adv_estimator != gae")

MODELS = ("qwen3_4b", "qwen3_8b", "llama3_3b")


class ReleasedHadw:
    """The released estimator plus the trainer's reward history (deque(maxlen=k), current batch appended first)."""

    def __init__(self, k=10, scale=1.5, eps=1e-6, norm_by_std=True):
        self.history, self.scale, self.eps, self.norm_by_std = deque(maxlen=k), scale, eps, norm_by_std

    def __call__(self, scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
        scores = scores.astype(np.float64)
        self.history.append(scores.mean())
        hist_mean = float(np.mean(self.history))
        out = np.empty_like(scores)
        for g in np.unique(groups):  # a plain loop on purpose: nothing shared with the vectorised estimator
            rows = groups == g
            r = scores[rows]
            gmean, gstd = r.mean(), r.std(ddof=1)
            if not self.norm_by_std:
                out[rows] = r - gmean
                continue
            hist_diff = gmean - hist_mean
            direction = -np.sign(hist_diff) * np.sign(r - gmean)
            out[rows] = self.scale * np.exp(direction * abs(hist_diff)) * (r - gmean) / (gstd + self.eps)
        return out


def released_algorithm(run: str, state_key: str):
    """The shipped run's ``algorithm`` node, resolved, with a test-local anchor key."""
    node = OmegaConf.to_container(C.compose_run(run).algorithm, resolve=True)
    node["hadw"]["state_key"] = state_key
    return node


def random_batch(rng, kind: str, n_groups=6, group_size=8):
    groups = np.repeat(np.arange(n_groups), group_size)
    n = groups.size
    if kind == "binary":
        p = rng.uniform(0.05, 0.95, n_groups)[groups]
        scores = (rng.uniform(size=n) < p).astype(np.float64)
    elif kind == "signed":  # DAPO-like: ±1 with an overlong penalty in [-1, 0]
        scores = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0) - np.where(
            rng.uniform(size=n) < 0.2, rng.uniform(size=n), 0.0
        )
    else:  # continuous rewards anywhere in [-2, 3]
        scores = rng.uniform(-2.0, 3.0, n)
    return scores, groups


# ------------------------------------------------------------------------------------- the estimator
@pytest.mark.slow  # every released run, three reward kinds: seconds
@pytest.mark.parametrize("kind", ["binary", "signed", "continuous"])
@pytest.mark.parametrize("run", [f"hadw_released_{m}_grpo" for m in MODELS])
def test_released_runs_compute_the_released_estimator(run, kind):
    """14 steps (past the window of 10) of random batches: the shipped config == the reference, step by step."""
    rng = np.random.default_rng(zlib.crc32(f"{run}/{kind}".encode()))
    config = released_algorithm(run, f"released/{run}/{kind}")
    reference = ReleasedHadw()
    for step in range(14):
        scores, groups = random_batch(rng, kind)
        rewards, mask, index = make_inputs(scores, groups)
        adv, _ = compute_hadw_outcome_advantage(rewards, mask, index=index, config=config)
        expected = reference(scores.astype(np.float32), groups)  # the estimator sees float32 rewards
        np.testing.assert_allclose(row_adv(adv, mask).numpy(), expected, rtol=2e-5, atol=2e-5, err_msg=f"step {step}")


def test_released_code_without_std_normalisation_is_plain_dr_grpo():
    """Why no option for the released code's norm_adv_by_std_in_grpo=false branch: it applies no Φ at all, which
    is verl's own grpo estimator without std normalisation; our hadw would apply Φ (documented)."""
    rng = np.random.default_rng(3)
    reference = ReleasedHadw(norm_by_std=False)
    for _ in range(3):
        scores, groups = random_batch(rng, "binary")
        rewards, mask, index = make_inputs(scores, groups)
        verl_adv, _ = compute_grpo_outcome_advantage(rewards, mask, index=index, norm_adv_by_std_in_grpo=False)
        np.testing.assert_allclose(row_adv(verl_adv, mask).numpy(), reference(scores, groups), atol=1e-6)
    config = algo(
        difficulty_from="reward",
        lambda_scale=1.5,
        norm=False,
        anchor={"mode": "moving_average", "include_current": True},
    )
    ours, _ = compute_hadw_outcome_advantage(rewards, mask, index=index, config=config)
    assert not torch.allclose(ours, verl_adv)  # Φ ≠ 1 here: run the released no-Φ branch as adv_estimator=grpo


def test_reward_and_accuracy_agree_on_binary_rewards():
    """On {0, 1} rewards the mean reward is the accuracy: both settings give the same advantages, step by step."""
    rng = np.random.default_rng(5)
    anchor = {"mode": "kalman", "eta": 4.0}
    for _ in range(6):
        scores, groups = random_batch(rng, "binary")
        inputs = make_inputs(scores, groups)
        by_acc, _ = compute_hadw_outcome_advantage(
            *inputs[:2], index=inputs[2], config=algo(state_key="a", anchor=anchor)
        )
        by_reward, _ = compute_hadw_outcome_advantage(
            *inputs[:2], index=inputs[2], config=algo(state_key="r", difficulty_from="reward", anchor=anchor)
        )
        torch.testing.assert_close(by_reward, by_acc)


def test_reward_difficulty_needs_no_threshold_but_accuracy_does():
    scores, groups = random_batch(np.random.default_rng(0), "signed")
    rewards, mask, index = make_inputs(scores, groups)
    with pytest.raises(ValueError, match="algorithm.hadw.success_threshold"):
        compute_hadw_outcome_advantage(rewards, mask, index=index, config=algo(state_key="a"))
    adv, _ = compute_hadw_outcome_advantage(
        rewards, mask, index=index, config=algo(state_key="r", difficulty_from="reward")
    )
    assert torch.isfinite(adv).all() and adv.abs().sum() > 0


def test_dgpo_base_is_unchanged_by_reward_difficulty():
    """base=dgpo: DQW still weighs questions by accuracy (threshold); only Φ's p̂ and anchor use the reward."""
    rng = np.random.default_rng(9)
    scores, groups = random_batch(rng, "signed")
    rewards, mask, index = make_inputs(scores, groups)
    dgpo = {"success_threshold": 0.0}
    base, _ = compute_dgpo_outcome_advantage(rewards, mask, index=index, config={"dgpo": dgpo})
    config = algo(
        difficulty_from="reward", base="dgpo", lambda_scale=1.5, dgpo=dgpo, anchor={"mode": "fixed", "fixed_value": 0.1}
    )
    adv, _ = compute_hadw_outcome_advantage(rewards, mask, index=index, config=config)
    p_hat = np.array([scores[groups == g].mean() for g in groups])
    base_rows = row_adv(base, mask).numpy()
    phi = 1.5 * np.exp(-np.sign(base_rows) * np.sign(p_hat - 0.1) * np.abs(p_hat - 0.1))
    np.testing.assert_allclose(row_adv(adv, mask).numpy(), base_rows * phi, rtol=1e-5, atol=1e-6)


def test_difficulty_from_rejects_unknown_values():
    scores, groups = random_batch(np.random.default_rng(0), "binary")
    with pytest.raises(
        ValueError, match=r"algorithm.hadw.difficulty_from='score' is not valid; choose one of: accuracy, reward"
    ):
        compute_hadw_outcome_advantage(
            *make_inputs(scores, groups)[:2], index=groups, config=algo(difficulty_from="score")
        )


# ----------------------------------------------------------------------------------------- the runs
def test_released_runs_are_catalogued_one_per_table1_model():
    files = {p.stem for p in (ROOT / "configs").glob("*/experiments/hadw_released_*.yaml")}
    assert files == set(K.RELEASED_CODE_RUNS) == {f"hadw_released_{m}_grpo" for m in MODELS}
    all_files = {p.stem for p in (ROOT / "configs").glob("*/experiments/*.yaml")}
    assert all_files == set(K.run_names()) | set(K.ALIASES) | set(K.RELEASED_CODE_RUNS)
    assert not set(K.RELEASED_CODE_RUNS) & set(K.run_names())  # no paper row, no launch-plan entry
    for run, twin in K.RELEASED_CODE_RUNS.items():
        assert twin in K.run_names("hadw")
        assert C.describe(run).startswith("HA-DW as the authors' released code computes it")


@pytest.mark.slow
@pytest.mark.parametrize("run", sorted(K.RELEASED_CODE_RUNS))
def test_released_run_validates_and_differs_from_the_paper_run_only_in_the_estimator(run, capsys):
    cfg = C.compose_run(run, fast=False)
    resolved = C.validate_like_main_ppo(cfg.copy(), deep=True)["resolved"]
    assert "All configuration checks passed successfully!" in capsys.readouterr().out
    assert resolved.algorithm.hadw.state_key == f"hadw/{run}"
    a, b = flat_config(cfg), flat_config(C.compose_run(K.RELEASED_CODE_RUNS[run], fast=False))
    differing = {k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>")}
    assert differing == {
        "trainer.experiment_name", "algorithm.hadw.lambda_scale", "algorithm.hadw.difficulty_from",
        "algorithm.hadw.anchor.mode", "algorithm.hadw.anchor.include_current",
    }
    assert a["algorithm.hadw.lambda_scale"] == 1.5 and a["algorithm.hadw.anchor.window"] == 10
    assert a["algorithm.norm_adv_by_std_in_grpo"] is True and a["algorithm.adv_estimator"] == "hadw"

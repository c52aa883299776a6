"""The simulator's synthetic RLVR environment: prompts, a logit policy, verl-shaped rollout batches, the PG loss.

Prompt i has a latent logit z0_i ~ N(difficulty_mean, difficulty_std²); the policy solves it with p_i = σ(s + u_i),
a per-prompt logit u_i (from z0_i) and a shared skill s (from 0), which alone reaches the held-out prompts.
The model, the batches and the optimisers: docs/analysis.md, "Simulator".
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import torch

from verl_hadw.research.sim.config import SimConfig

__all__ = ["SimConfig", "Population", "Policy", "Rollout", "sample_rollout", "to_dataproto", "policy_loss"]


@dataclass
class Population:
    """Initial logits of the training and held-out prompts, and the hard tercile (by initial accuracy)."""

    z0: np.ndarray  # (P,)
    z0_heldout: np.ndarray  # (H,)
    hard: np.ndarray  # (P,) bool, bottom third of initial accuracy

    @classmethod
    def make(cls, cfg: SimConfig, seed: int) -> "Population":
        rng = np.random.default_rng([seed, 0])
        z0 = rng.normal(cfg.difficulty_mean, cfg.difficulty_std, cfg.prompts)
        z0_heldout = rng.normal(cfg.difficulty_mean, cfg.difficulty_std, cfg.heldout)
        hard = z0 <= np.quantile(z0, 1.0 / 3.0)
        return cls(z0=z0, z0_heldout=z0_heldout, hard=hard)


class Policy:
    """p_i = σ(s + u_i): per-prompt logits ``u`` (P,) and the shared skill ``s`` (scalar), both trained."""

    def __init__(self, population: Population):
        self.population = population
        self.u = torch.tensor(population.z0, dtype=torch.float64, requires_grad=True)
        self.s = torch.zeros((), dtype=torch.float64, requires_grad=True)
        self._z0_heldout = torch.tensor(population.z0_heldout, dtype=torch.float64)
        self._hard = torch.tensor(population.hard)
        self._v = torch.zeros(2, dtype=torch.float64)  # rms optimiser: EMA of ||g_u||², g_s²
        self._t = 0

    def probs(self, idx: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(self.s + self.u[torch.as_tensor(idx)]).numpy()

    def evaluate(self) -> dict[str, float]:
        """Expected accuracy (no sampling noise) over the training prompts, their hard tercile, held-out."""
        with torch.no_grad():
            p = torch.sigmoid(self.s + self.u)
            return {
                "acc_train": float(p.mean()),
                "acc_hard": float(p[self._hard].mean()),
                "acc_heldout": float(torch.sigmoid(self.s + self._z0_heldout).mean()),
                "skill": float(self.s),
            }

    def step(self, loss: torch.Tensor, lr_prompt: float, lr_skill_per_prompt: float, cfg: SimConfig) -> None:
        """One optimiser step on ``loss``: SGD, or the block-RMS-normalised step (``cfg.optimizer``).

        ``rms`` divides each block's gradient (u, s) by the running RMS of its norm (bias-corrected EMA, β =
        ``rms_beta``): AdamW without momentum, one second moment per block. A constant factor on every advantage then
        cancels; the relative weighting of prompts within a step does not.
        """
        self.u.grad = self.s.grad = None
        loss.backward()
        g_u, g_s = self.u.grad, self.s.grad
        if cfg.optimizer == "rms":
            self._t += 1
            self._v = cfg.rms_beta * self._v + (1 - cfg.rms_beta) * torch.stack([g_u.square().sum(), g_s.square()])
            rms = (self._v / (1 - cfg.rms_beta**self._t)).sqrt().clamp_min(1e-12)
            g_u, g_s = g_u * (cfg.rms_ref_prompt / rms[0]), g_s * (cfg.rms_ref_skill / rms[1])
        with torch.no_grad():
            self.u -= lr_prompt * g_u
            self.s -= lr_skill_per_prompt * g_s


@dataclass
class Rollout:
    """One step's sampled responses, in verl's row layout (N rows = responses + padding rows)."""

    token_level_rewards: torch.Tensor  # (N, L) float32, reward on each response's last token
    response_mask: torch.Tensor  # (N, L) float32, all-zero on padding rows
    uid: np.ndarray  # (N,) object: one uid per prompt, "pad<hex>" for padding rows
    prompt: np.ndarray  # (N,) int64 prompt index, -1 for padding rows
    correct: np.ndarray  # (N,) bool (False on padding rows)
    n_pad: int

    @property
    def valid(self) -> np.ndarray:
        return self.prompt >= 0


def _uids(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) object array of uuid4 strings (verl gives each prompt ``str(uuid.uuid4())``), from ``rng``."""
    raw = rng.bytes(16 * n)
    return np.array([str(uuid.UUID(bytes=raw[16 * i : 16 * i + 16], version=4)) for i in range(n)], dtype=object)


def sample_rollout(policy: Policy, cfg: SimConfig, rng: np.random.Generator, group: int) -> Rollout:
    """Draw a step's prompts, G rewards each, lengths, verl's row shuffle and padding rows."""
    B, L = cfg.batch_prompts, cfg.response_length
    idx = rng.choice(cfg.prompts, size=B, replace=False)
    p = policy.probs(idx)
    correct = rng.random((B, group)) < p[:, None]  # (B, G)
    lengths = rng.integers(cfg.min_response_length, L + 1, size=(B, group))
    uids = _uids(rng, B)
    order = rng.permutation(B * group)  # the balancer reorders rows; groups are not contiguous
    n = B * group
    n_pad = (-n) % cfg.pad_divisor
    pad_uid = f"pad{rng.bytes(16).hex()}"

    prompt = np.concatenate([np.repeat(idx, group)[order], np.full(n_pad, -1)])
    uid = np.concatenate([np.repeat(uids, group)[order], np.full(n_pad, pad_uid, dtype=object)]).astype(object)
    correct_rows = np.concatenate([correct.reshape(-1)[order], np.zeros(n_pad, dtype=bool)])
    length_rows = torch.as_tensor(np.concatenate([lengths.reshape(-1)[order], np.zeros(n_pad, dtype=np.int64)]))

    mask = (torch.arange(L)[None, :] < length_rows[:, None]).float()
    rewards = torch.zeros(n + n_pad, L)
    rows = torch.arange(n)
    rewards[rows, length_rows[:n] - 1] = torch.as_tensor(correct_rows[:n], dtype=torch.float32)
    return Rollout(rewards, mask, uid, prompt, correct_rows, n_pad)


def to_dataproto(rollout: Rollout):
    """The verl ``DataProto`` the trainer hands to ``compute_advantage`` (tensors + ``uid``)."""
    from verl import DataProto

    return DataProto.from_dict(
        tensors={
            "token_level_rewards": rollout.token_level_rewards.clone(),
            "response_mask": rollout.response_mask.clone(),
        },
        non_tensors={"uid": rollout.uid.copy()},
    )


def policy_loss(policy: Policy, rollout: Rollout, advantages: torch.Tensor, scale: float) -> torch.Tensor:
    """verl's token-mean policy-gradient loss at ratio 1 (where the clipped PPO loss has the same gradient), times
    ``scale``.

    A response's log π (log p_i if correct, log(1 - p_i) if not) is spread evenly over its tokens, so it adds
    A·(r - p_i) to the logit's gradient whatever its length, divided by the batch's token count as verl does (what
    DGPO's valid-token factor corrects). With the runner's ``scale`` = batch_prompts·L̄ (L̄ the mean response length),
    ``lr_prompt`` is the logit step of a visited prompt per unit of (1/G)·Σ_j A_j (r_j - p_i) and ``lr_skill`` the
    shared step per unit of its batch mean; under SGD an advantage scaled by λ moves the policy λ times as far.

    Args:
        advantages: (N, L) from ``compute_advantage`` (0 on padding rows)
    """
    from verl.trainer.ppo.core_algos import agg_loss

    valid = torch.as_tensor(rollout.valid)
    prompt = torch.as_tensor(np.where(rollout.valid, rollout.prompt, 0))
    z = policy.s + policy.u[prompt]  # (N,)
    sign = torch.as_tensor(np.where(rollout.correct, 1.0, -1.0))
    log_pi = torch.nn.functional.logsigmoid(sign * z) * valid  # log π(response): log p or log(1 - p)
    length = rollout.response_mask.sum(-1).clamp_min(1.0).double()
    log_pi_tokens = (log_pi / length)[:, None] * rollout.response_mask.double()  # spread over the tokens
    pg_losses = -advantages.double() * log_pi_tokens
    return scale * agg_loss(loss_mat=pg_losses, loss_mask=rollout.response_mask.double(), loss_agg_mode="token-mean")

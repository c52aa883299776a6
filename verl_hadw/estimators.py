"""HA-DW and DGPO advantage estimators, registered in verl's ``ADV_ESTIMATOR_REGISTRY``.

Equation numbers refer to the project's equation sheet, ``docs/equations.md`` (HA-DW = arXiv 2601.08521 §3,
Eqs. 7-17; DGPO = MathForge, arXiv 2601.20614 §3.1, Eqs. 3-6). Every statistic is computed over valid rows
only (padding rows get advantage 0) and vectorised over groups with index tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

from verl_hadw import config_check, metrics, steps
from verl_hadw.anchor import client as anchor_client
from verl_hadw.anchor import legacy_snapshots
from verl_hadw.groups import Batch, accuracy_of, group_sum, prepare_batch, zero_spread
from verl_hadw.options import DgpoConfig, HadwConfig, grpo_norm_by_std, parse_dgpo, parse_hadw

__all__ = [
    "compute_hadw_outcome_advantage",
    "compute_dgpo_outcome_advantage",
    "grpo_advantage",
    "dgpo_advantage",
    "hadw_weights",
]


def _register(name: str):
    """``register_adv_est`` that tolerates re-importing this module (same qualified name)."""

    def decorator(fn):
        old = ADV_ESTIMATOR_REGISTRY.get(name)
        if old is not None and (old.__module__, old.__qualname__) == (fn.__module__, fn.__qualname__):
            ADV_ESTIMATOR_REGISTRY[name] = fn
            return fn
        return register_adv_est(name)(fn)

    return decorator


# ------------------------------------------------------------------------------------- base advantages
def grpo_advantage(b: Batch, epsilon: float, norm_by_std: bool) -> torch.Tensor:
    """(n,) GRPO: (s - mean_g)/(std_g + ε), unbiased std; s - mean_g without std (Dr.GRPO).

    Single-response groups follow verl's ``grpo``: mean 0, std 1. Groups whose scores are all equal get exactly
    0, where verl's ``grpo`` can give rounding noise (``groups.zero_spread``).
    """
    centered = b.scores - b.grpo_mean[b.gid]
    return zero_spread(centered / (b.grpo_std[b.gid] + epsilon) if norm_by_std else centered, b)


def dgpo_advantage(
    b: Batch, acc: torch.Tensor | None, cfg: DgpoConfig, norm_by_std: bool = True
) -> tuple[torch.Tensor, dict[str, float]]:
    """(n,) DGPO advantage Â_DG · λ_g · (valid-token ratio), and its per-call counts.

    acc: (n,) accuracy per valid row, needed only for DQW (difficulty uses accuracy, DGAE the raw score).
    norm_by_std: verl's ``algorithm.norm_adv_by_std_in_grpo``, for the GRPO normalisation when ``dgae=false``.
    """
    # Valid group: >= 2 valid responses whose scores are not all equal.
    valid_g = (b.count >= 2) & (b.spread > 0)  # so a group without spread gets exactly 0, as in grpo_advantage
    centered = b.scores - b.grpo_mean[b.gid]
    if cfg.dgae:
        mad = group_sum(centered.abs(), b.gid, b.n_groups) / b.count  # MAD_g = (1/G) Σ_i |r_i - mean(r)|
        adv = centered / (mad[b.gid] + cfg.epsilon)  # Eqs. 4-5: Â_DG = (r - mean(r)) / MAD(r)
    else:
        adv = grpo_advantage(b, cfg.epsilon, norm_by_std)
    in_valid = valid_g[b.gid]
    adv = torch.where(in_valid, adv, torch.zeros_like(adv))

    n_valid = int(valid_g.sum())
    weight = torch.ones(b.n_groups, dtype=adv.dtype, device=adv.device)
    if cfg.dqw and n_valid > 0:
        acc_mean = group_sum(acc, b.gid, b.n_groups) / b.count
        difficulty = torch.where(acc_mean > 0, -acc_mean, torch.full_like(acc_mean, -1.0))  # D = -acc; all wrong: -1
        weight[valid_g] = n_valid * torch.softmax(difficulty[valid_g] / cfg.temperature, dim=0)  # Eq. 6: λ_s
    adv = adv * weight[b.gid]

    lengths = b.lengths()
    tokens_all = float(lengths.sum())
    tokens_valid = float(lengths[in_valid].sum())
    if cfg.valid_token_norm and tokens_valid > 0:
        # Eq. 3's denominator is the valid tokens; verl's token-mean divides by all tokens of the mini-batch.
        adv = adv * (tokens_all / tokens_valid)
    valid_weights = weight[valid_g]
    counts = {
        "groups": float(b.n_groups),
        "valid_groups": float(n_valid),
        "tokens_all": tokens_all,
        "tokens_valid": tokens_valid,
        "weight_min": float(valid_weights.min()) if n_valid else float("nan"),
        "weight_max": float(valid_weights.max()) if n_valid else float("nan"),
    }
    return adv, counts


# -------------------------------------------------------------------------------------------- HA-DW
def hadw_weights(adv: torch.Tensor, p_hat: torch.Tensor, prior: float, lambda_scale: float) -> torch.Tensor:
    """(n,) Φ_{t,i} of Eqs. 13-16 from the base advantage Â (n,) and each row's group accuracy p̂_t (n,)."""
    diff_his = p_hat - prior  # Eq. 13, with the prior C_t⁻
    D = -torch.sign(adv) * torch.sign(diff_his)  # Eq. 14
    M = diff_his.abs()  # Eq. 15
    return lambda_scale * torch.exp(D * M)  # Eq. 16


def _scatter_rows(values: torch.Tensor, b: Batch) -> torch.Tensor:
    """(N,) with ``values`` (n,) at the valid rows and 0 at padding rows."""
    if b.rows.numel() == b.n_rows:
        return values
    out = torch.zeros(b.n_rows, dtype=values.dtype, device=values.device)
    return out.index_copy_(0, b.rows, values)


def _broadcast(scalar: torch.Tensor, b: Batch, response_mask: torch.Tensor) -> torch.Tensor:
    """(N, L) advantages: one scalar per row over its response tokens."""
    return _scatter_rows(scalar, b).unsqueeze(-1) * response_mask


@_register("hadw")
def compute_hadw_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """HA-DW (History-Aware Adaptive Difficulty Weighting) over a GRPO or DGPO base advantage.

    Final advantage Â_{t,i} · Φ_{t,i} (Eq. 17), Φ from the cross-step anchor's prior C_t⁻ (Eqs. 13-16); the
    anchor then absorbs this step's batch accuracy y_t (Eqs. 7-12), once per training step. With
    ``difficulty_from=reward`` y_t and p̂ are mean rewards instead (the authors' released code).

    Args:
        token_level_rewards: (bs, response_length) float
        response_mask: (bs, response_length); all-zero rows are padding (advantage 0)
        index: (bs,) np.ndarray of uid per row, the group of each response
        config: verl's ``algorithm`` node; options under ``algorithm.hadw`` (see ``HadwConfig``)

    Returns:
        advantages, returns: (bs, response_length), equal
    """
    cfg: HadwConfig = parse_hadw(config)
    config_check.check_algorithm(config)  # also without the checkpoint callback: near misses, unused options
    metrics.enable(config)  # verl's Tracking.log is wrapped only once an estimator of ours runs
    norm_by_std = grpo_norm_by_std(config)
    with torch.no_grad():
        # Over GRPO nothing depends on how groups are numbered: skip sorting the uids (see groups.group_ids).
        b = prepare_batch(token_level_rewards, response_mask, index, sorted_ids=cfg.base == "dgpo")
        by_accuracy = cfg.difficulty_from == "accuracy"
        acc = accuracy_of(b.scores, cfg.success_threshold, "algorithm.hadw.success_threshold") if by_accuracy else None
        if cfg.base == "dgpo":  # the base advantage under DGPO's own options (algorithm.dgpo)
            dgpo_cfg = parse_dgpo(config)
            dqw_acc = None
            if dgpo_cfg.dqw:  # DQW weighs questions by accuracy under DGPO's threshold, whatever HA-DW's y_t is
                same = acc is not None and dgpo_cfg.success_threshold == cfg.success_threshold
                dqw_acc = acc if same else accuracy_of(
                    b.scores, dgpo_cfg.success_threshold, "algorithm.dgpo.success_threshold")
            adv, dgpo_counts = dgpo_advantage(b, dqw_acc, dgpo_cfg, norm_by_std)
        else:
            adv, dgpo_counts = grpo_advantage(b, cfg.epsilon, norm_by_std), None
        # What "difficulty" is measured on: accuracy (paper) or the raw reward (released code, difficulty_from=reward)
        y = acc if by_accuracy else b.scores
        # p̂: the per-group mean of y; binary scores are their own accuracy, so then it is the group's score mean
        plain_mean = not by_accuracy or cfg.success_threshold is None
        p_hat = (b.score_mean if plain_mean else group_sum(y, b.gid, b.n_groups) / b.count)[b.gid]

        # built on the first call of a run, with the legacy trainer's snapshots as its persistence (None: the v1
        # callback built it already, or no trainer)
        step, run = steps.trainer_step(), steps.trainer_run()
        client = anchor_client.get_client(cfg, lambda: legacy_snapshots.from_config(config), step, run)
        view = client.observe(correct=float(y.sum()), count=int(y.numel()), trainer_step=step)  # Eq. 7: K_t, B_t
        phi = hadw_weights(adv, p_hat, view.prior, cfg.lambda_scale)
        if not bool(torch.isfinite(phi).all()):  # exp(M) overflows for M ≳ 88: only reward difficulty gets there
            raise ValueError(
                f"Φ = λ·exp(±|p̂ - C⁻|) overflows float32: p̂ reaches {float(p_hat.abs().max()):.3g} against the "
                f"anchor C⁻ = {view.prior:.3g}. With algorithm.hadw.difficulty_from=reward, p̂ and C⁻ are mean "
                "rewards: rescale the rewards to order 1, or use difficulty_from=accuracy with success_threshold"
            )
        if cfg.normalize_phi:
            phi = phi / phi.mean()
        advantages = _broadcast(adv * phi, b, response_mask)

        metrics.record_hadw(view, phi, cfg.lambda_scale, recoveries=client.recoveries)
        if dgpo_counts is not None:
            metrics.record_dgpo(view.step, dgpo_counts)
    return advantages, advantages


# --------------------------------------------------------------------------------------------- DGPO
@_register("dgpo")
def compute_dgpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DGPO: MAD-normalised group advantage (DGAE, Eqs. 4-5), difficulty-aware question weights over the
    valid groups (DQW, Eq. 6) and valid-token loss averaging folded into the advantages (Eq. 3).

    The valid-token factor makes verl's ``token-mean`` loss a mean over valid tokens exactly when one
    step's batch is one optimiser mini-batch (``ppo_mini_batch_size == train_batch_size``, or the
    ``separate_async`` trainer); otherwise it holds in expectation.

    Args:
        token_level_rewards: (bs, response_length) float
        response_mask: (bs, response_length); all-zero rows are padding (advantage 0)
        index: (bs,) np.ndarray of uid per row
        config: verl's ``algorithm`` node; options under ``algorithm.dgpo`` (see ``DgpoConfig``)

    Returns:
        advantages, returns: (bs, response_length), equal
    """
    cfg = parse_dgpo(config)
    config_check.check_algorithm(config)
    metrics.enable(config)  # the same switch as HA-DW's: algorithm.hadw.log_metrics
    with torch.no_grad():
        b = prepare_batch(token_level_rewards, response_mask, index)
        acc = accuracy_of(b.scores, cfg.success_threshold, "algorithm.dgpo.success_threshold") if cfg.dqw else None
        adv, counts = dgpo_advantage(b, acc, cfg, grpo_norm_by_std(config))
        advantages = _broadcast(adv, b, response_mask)
        metrics.record_dgpo(steps.stateless_step(), counts)
    return advantages, advantages

"""The estimators' maths, framework-free: the base advantages (GRPO, DGPO), HA-DW's weights Φ, and one call of
each method on a batch of scored, grouped responses.

Equation numbers refer to the project's equation sheet, ``docs/equations.md`` (HA-DW = arXiv 2601.08521 §3,
Eqs. 7-17; DGPO = MathForge, arXiv 2601.20614 §3.1, Eqs. 3-6); each equation is written here once. Every framework
adapter calls these functions: verl's registered estimators (``verl_adapter.estimators``), and TRL's and ms-swift's
trainers through ``reward_matrix.generation_advantages``.
They differ only in how they build the ``Batch``, where the anchor lives (``observe``) and how they name an option
in an error (``key``). Every statistic is over valid rows only and vectorised over groups with index tensors.
A call reads the host once per decision (``groups.host_values``): HA-DW once for the anchor's K_t (none when the
batch's read has it) and once for the checks and metrics of Φ, DGPO once for its counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from verl_hadw.core.anchor.machine import AnchorView
from verl_hadw.core.groups import Batch, accuracy_parts, group_sum, host_values, refuse_non_binary, zero_spread
from verl_hadw.core.metric_values import phi_summary_terms
from verl_hadw.core.options import DgpoConfig, HadwConfig, Key

__all__ = ["grpo_advantage", "dgpo_advantage", "hadw_weights", "dgpo_call", "hadw_call", "HadwCall"]

# ``key``: how the calling framework names an option in its error messages (``Terms.key``):
# ``key("hadw.success_threshold")`` is ``algorithm.hadw.success_threshold`` for verl, ``hadw_success_threshold``
# for TRL.


# ------------------------------------------------------------------------------------- base advantages
def grpo_advantage(b: Batch, epsilon: float, norm_by_std: bool) -> torch.Tensor:
    """(n,) GRPO: (s - mean_g)/(std_g + ε), unbiased std; s - mean_g without std (Dr.GRPO).

    Single-response groups follow verl's ``grpo``: mean 0, std 1. Groups whose scores are all equal get exactly
    0, where verl's ``grpo`` can give rounding noise (``groups.zero_spread``).
    """
    centered = b.scores - b.grpo_mean[b.gid]
    return zero_spread(centered / (b.grpo_std[b.gid] + epsilon) if norm_by_std else centered, b)


def dgpo_advantage(
    b: Batch, acc: torch.Tensor | None, cfg: DgpoConfig, norm_by_std: bool = True,
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(n,) DGPO advantage Â_DG · λ_g · (valid-token ratio), and its per-call counts.

    acc: (n,) accuracy per valid row, needed only for DQW (difficulty uses accuracy, DGAE the raw score).
    norm_by_std: verl's ``algorithm.norm_adv_by_std_in_grpo``, for the GRPO normalisation when ``dgae=false``.
    lengths: (n,) loss tokens per valid row (default: the batch's response mask); TRL passes its loss mask's,
        gathered over processes, since a truncated completion it masks out still counts in its group.
    """
    adv, counts, n_valid = _dgpo_parts(b, acc, cfg, norm_by_std, lengths)
    return adv, _dgpo_counts(b, n_valid, host_values(*counts))


def _valid_group_counts(b: Batch, valid_g: torch.Tensor) -> tuple[int, int]:
    """Valid groups and their rows, as the batch's read knows them (a read of their own on the step-by-step path)."""
    if "valid_groups" in b.known:
        return b.known["valid_groups"], b.known["valid_group_rows"]
    n_valid, n_rows = host_values(valid_g.sum(), (b.count * valid_g).sum())
    return int(n_valid), int(n_rows)


def _dgpo_parts(b: Batch, acc, cfg: DgpoConfig, norm_by_std: bool, lengths) -> tuple[torch.Tensor, list, int]:
    """``dgpo_advantage`` with its counts left on the device, for the caller to read with its own values: (n,)
    advantages, [tokens_all, tokens_valid] (+ [weight_min, weight_max] with valid groups), and the valid groups."""
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

    # the valid groups and rows by position (their number is known), in place of boolean-mask indexing
    n_valid, n_valid_rows = _valid_group_counts(b, valid_g)
    valid_ids = torch.nonzero_static(valid_g, size=n_valid).squeeze(-1)
    weight = torch.ones(b.n_groups, dtype=adv.dtype, device=adv.device)
    if cfg.dqw and n_valid > 0:
        acc_mean = group_sum(acc, b.gid, b.n_groups) / b.count
        difficulty = torch.where(acc_mean > 0, -acc_mean, torch.full_like(acc_mean, -1.0))  # D = -acc; all wrong: -1
        lam = n_valid * torch.softmax(difficulty[valid_ids] / cfg.temperature, dim=0)  # Eq. 6: λ_s
        weight = weight.index_copy(0, valid_ids, lam)
    adv = adv * weight[b.gid]

    lengths = b.lengths() if lengths is None else lengths.float()
    tokens_all = lengths.sum()
    tokens_valid = lengths[torch.nonzero_static(in_valid, size=n_valid_rows).squeeze(-1)].sum()
    if cfg.valid_token_norm:
        # Eq. 3's denominator is the valid tokens; a token-mean loss divides by all tokens of its batch. The ratio
        # as the host would take it (a float64 quotient, as float32), so no read waits for it; none without valid tokens
        ratio = (tokens_all.double() / tokens_valid.double()).float()
        adv = adv * torch.where(tokens_valid > 0, ratio, torch.ones_like(ratio))
    valid_weights = weight[valid_ids]
    extremes = [valid_weights.min(), valid_weights.max()] if n_valid else []
    return adv, [tokens_all, tokens_valid, *extremes], n_valid


def _dgpo_counts(b: Batch, n_valid: int, read: list) -> dict[str, float]:
    """``dgpo_advantage``'s counts from the values ``_dgpo_parts`` left on the device, once read."""
    tokens_all, tokens_valid, *extremes = read
    weight_min, weight_max = extremes if extremes else (float("nan"), float("nan"))
    return {"groups": float(b.n_groups), "valid_groups": float(n_valid), "tokens_all": tokens_all,
            "tokens_valid": tokens_valid, "weight_min": weight_min, "weight_max": weight_max}


def _accuracy(b: Batch, scores: torch.Tensor, threshold: float | None):
    """``groups.accuracy_parts``, its binary check a Python bool where the batch's read already knows it."""
    acc, binary = accuracy_parts(scores, threshold)
    if binary is not None and scores is b.scores and "binary" in b.known:
        binary = b.known["binary"]
    return acc, binary


def _check_binary(checks: list, read: list, accuracy_hint: str) -> None:
    """Raise for the first of ``checks`` [(scores, key)] whose binary flag in ``read`` is false, in the old order."""
    for (scores, key), binary in zip(checks, read):
        if binary is not None and not binary:
            refuse_non_binary(scores, key, accuracy_hint)


def dgpo_call(
    b: Batch, cfg: DgpoConfig, norm_by_std: bool, key: Key, acc_scores: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None, *, accuracy_hint: str = "",
) -> tuple[torch.Tensor, dict[str, float]]:
    """One DGPO call: (n,) advantages and counts. ``acc_scores``: (n,) what DQW's accuracy is read from (default:
    the scores; TRL: the accuracy reward function's column). ``accuracy_hint``: the framework's other way out of
    non-binary scores, added to that error. One read of the host: the binary check with the counts."""
    scores = b.scores if acc_scores is None else acc_scores
    acc, binary = _accuracy(b, scores, cfg.success_threshold) if cfg.dqw else (None, None)
    adv, counts, n_valid = _dgpo_parts(b, acc, cfg, norm_by_std, lengths)
    binary, *read = host_values(binary, *counts)
    _check_binary([(scores, key("dgpo.success_threshold"))], [binary], accuracy_hint)
    return adv, _dgpo_counts(b, n_valid, read)


# -------------------------------------------------------------------------------------------- HA-DW
def hadw_weights(adv: torch.Tensor, p_hat: torch.Tensor, prior: float, lambda_scale: float) -> torch.Tensor:
    """(n,) Φ_{t,i} of Eqs. 13-16 from the base advantage Â (n,) and each row's group accuracy p̂_t (n,)."""
    diff_his = p_hat - prior  # Eq. 13, with the prior C_t⁻
    D = -torch.sign(adv) * torch.sign(diff_his)  # Eq. 14
    M = diff_his.abs()  # Eq. 15
    return lambda_scale * torch.exp(D * M)  # Eq. 16


def _refuse_phi(p_hat: torch.Tensor, prior: float, key: Key) -> None:
    """The error for Φ overflowing float32 (exp(M) for M ≳ 88: only reward difficulty)."""
    raise ValueError(
        f"Φ = λ·exp(±|p̂ - C⁻|) overflows float32: p̂ reaches {float(p_hat.abs().max()):.3g} against the "
        f"anchor C⁻ = {prior:.3g}. With {key('hadw.difficulty_from')}=reward, p̂ and C⁻ are mean "
        f"rewards: rescale the rewards to order 1, or use difficulty_from=accuracy with success_threshold. "
        "The anchor did not take this batch."
    )


@dataclass(frozen=True)
class HadwCall:
    """What one HA-DW call computed: the final advantage, the weights it applied, and the anchor's view."""

    advantages: torch.Tensor  # (n,) Â·Φ
    phi: torch.Tensor  # (n,) Φ as applied (after normalize_phi)
    view: AnchorView
    dgpo_counts: dict[str, float] | None  # the DGPO base's counts (hadw.base=dgpo), else None
    # Φ's Σ, ΣΦ², min, max and #(Φ > λ), read with its check, for ``MetricBuffer.record_hadw`` (None: it reads them)
    phi_summary: tuple[float, ...] | None = None


def hadw_call(
    b: Batch, cfg: HadwConfig, dgpo_cfg: DgpoConfig | None, norm_by_std: bool,
    observe: Callable[[float, int], AnchorView], key: Key, acc_scores: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None, *, preview: Callable[[float, int], AnchorView], accuracy_hint: str = "",
) -> HadwCall:
    """One HA-DW call over a GRPO or DGPO base advantage (``dgpo_cfg``: the DGPO options when ``cfg.base=dgpo``).

    Final advantage Â_{t,i} · Φ_{t,i}, Φ from the cross-step anchor's prior C_t⁻ (Eqs. 13-16). ``observe(K_t, B_t)``
    hands the anchor this call's Σ accuracy and count and returns its view (the anchor absorbs y_t once per
    training step, Eqs. 7-12); ``preview(K_t, B_t)`` returns the view ``observe`` would, leaving the anchor as it
    is. Every check runs on the preview first, so a call that raises never moves the anchor. With
    ``difficulty_from=reward`` y_t and p̂ are mean rewards instead (the authors' released code).
    ``acc_scores``/``lengths``/``accuracy_hint``: as in ``dgpo_call``.
    """
    by_accuracy = cfg.difficulty_from == "accuracy"
    scores = b.scores if acc_scores is None else acc_scores
    acc, checks = None, []  # checks: [(scores, key, binary flag)], in the order their errors are raised
    if by_accuracy:
        acc, binary = _accuracy(b, scores, cfg.success_threshold)
        checks.append((scores, key("hadw.success_threshold"), binary))
    dgpo_parts = None
    if cfg.base == "dgpo":  # the base advantage under DGPO's own options
        dqw_acc = None
        if dgpo_cfg.dqw:  # DQW weighs questions by accuracy under DGPO's threshold, whatever HA-DW's y_t is
            same = acc is not None and dgpo_cfg.success_threshold == cfg.success_threshold
            if same:
                dqw_acc = acc
            else:
                dqw_acc, binary = _accuracy(b, scores, dgpo_cfg.success_threshold)
                checks.append((scores, key("dgpo.success_threshold"), binary))
        adv, *dgpo_parts = _dgpo_parts(b, dqw_acc, dgpo_cfg, norm_by_std, lengths)
    else:
        adv = grpo_advantage(b, cfg.epsilon, norm_by_std)
    # What "difficulty" is measured on: accuracy (paper) or the raw reward (released code, difficulty_from=reward)
    y = acc if by_accuracy else b.scores
    # p̂: the per-group mean of y; binary scores are their own accuracy, so then it is the group's score mean
    plain_mean = not by_accuracy or (acc_scores is None and cfg.success_threshold is None)
    p_hat = (b.score_mean if plain_mean else group_sum(y, b.gid, b.n_groups) / b.count)[b.gid]

    # Eq. 7: K_t, B_t. The first read: the binary checks and K_t, unless the batch's read had them all
    k_t = b.known["score_sum"] if y is b.scores and "score_sum" in b.known else y.sum()
    *binary, k_t = host_values(*(check[2] for check in checks), k_t)
    _check_binary([check[:2] for check in checks], binary, accuracy_hint)
    counts = k_t, int(y.numel())
    checked = preview(*counts)  # check first: the anchor moves only once nothing can refuse the call
    weights = hadw_weights(adv, p_hat, checked.prior, cfg.lambda_scale)
    phi = _normalized(weights, cfg)
    # The second read: Φ's check (exp's overflow, only reward difficulty: a float64 sum of float32 terms is finite
    # exactly when they all are), its metrics, the DGPO base's counts
    total, *read = host_values(weights.sum(dtype=torch.float64), *phi_summary_terms(phi, cfg.lambda_scale),
                               *(dgpo_parts[0] if dgpo_parts else ()))
    if not math.isfinite(total):
        _refuse_phi(p_hat, checked.prior, key)
    summary, dgpo_read = tuple(read[:5]), read[5:]
    view = observe(*counts)
    if view.prior != checked.prior:  # a deterministic anchor gives the previewed prior; recompute if not
        phi, summary = _normalized(hadw_weights(adv, p_hat, view.prior, cfg.lambda_scale), cfg), None
    dgpo_counts = _dgpo_counts(b, dgpo_parts[1], dgpo_read) if dgpo_parts else None
    return HadwCall(advantages=adv * phi, phi=phi, view=view, dgpo_counts=dgpo_counts, phi_summary=summary)  # Eq. 17


def _normalized(phi: torch.Tensor, cfg: HadwConfig) -> torch.Tensor:
    """Φ as applied: over its mean with ``normalize_phi``."""
    return phi / phi.mean() if cfg.normalize_phi else phi

"""The advantage estimators on a ``groups.Batch``: GRPO's and DGPO's base advantages, HA-DW's weights Φ, and one
call of each method, as every framework adapter runs it. Equation numbers are those of docs/equations.md (HA-DW:
arXiv 2601.08521 §3; DGPO: arXiv 2601.20614 §3.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from verl_hadw.core.anchor.machine import AnchorView
from verl_hadw.core.groups import Batch, accuracy_of, group_sum, host_values, refuse_non_binary, zero_spread
from verl_hadw.core.metric_values import phi_summary_terms
from verl_hadw.core.options import DgpoConfig, HadwConfig, Key


def grpo_advantage(b: Batch, epsilon: float, norm_by_std: bool) -> torch.Tensor:
    """(n,) GRPO advantages (s - mean_g)/(std_g + ε), or s - mean_g without the std (Dr.GRPO), as verl's ``grpo``;
    exactly 0 in groups whose scores are all equal (``groups.zero_spread``)."""
    centered = b.scores - b.grpo_mean[b.gid]
    return zero_spread(centered / (b.grpo_std[b.gid] + epsilon) if norm_by_std else centered, b)


def dgpo_advantage(
    b: Batch, acc: torch.Tensor | None, cfg: DgpoConfig, norm_by_std: bool = True,
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DGPO's advantage Â_DG · λ_g · (valid-token ratio).

    Args:
        acc: (n,) accuracy per valid row; read by DQW only.
        norm_by_std: verl's ``norm_adv_by_std_in_grpo``, for the GRPO normalisation when ``dgae=false``.
        lengths: (n,) loss tokens per valid row (default: the response mask's); TRL passes its loss mask's, then
            those of rows left out that its loss still averages over (in T_all only).

    Returns:
        (n,) advantages, and the call's group, token and weight counts.
    """
    adv, counts = _dgpo_parts(b, acc, cfg, norm_by_std, lengths)
    return adv, _dgpo_counts(b, host_values(*counts))


def _dgpo_parts(b: Batch, acc, cfg: DgpoConfig, norm_by_std: bool, lengths) -> tuple[torch.Tensor, list]:
    """``dgpo_advantage`` with its counts left on the device for the caller's read: (n,) advantages and
    [tokens_all, tokens_valid] (+ [weight_min, weight_max] with valid groups)."""
    valid_g = (b.count >= 2) & (b.spread > 0)  # >= 2 responses whose scores are not all equal
    centered = b.scores - b.grpo_mean[b.gid]
    if cfg.dgae:
        mad = group_sum(centered.abs(), b.gid, b.n_groups) / b.count  # MAD_g = (1/G) Σ_i |r_i - mean(r)|
        adv = centered / (mad[b.gid] + cfg.epsilon)  # Eqs. 4-5: Â_DG = (r - mean(r)) / MAD(r)
    else:
        adv = grpo_advantage(b, cfg.epsilon, norm_by_std)
    in_valid = valid_g[b.gid]
    adv = torch.where(in_valid, adv, torch.zeros_like(adv))

    n_valid, n_valid_rows = b.valid_groups, b.valid_group_rows  # indexing by position: no read of a mask's size
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
        # Eq. 3 averages over the valid tokens, a token-mean loss over all of them; 1 without valid tokens
        ratio = (tokens_all.double() / tokens_valid.double()).float()
        adv = adv * torch.where(tokens_valid > 0, ratio, torch.ones_like(ratio))
    valid_weights = weight[valid_ids]
    extremes = [valid_weights.min(), valid_weights.max()] if n_valid else []
    return adv, [tokens_all, tokens_valid, *extremes]


def _dgpo_counts(b: Batch, read: list) -> dict[str, float]:
    """``dgpo_advantage``'s counts from ``_dgpo_parts``' values, once read."""
    tokens_all, tokens_valid, *extremes = read
    weight_min, weight_max = extremes if extremes else (float("nan"), float("nan"))
    return {"groups": float(b.n_groups), "valid_groups": float(b.valid_groups), "tokens_all": tokens_all,
            "tokens_valid": tokens_valid, "weight_min": weight_min, "weight_max": weight_max}


def _accuracy(b: Batch, acc_scores: torch.Tensor | None, threshold: float | None):
    """``groups.accuracy_of`` of ``acc_scores`` (default: the batch's scores, whose binary flag the batch has)."""
    acc, binary = accuracy_of(b.scores if acc_scores is None else acc_scores, threshold)
    return acc, b.binary if binary is not None and acc_scores is None else binary


def dgpo_call(
    b: Batch, cfg: DgpoConfig, norm_by_std: bool, key: Key, acc_scores: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None, *, accuracy_hint: str = "",
) -> tuple[torch.Tensor, dict[str, float]]:
    """One DGPO call, reading the host once.

    Args:
        key: the framework's name of an option path (``Terms.key``), for the errors.
        acc_scores: (n,) what DQW's accuracy is read from (default: the scores; TRL: the accuracy function's).
        accuracy_hint: the framework's other remedy for non-binary scores, added to that error.

    Returns:
        (n,) advantages and the call's counts (``dgpo_advantage``).
    """
    acc, binary = _accuracy(b, acc_scores, cfg.success_threshold) if cfg.dqw else (None, None)
    adv, counts = _dgpo_parts(b, acc, cfg, norm_by_std, lengths)
    binary, *read = host_values(binary, *counts)
    if binary is not None and not binary:
        refuse_non_binary(b.scores if acc_scores is None else acc_scores, key("dgpo.success_threshold"), accuracy_hint)
    return adv, _dgpo_counts(b, read)


def hadw_weights(adv: torch.Tensor, p_hat: torch.Tensor, prior: float, lambda_scale: float) -> torch.Tensor:
    """(n,) HA-DW weights Φ_{t,i} of the base advantage ``adv`` (n,), each row's group accuracy ``p_hat`` (n,) and
    the anchor's ``prior`` C_t⁻."""
    diff_his = p_hat - prior  # Eq. 13, with the prior C_t⁻
    D = -torch.sign(adv) * torch.sign(diff_his)  # Eq. 14
    M = diff_his.abs()  # Eq. 15
    return lambda_scale * torch.exp(D * M)  # Eq. 16


@dataclass(frozen=True)
class HadwCall:
    """What one HA-DW call computed: the final advantage, the weights it applied, and the anchor's view."""

    advantages: torch.Tensor  # (n,) Â·Φ
    phi: torch.Tensor  # (n,) Φ as applied (after normalize_phi)
    view: AnchorView
    dgpo_counts: dict[str, float] | None  # the DGPO base's counts (hadw.base=dgpo), else None
    phi_summary: tuple[float, ...] | None = None  # ``phi_summary_terms`` as read (None: not read)


def hadw_call(
    b: Batch, cfg: HadwConfig, dgpo_cfg: DgpoConfig | None, norm_by_std: bool,
    observe: Callable[[float, int], AnchorView], key: Key, acc_scores: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None, *, preview: Callable[[float, int], AnchorView], accuracy_hint: str = "",
) -> HadwCall:
    """One HA-DW call, Â · Φ over a GRPO or DGPO base advantage, reading the host twice.

    Args:
        dgpo_cfg: DGPO's options, read when ``cfg.base=dgpo``.
        observe: ``observe(K_t, B_t)`` adds the call's Σ accuracy and count to the anchor and returns its view.
        preview: returns the view ``observe`` would, leaving the anchor as it is: a call that raises never moves it.
        key, acc_scores, lengths, accuracy_hint: as in ``dgpo_call``.
    """
    by_accuracy = cfg.difficulty_from == "accuracy"  # else y_t and p̂ are mean rewards (the released code)
    scores = b.scores if acc_scores is None else acc_scores
    acc, checks = None, []  # [(scores, key, binary flag)], in the order their errors are raised
    if by_accuracy:
        acc, binary = _accuracy(b, acc_scores, cfg.success_threshold)
        checks.append((scores, key("hadw.success_threshold"), binary))
    on_device = None  # the DGPO base's counts, before the read
    if cfg.base == "dgpo":  # the base advantage under DGPO's own options
        dqw_acc = acc  # DQW weighs questions by accuracy under DGPO's threshold, whatever HA-DW's y_t is
        if dgpo_cfg.dqw and (acc is None or dgpo_cfg.success_threshold != cfg.success_threshold):
            dqw_acc, binary = _accuracy(b, acc_scores, dgpo_cfg.success_threshold)
            checks.append((scores, key("dgpo.success_threshold"), binary))
        adv, on_device = _dgpo_parts(b, dqw_acc, dgpo_cfg, norm_by_std, lengths)
    else:
        adv = grpo_advantage(b, cfg.epsilon, norm_by_std)
    y = acc if by_accuracy else b.scores
    scores_are_y = not by_accuracy or (acc_scores is None and cfg.success_threshold is None)
    p_hat = (b.score_mean if scores_are_y else group_sum(y, b.gid, b.n_groups) / b.count)[b.gid]

    # Eq. 7: K_t, B_t. The first read: the binary checks and K_t (none with both known to the batch)
    k_t = b.score_sum if scores_are_y else y.sum()
    *binary, k_t = host_values(*(check[2] for check in checks), k_t)
    for (checked_scores, checked_key, _), ok in zip(checks, binary):
        if ok is not None and not ok:
            refuse_non_binary(checked_scores, checked_key, accuracy_hint)
    counts = k_t, int(y.numel())
    checked = preview(*counts)  # check first: the anchor moves only once nothing can refuse the call
    weights = hadw_weights(adv, p_hat, checked.prior, cfg.lambda_scale)
    phi = _normalized(weights, cfg)
    # The second read: Φ finite (its float64 sum is), Φ's metrics, the DGPO base's counts
    total, *read = host_values(weights.sum(dtype=torch.float64), *phi_summary_terms(phi, cfg.lambda_scale),
                               *(on_device or ()))
    if not math.isfinite(total):  # exp(M) for M ≳ 88: only with reward difficulty
        raise ValueError(
            f"HA-DW's difficulty weight overflows float32: a group's mean reward reaches "
            f"{float(p_hat.abs().max()):.3g} against the anchor's {checked.prior:.3g}, and the anchor did not take "
            f"this batch. With {key('hadw.difficulty_from')}=reward the weight grows exponentially with that distance: "
            f"rescale the rewards to order 1, or use {key('hadw.difficulty_from')}=accuracy with "
            f"{key('hadw.success_threshold')}.")
    summary, dgpo_read = tuple(read[:5]), read[5:]
    view = observe(*counts)
    if view.prior != checked.prior:  # a deterministic anchor gives the previewed prior; recompute if not
        phi, summary = _normalized(hadw_weights(adv, p_hat, view.prior, cfg.lambda_scale), cfg), None
    dgpo_counts = _dgpo_counts(b, dgpo_read) if on_device is not None else None
    return HadwCall(advantages=adv * phi, phi=phi, view=view, dgpo_counts=dgpo_counts, phi_summary=summary)  # Eq. 17


def _normalized(phi: torch.Tensor, cfg: HadwConfig) -> torch.Tensor:  # Φ as applied
    return phi / phi.mean() if cfg.normalize_phi else phi

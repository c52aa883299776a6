"""The estimators' maths, framework-free: the base advantages (GRPO, DGPO), HA-DW's weights Φ, and one call of
each method on a batch of scored, grouped responses.

Equation numbers refer to the project's equation sheet, ``docs/equations.md`` (HA-DW = arXiv 2601.08521 §3,
Eqs. 7-17; DGPO = MathForge, arXiv 2601.20614 §3.1, Eqs. 3-6); each equation is written here once. Both framework
adapters call these functions: verl's registered estimators (``verl_adapter.estimators``) and TRL's trainer
(``verl_hadw.trl``).
They differ only in how they build the ``Batch``, where the anchor lives (``observe``) and how they name an option
in an error (``key``). Every statistic is over valid rows only and vectorised over groups with index tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from verl_hadw.core.anchor.machine import AnchorView
from verl_hadw.core.groups import Batch, accuracy_of, group_sum, zero_spread
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

    lengths = b.lengths() if lengths is None else lengths.float()
    tokens_all = float(lengths.sum())
    tokens_valid = float(lengths[in_valid].sum())
    if cfg.valid_token_norm and tokens_valid > 0:
        # Eq. 3's denominator is the valid tokens; a token-mean loss divides by all tokens of its batch.
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


def dgpo_call(
    b: Batch, cfg: DgpoConfig, norm_by_std: bool, key: Key, acc_scores: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None, *, accuracy_hint: str = "",
) -> tuple[torch.Tensor, dict[str, float]]:
    """One DGPO call: (n,) advantages and counts. ``acc_scores``: (n,) what DQW's accuracy is read from (default:
    the scores; TRL: the accuracy reward function's column). ``accuracy_hint``: the framework's other way out of
    non-binary scores, added to that error."""
    scores = b.scores if acc_scores is None else acc_scores
    acc = accuracy_of(scores, cfg.success_threshold, key("dgpo.success_threshold"), accuracy_hint) if cfg.dqw else None
    return dgpo_advantage(b, acc, cfg, norm_by_std, lengths)


# -------------------------------------------------------------------------------------------- HA-DW
def hadw_weights(adv: torch.Tensor, p_hat: torch.Tensor, prior: float, lambda_scale: float) -> torch.Tensor:
    """(n,) Φ_{t,i} of Eqs. 13-16 from the base advantage Â (n,) and each row's group accuracy p̂_t (n,)."""
    diff_his = p_hat - prior  # Eq. 13, with the prior C_t⁻
    D = -torch.sign(adv) * torch.sign(diff_his)  # Eq. 14
    M = diff_his.abs()  # Eq. 15
    return lambda_scale * torch.exp(D * M)  # Eq. 16


def _checked_weights(adv: torch.Tensor, p_hat: torch.Tensor, prior: float, lambda_scale: float, key: Key):
    """``hadw_weights``, or a ValueError when Φ overflows float32 (exp(M) for M ≳ 88: only reward difficulty)."""
    phi = hadw_weights(adv, p_hat, prior, lambda_scale)
    if not bool(torch.isfinite(phi).all()):
        raise ValueError(
            f"Φ = λ·exp(±|p̂ - C⁻|) overflows float32: p̂ reaches {float(p_hat.abs().max()):.3g} against the "
            f"anchor C⁻ = {prior:.3g}. With {key('hadw.difficulty_from')}=reward, p̂ and C⁻ are mean "
            f"rewards: rescale the rewards to order 1, or use difficulty_from=accuracy with success_threshold. "
            "The anchor did not take this batch."
        )
    return phi


@dataclass(frozen=True)
class HadwCall:
    """What one HA-DW call computed: the final advantage, the weights it applied, and the anchor's view."""

    advantages: torch.Tensor  # (n,) Â·Φ
    phi: torch.Tensor  # (n,) Φ as applied (after normalize_phi)
    view: AnchorView
    dgpo_counts: dict[str, float] | None  # the DGPO base's counts (hadw.base=dgpo), else None


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
    threshold_key = key("hadw.success_threshold")
    acc = accuracy_of(scores, cfg.success_threshold, threshold_key, accuracy_hint) if by_accuracy else None
    if cfg.base == "dgpo":  # the base advantage under DGPO's own options
        dqw_acc = None
        if dgpo_cfg.dqw:  # DQW weighs questions by accuracy under DGPO's threshold, whatever HA-DW's y_t is
            same = acc is not None and dgpo_cfg.success_threshold == cfg.success_threshold
            dqw_acc = acc if same else accuracy_of(scores, dgpo_cfg.success_threshold, key("dgpo.success_threshold"),
                                                   accuracy_hint)
        adv, dgpo_counts = dgpo_advantage(b, dqw_acc, dgpo_cfg, norm_by_std, lengths)
    else:
        adv, dgpo_counts = grpo_advantage(b, cfg.epsilon, norm_by_std), None
    # What "difficulty" is measured on: accuracy (paper) or the raw reward (released code, difficulty_from=reward)
    y = acc if by_accuracy else b.scores
    # p̂: the per-group mean of y; binary scores are their own accuracy, so then it is the group's score mean
    plain_mean = not by_accuracy or (acc_scores is None and cfg.success_threshold is None)
    p_hat = (b.score_mean if plain_mean else group_sum(y, b.gid, b.n_groups) / b.count)[b.gid]

    counts = float(y.sum()), int(y.numel())  # Eq. 7: K_t, B_t
    checked = preview(*counts)  # check first: the anchor moves only once nothing can refuse the call
    phi = _checked_weights(adv, p_hat, checked.prior, cfg.lambda_scale, key)
    view = observe(*counts)
    if view.prior != checked.prior:  # a deterministic anchor gives the previewed prior; recompute if not
        phi = hadw_weights(adv, p_hat, view.prior, cfg.lambda_scale)
    if cfg.normalize_phi:
        phi = phi / phi.mean()
    return HadwCall(advantages=adv * phi, phi=phi, view=view, dgpo_counts=dgpo_counts)  # Eq. 17: Â·Φ

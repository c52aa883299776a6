"""A generation batch's gathered reward matrix ``(B, n_funcs)`` -> HA-DW's or DGPO's advantages and metrics (TRL's
and swift's step); groups are consecutive runs of ``group_size`` rows."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

import torch

from verl_hadw.core.advantages import dgpo_call, hadw_call
from verl_hadw.core.anchor.machine import AnchorView
from verl_hadw.core.errors import ConfigError, RewardValueError
from verl_hadw.core.groups import prepare_batch
from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.core.options import DgpoConfig, HadwConfig
from verl_hadw.core.terms import Terms
from verl_hadw.hf_trainer.checkpoint_anchor import TrainerAnchor

__all__ = ["RewardColumns", "scores_of", "generation_advantages", "check_reward_weights", "check_accuracy_weight",
           "check_weights", "check_reward_values"]

VERL_ONLY_METRICS = ("hadw/actor_recoveries",)  # about verl's Ray actor; these trainers' anchor lives in each process


@dataclass(frozen=True)
class RewardColumns:
    """The reward matrix's columns: each function's name, its weight, which one is the accuracy (None: the sum)."""

    names: Sequence[str]
    weights: torch.Tensor  # (n_funcs,)
    accuracy_index: int | None


def _floats(weights) -> list[float]:
    return [float(w) for w in (weights.tolist() if isinstance(weights, torch.Tensor) else weights)]


def check_reward_weights(weights, names: Sequence[str], terms: Terms) -> None:
    """Raise ``ConfigError`` for a NaN or infinite reward weight, naming its function (``names``)."""
    values = _floats(weights)
    if bad := [(i, w) for i, w in enumerate(values) if not math.isfinite(w)]:
        which = ", ".join(f"{w} for {names[i]!r}" if i < len(names) else f"{w} at {i}" for i, w in bad)
        raise ConfigError(f"{terms.key('reward_weights')}={values} holds a weight that is not a finite number "
                          f"({which}). Give every reward function a finite weight.")


def check_accuracy_weight(weights, names: Sequence[str], index: int | None, terms: Terms) -> None:
    """Raise ``ConfigError`` when the accuracy is read from a reward function weighed by 0 or less."""
    values = _floats(weights)
    bad = [i for i in ([index] if index is not None else range(len(values))) if i < len(values) and values[i] <= 0]
    weights_set, index_key = terms.setting("reward_weights", values), terms.key("accuracy_reward_index")
    name = [repr(n) for n in names] + [f"number {i}" for i in range(len(names), len(values))]  # names known later
    if bad and index is not None:
        raise ConfigError(
            f"{weights_set} gives the accuracy reward function {name[index]} "
            f"({terms.setting('accuracy_reward_index', index)}) the weight {values[index]}, so the advantage would not "
            f"reward the accuracy HA-DW and DGPO read. Give it a positive weight, or set {index_key} to the function "
            "that is the accuracy.")
    if bad:
        which = ", ".join(f"{values[i]} for {name[i]}" for i in bad)
        raise ConfigError(
            f"{weights_set} weighs a reward function by 0 or less ({which}), "
            f"and with {index_key} unset the accuracy is read from the weighted sum, which would not be an accuracy "
            f"then. Set {index_key} to the function that is the accuracy, or give every function a positive weight.")


def check_weights(weights, names: Sequence[str], options) -> None:
    """``check_reward_weights``; and where the run (``options``: its ``OptionFields``) reads an accuracy, that it comes
    from a function the advantage rewards (``check_accuracy_weight``)."""
    check_reward_weights(weights, names, options.terms)
    if options.reads_accuracy():
        check_accuracy_weight(weights, names, options.accuracy_reward_index, options.terms)


def check_reward_values(name: str, values):
    """``values``, checked: ``RewardValueError`` naming reward function ``name`` where one is not a number or None."""
    for i, value in enumerate(values):
        if not (value is None or isinstance(value, numbers.Real) or (isinstance(value, torch.Tensor)
                                                                      and value.numel() == 1)):
            raise RewardValueError(
                f"the reward function {name!r} returned {type(value).__name__} {value!r:.60} for completion {i} of "
                "this generation batch, but a reward is a number (or None). Make it return a float.")
    return values


def scores_of(rewards_per_func: torch.Tensor, columns: RewardColumns, terms: Terms):
    """(B,) weighted sums of the rewards ``rewards_per_func`` (B, n_funcs), a None (NaN) adding 0 as the frameworks'
    nansum; (B,) the accuracy function's column, a None read as 0 (None: the scores are the accuracy); (B,) the rows no
    function scored; and whether that is every row. One host read."""
    names, index = columns.names, columns.accuracy_index
    check_reward_weights(columns.weights, names, terms)  # a weight, not the function, is to blame then
    scores = (rewards_per_func * columns.weights.to(rewards_per_func.device)).nansum(dim=1)
    unscorable, bad = torch.isnan(rewards_per_func).all(dim=1), torch.isinf(rewards_per_func)
    checks = [bad.any(dim=1), ~torch.isfinite(scores)]
    *failed, none_scored = torch.stack([*(rows.any() for rows in checks), unscorable.all()]).tolist()  # the one read
    rows = [r.nonzero().squeeze(-1)[:5].tolist() if wrong else None for r, wrong in zip(checks, failed)]
    if failed[0]:
        funcs = " and ".join(repr(names[f]) for f in bad.any(dim=0).nonzero().squeeze(-1).tolist())
        raise ValueError(f"the reward function {funcs} returned an infinite value (e.g. "
                         f"{float(rewards_per_func[bad][0])}) for completions {rows[0]} of this generation batch. "
                         "Make it return a finite number (e.g. clip it).")
    if failed[1]:
        raise ValueError(f"the weighted sum of the rewards ({terms.key('reward_weights')}={columns.weights.tolist()}) "
                         f"overflows for completions {rows[1]} of this generation batch. Use smaller weights or "
                         "rewards.")
    accuracy = rewards_per_func[:, index].nan_to_num(nan=0.0) if index is not None else None
    return scores, accuracy, unscorable, none_scored


def generation_advantages(
    rewards_per_func: torch.Tensor, lengths: torch.Tensor, group_size: int, columns: RewardColumns, *,
    hadw_cfg: HadwConfig, dgpo_cfg: DgpoConfig | None, norm_by_std: bool, anchor: TrainerAnchor | None, step: int,
    training: bool, metrics: MetricBuffer, terms: Terms, exclude_unscorable: bool,
) -> tuple[torch.Tensor, dict[str, float]]:
    """One generation batch's advantages and metrics.

    Args:
        rewards_per_func: (B, n_funcs) rewards gathered over processes; groups are runs of ``group_size`` rows.
        lengths: (B,) each completion's loss tokens, in the same order (DGPO's Eq. 3).
        anchor: None runs DGPO; else HA-DW, whose anchor observes the batch at ``step`` (``training``) or previews it.
        dgpo_cfg: DGPO's options where DGPO runs (alone, or as HA-DW's base).
        exclude_unscorable: the framework leaves a completion no function scored out of its group's statistics
            (advantage 0; here out of HA-DW's batch accuracy too), else (False) its reward is their nansum, 0.

    Returns:
        (B,) advantages, and the hadw/* dgpo/* values to log.
    """
    scores, acc_scores, unscorable, none_scored = scores_of(rewards_per_func, columns, terms)
    if exclude_unscorable and none_scored:  # every group's mean NaN, every advantage 0; the anchor sees nothing
        return torch.zeros_like(scores), {}
    dropped = unscorable & exclude_unscorable
    hint = "" if acc_scores is not None else (
        f"; or, if one of reward_funcs ({', '.join(columns.names)}) is the accuracy (0 or 1), name it: "
        f"{terms.key('accuracy_reward_index')}=<its position> (the advantage stays on the combined reward)")
    index = torch.arange(scores.numel(), device=scores.device) // group_size
    with torch.no_grad():
        b = prepare_batch(scores.unsqueeze(-1), (~dropped).long().unsqueeze(-1), index)  # dropped rows: padding
        acc_scores = acc_scores[b.rows] if acc_scores is not None else None
        lengths = torch.cat([lengths[b.rows], lengths * dropped])  # their tokens stay in the loss's T_all (Eq. 3)
        if anchor is None:
            adv, counts = dgpo_call(b, dgpo_cfg, norm_by_std, terms.key, acc_scores, lengths, accuracy_hint=hint)
            metrics.record_dgpo(step, counts)
        else:
            def view(correct: float, count: int) -> AnchorView:
                return anchor.observe(step, correct, count) if training else anchor.preview(correct, count)

            def checked(correct: float, count: int) -> AnchorView:  # what view() returns, the anchor left as it is
                return anchor.peek(step, correct, count) if training else view(correct, count)

            call = hadw_call(b, hadw_cfg, dgpo_cfg, norm_by_std, view, terms.key, acc_scores, lengths,
                             preview=checked, accuracy_hint=hint)
            adv, step = call.advantages, call.view.step
            metrics.record_hadw(call.view, call.phi, hadw_cfg.lambda_scale, summary=call.phi_summary)
            if call.dgpo_counts is not None:
                metrics.record_dgpo(step, call.dgpo_counts)
    adv = adv.masked_fill(b.count[b.gid] < 2, 0.0)  # one scored completion: r - mean is 0 (std NaN) in the frameworks
    values = {k: v for k, v in metrics.pop(step).items() if k not in VERL_ONLY_METRICS}
    return adv.new_zeros(scores.shape).index_copy_(0, b.rows, adv), values

"""A generation batch's reward matrix -> HA-DW's or DGPO's advantages and metrics (HF-Trainer-style frameworks).

TRL's and ms-swift's GRPO trainers both hand the advantage step a ``(B, n_funcs)`` matrix of rewards, gathered from
every process (so every rank sees the same one), one column per reward function, NaN where a function returned
None; groups are consecutive runs of ``group_size`` rows. ``generation_advantages`` turns it into the ``(B,)``
advantages through the equations (``core.advantages``) and the run's anchor, and returns the ``hadw/*`` ``dgpo/*``
values to log. Pure torch.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from verl_hadw.core.advantages import dgpo_call, hadw_call
from verl_hadw.core.anchor.machine import AnchorView
from verl_hadw.core.errors import ConfigError, RewardValueError
from verl_hadw.core.groups import prepare_batch
from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.core.options import DgpoConfig, HadwConfig
from verl_hadw.core.terms import Terms

__all__ = ["RewardColumns", "StepAnchor", "scores_of", "generation_advantages", "VERL_ONLY_METRICS",
           "check_reward_weights", "check_accuracy_weight", "check_reward_values"]

VERL_ONLY_METRICS = ("hadw/actor_recoveries",)  # about verl's Ray actor; these trainers' anchor lives in each process


@dataclass(frozen=True)
class RewardColumns:
    """What the columns of the reward matrix are: each function's name, its weight, which one is the accuracy
    (None: the weighted sum is the score the accuracy is read from)."""

    names: Sequence[str]
    weights: torch.Tensor  # (n_funcs,)
    accuracy_index: int | None


class StepAnchor(Protocol):
    """The anchor of one trainer (``hf_trainer.checkpoint_anchor.TrainerAnchor``)."""

    def observe(self, step: int, correct: float, count: int) -> AnchorView: ...
    def peek(self, step: int, correct: float, count: int) -> AnchorView: ...
    def preview(self, correct: float, count: int) -> AnchorView: ...


def check_reward_weights(weights, names: Sequence[str], terms: Terms) -> None:
    """Raise ``ConfigError`` for a NaN or infinite reward weight, naming the weight's function: NaN would drop the
    function from the combined reward (``nansum``), an infinity would make every score infinite. Weights may change
    after a trainer is built, so each generation checks them again (``scores_of``)."""
    values = [float(w) for w in (weights.tolist() if isinstance(weights, torch.Tensor) else weights)]
    bad = [(i, w) for i, w in enumerate(values) if w != w or w in (float("inf"), float("-inf"))]
    if bad:
        which = ", ".join(f"{w} for {names[i]!r}" if i < len(names) else f"{w} at {i}" for i, w in bad)
        raise ConfigError(
            f"{terms.key('reward_weights')}={values} holds a weight that is not a finite number ({which}): the "
            "combined reward would drop that function (NaN) or be infinite. Give every reward function a finite "
            "weight."
        )


def check_accuracy_weight(weights, names: Sequence[str], index: int | None, terms: Terms) -> None:
    """Raise ``ConfigError`` when the accuracy is read from a reward function the advantage weighs by 0 or less: the
    named accuracy function (``index``), or, without one, any function of the weighted sum the accuracy is then read
    from. Called where the run reads an accuracy (HA-DW's y_t and p̂, DGPO's question weights)."""
    values = [float(w) for w in (weights.tolist() if isinstance(weights, torch.Tensor) else weights)]
    read = [index] if index is not None else list(range(len(values)))
    bad = [i for i in read if i < len(values) and values[i] <= 0]
    if not bad:
        return
    weights_set, index_key = terms.setting("reward_weights", values), terms.key("accuracy_reward_index")

    def name(i: int) -> str:  # before the framework built its functions, their names are not known yet
        return repr(names[i]) if i < len(names) else f"number {i}"

    if index is not None:
        raise ConfigError(
            f"{weights_set} gives the accuracy reward function {name(index)} "
            f"({terms.setting('accuracy_reward_index', index)}) the weight {values[index]}: the advantage would not "
            "reward the accuracy that HA-DW's y_t and p̂ and DGPO's question weights read. Give it a positive weight, "
            f"or set {index_key} to the function that is the accuracy.")
    which = ", ".join(f"{values[i]} for {name(i)}" for i in bad)
    raise ConfigError(
        f"{weights_set} weighs a reward function by 0 or less ({which}), and with {index_key} unset the accuracy "
        "(HA-DW's y_t and p̂, DGPO's question weights) is read from the weighted sum of the rewards, which would not "
        f"be an accuracy then. Set {index_key} to the function that is the accuracy, or give every reward function "
        "a positive weight.")


def check_reward_values(name: str, values) -> None:
    """Raise ``RewardValueError`` (a ``TypeError``) naming reward function ``name`` when one of its ``values`` (one per
    completion) is
    neither a number nor None (a string, a list...): a framework would fail converting it, naming no function."""
    for i, value in enumerate(values):
        if value is None or isinstance(value, numbers.Real) or (isinstance(value, torch.Tensor) and value.numel() == 1):
            continue
        raise RewardValueError(
            f"the reward function {name!r} returned {type(value).__name__} {value!r:.60} for completion {i} of this "
            "generation batch: a reward is a number (or None when it cannot be scored). Make it return a float, "
            "e.g. float(...) of its score."
        )


def scores_of(rewards_per_func: torch.Tensor, columns: RewardColumns,
              terms: Terms) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B,) the weighted sum of the rewards (GRPO's ``sum_then_normalize`` input), and the accuracy reward's column
    (None: the scores are the accuracy). A completion without a reward (None, NaN) or with an infinite one is an
    error naming the function. One host read when nothing is wrong: every check's flag travels together."""
    names, index = columns.names, columns.accuracy_index
    check_reward_weights(columns.weights, names, terms)  # a weight, not the function, is to blame then
    scores = (rewards_per_func * columns.weights.to(rewards_per_func.device)).nansum(dim=1)
    missing = torch.isnan(rewards_per_func)
    flags = [torch.isinf(rewards_per_func).any(), missing.all(dim=1).any(), ~torch.isfinite(scores).all()]
    if index is not None:
        flags.append(missing[:, index].any())
    if any(torch.stack(flags).tolist()):
        _refuse(rewards_per_func, scores, columns, terms)
    return scores, (rewards_per_func[:, index] if index is not None else None)


def _refuse(rewards_per_func: torch.Tensor, scores: torch.Tensor, columns: RewardColumns, terms: Terms) -> None:
    """The error of a reward matrix whose checks failed (``scores_of``), in the order they are made."""
    names, index = columns.names, columns.accuracy_index
    infinite = torch.isinf(rewards_per_func)
    if bool(infinite.any()):
        funcs = infinite.any(dim=0).nonzero().squeeze(-1).tolist()
        rows = infinite.any(dim=1).nonzero().squeeze(-1)[:5].tolist()
        raise ValueError(
            f"the reward function {' and '.join(repr(names[f]) for f in funcs)} returned an infinite value "
            f"(e.g. {float(rewards_per_func[infinite][0])}) for completions {rows} of this generation batch: HA-DW "
            "and DGPO need a finite score for every completion (its group's statistics and the batch accuracy "
            "include it). Make the reward function return a finite number (e.g. clip it)."
        )
    missing = torch.isnan(rewards_per_func)
    checks = [(missing.all(dim=1), f"every reward function ({', '.join(repr(n) for n in names)})")]
    if index is not None:
        checks.append((missing[:, index], f"the accuracy reward function {names[index]!r} "
                                          f"({terms.key('accuracy_reward_index')}={index})"))
    for unscored, which in checks:
        if not bool(unscored.any()):
            continue
        rows = unscored.nonzero().squeeze(-1)[:5].tolist()
        raise ValueError(
            f"{which} returned None or NaN for completions {rows} of this generation batch: HA-DW and DGPO need "
            "a score for every completion (its group's statistics and the batch accuracy include it). Make "
            "the reward function return a number (e.g. 0.0 for an unparseable answer)."
        )
    rows = (~torch.isfinite(scores)).nonzero().squeeze(-1)[:5].tolist()
    raise ValueError(
        f"the weighted sum of the rewards ({terms.key('reward_weights')}={columns.weights.tolist()}) overflows "
        f"for completions {rows} of this generation batch, though every reward function returned a finite "
        "value: use smaller weights or rewards."
    )


def generation_advantages(
    rewards_per_func: torch.Tensor, lengths: torch.Tensor, group_size: int, columns: RewardColumns, *,
    hadw_cfg: HadwConfig, dgpo_cfg: DgpoConfig | None, norm_by_std: bool, anchor: StepAnchor | None, step: int,
    training: bool, metrics: MetricBuffer, terms: Terms,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(B,) advantages of one generation batch, and its hadw/* dgpo/* metric values.

    rewards_per_func: (B, n_funcs), gathered over processes; groups are consecutive runs of ``group_size`` rows.
    lengths: (B,) each completion's loss tokens, gathered in the same order (DGPO's Eq. 3). anchor: None runs DGPO;
    else HA-DW, whose anchor observes the batch at optimizer step ``step`` in training and only previews it in
    evaluation (``training=False``). ``dgpo_cfg``: DGPO's options when DGPO runs (alone, or as HA-DW's base).
    """
    scores, acc_scores = scores_of(rewards_per_func, columns, terms)
    hint = "" if acc_scores is not None else (
        f"; or, if one of reward_funcs ({', '.join(columns.names)}) is the accuracy (0 or 1), name it: "
        f"{terms.key('accuracy_reward_index')}=<its position> (the advantage stays on the combined reward)")
    index = torch.arange(scores.numel(), device=scores.device) // group_size
    with torch.no_grad():
        b = prepare_batch(scores.unsqueeze(-1), torch.ones_like(scores, dtype=torch.long).unsqueeze(-1), index)
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
    values = {k: v for k, v in metrics.pop(step).items() if k not in VERL_ONLY_METRICS}
    return adv, values

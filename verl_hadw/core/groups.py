"""Vectorised per-group statistics over verl's uid index, with padding rows excluded.

verl pads a step's batch with rows whose ``response_mask`` is all zero (``padding_utils``); they must not
count as responses. Every helper here works on the *valid* rows only, grouped as verl's own ``grpo`` groups the
uids, by equal labels (``group_labels.group_ids``); results for padding rows are zero. No Python loop over rows
or groups.

On a GPU a read of a device value by the host waits for the queue to empty: ``prepare_batch`` reads once for all
its checks and counts (twice with padding rows); a batch that fails a check takes the step-by-step path (its error
names rows, key and remedy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import torch

from verl_hadw.core.group_labels import as_labels, as_valid_index, group_ids, tensor_ids_where

__all__ = [
    "Batch", "check_inputs", "prepare_batch", "group_ids", "as_labels", "group_stats", "group_sum", "accuracy_of",
    "accuracy_parts", "refuse_non_binary", "zero_spread", "check_mask_values", "check_finite_sums", "check_magnitude",
    "host_values",
]


@dataclass
class Batch:
    """A call's valid rows, compacted: every (n,) tensor is indexed by valid row, every (G,) by group."""

    rows: torch.Tensor  # (n,) long, positions of the valid rows in the (N, L) batch
    scores: torch.Tensor  # (n,) outcome scores Σ_t token_level_rewards
    response_mask: torch.Tensor  # (N, L), kept for ``lengths()``
    gid: torch.Tensor  # (n,) long, contiguous group id in [0, G)
    n_groups: int  # G
    count: torch.Tensor  # (G,) valid responses per group
    grpo_mean: torch.Tensor  # (G,) the mean verl's grpo subtracts (group_mean_std): Σ/count, 0 for a single response
    grpo_std: torch.Tensor  # (G,) verl grpo's unbiased group std, 1 for a single response
    score_mean: torch.Tensor  # (G,) Σ scores / count for every group (differs from grpo_mean for singletons only)
    n_rows: int  # N, including padding rows
    # read with the checks, {} on the step-by-step path: "binary" (scores all 0/1), "valid_groups", "valid_group_rows"
    # (groups of >= 2 responses with a spread, their rows), "score_sum" (Σ scores, summed in their order)
    known: dict = field(default_factory=dict)

    def lengths(self) -> torch.Tensor:
        """(n,) response tokens per valid row (a full pass over the mask: only DGPO needs it)."""
        return self.response_mask.sum(dim=-1)[self.rows].float()

    @cached_property
    def spread(self) -> torch.Tensor:
        """(G,) max - min of each group's valid scores: exactly 0 when they are all equal."""
        g, n = self.gid, self.n_groups
        return group_reduce(self.scores, g, n, "amax") - group_reduce(self.scores, g, n, "amin")


def zero_spread(adv: torch.Tensor, b: Batch) -> torch.Tensor:
    """(n,) ``adv`` with exactly 0 in every group of >= 2 valid responses whose scores are all equal.

    Such a group carries no signal, but s - mean_g is not exactly 0 when the mean rounds (8 × 0.3 in float32),
    and (s - mean_g)/(std_g + ε) then turns rounding noise into advantages up to ~0.2 (verl's ``grpo`` does).
    Single-response groups keep verl's convention (mean 0, std 1). A deliberate deviation: docs/equations.md.
    """
    flat = (b.spread == 0) & (b.count >= 2)
    return adv.masked_fill(flat[b.gid], 0.0)


def valid_rows(response_mask: torch.Tensor) -> torch.Tensor:
    """(n,) positions of rows with at least one response token. Exact, but cheap: a row whose first mask entry is
    set is valid; only the others (verl's padding rows, in practice) are scanned in full."""
    first = response_mask[:, 0]
    if bool(first.all()):  # the usual step: no padding rows
        return torch.arange(first.numel(), device=first.device)
    valid = first != 0
    unsure = (~valid).nonzero().squeeze(-1)
    if unsure.numel():
        valid[unsure] = (response_mask[unsure] != 0).any(dim=-1)
    return valid.nonzero().squeeze(-1)


def group_sum(values: torch.Tensor, gid: torch.Tensor, n_groups: int) -> torch.Tensor:
    """(G,) Σ over each group's rows of ``values`` (n,)."""
    return torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add_(0, gid, values)


def group_reduce(values: torch.Tensor, gid: torch.Tensor, n_groups: int, how: str) -> torch.Tensor:
    """(G,) per-group ``amax``/``amin`` of ``values`` (n,)."""
    out = torch.zeros(n_groups, dtype=values.dtype, device=values.device)
    return out.scatter_reduce_(0, gid, values, reduce=how, include_self=False)


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def check_inputs(token_level_rewards, response_mask, index) -> None:
    """Types, shapes, dtypes and devices of an estimator's inputs, with errors that name the argument.

    Metadata comparisons only (no pass over the data). Integer and bool rewards are accepted: their
    per-row sums are cast to float32 (exact below 2**24). Any real mask dtype (bool, int, float) is fine.
    """
    for name, t in (("token_level_rewards", token_level_rewards), ("response_mask", response_mask)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (batch, response_length), got {type(t).__name__}")
        if t.is_complex():
            raise ValueError(f"{name} has complex dtype {t.dtype}; use a real (float, int or bool) tensor")
    if token_level_rewards.dim() != 2:
        shape = _shape(token_level_rewards)
        raise ValueError(f"token_level_rewards has shape {shape} but must be 2-D (batch, response_length)")
    if response_mask.shape != token_level_rewards.shape:
        raise ValueError(
            f"response_mask has shape {_shape(response_mask)} but token_level_rewards has "
            f"{_shape(token_level_rewards)}: both must be (batch, response_length)"
        )
    if response_mask.device != token_level_rewards.device:
        raise ValueError(f"response_mask is on {response_mask.device} but token_level_rewards on "
                         f"{token_level_rewards.device}: both must be on one device")
    if token_level_rewards.shape[0] and token_level_rewards.shape[1] == 0:
        raise ValueError(f"token_level_rewards has shape {_shape(token_level_rewards)}: response_length is 0")
    n_index = getattr(as_labels(index), "shape", None)
    if n_index is not None and len(n_index) != 1:
        raise ValueError(
            f"index has shape {tuple(n_index)} but must be 1-D (batch,), one uid per row (a uid string or a number; "
            "not a pair or a list per row)"
        )
    if len(index) != token_level_rewards.shape[0]:
        raise ValueError(f"index has {len(index)} entries but the batch has {token_level_rewards.shape[0]} rows")


def prepare_batch(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index, sorted_ids: bool = True
) -> Batch:
    """Scores, lengths and group statistics of the valid rows of one estimator call.

    Args:
        token_level_rewards: (N, L) float, the outcome reward summed over tokens is the score.
        response_mask: (N, L), rows that are all zero are verl's padding rows.
        index: (N,) uid per row (np.ndarray of str/int or a tensor).
        sorted_ids: number groups in sorted label order (see ``group_ids``); False only where no result
            depends on the numbering.
    """
    if index is None:
        raise ValueError(
            "the advantage estimator got no 'index': verl passes data.non_tensor_batch['uid'] as the group "
            "index; make sure every row of the batch carries a 'uid'"
        )
    index = as_labels(index)  # a list becomes one object array: its labels compared by equality, never coerced
    check_inputs(token_level_rewards, response_mask, index)
    n_rows = token_level_rewards.shape[0]
    if n_rows == 0:
        raise ValueError("the advantage estimator got an empty batch (0 rows)")
    b = _batch_in_one_read(token_level_rewards, response_mask, index, sorted_ids)
    return b if b is not None else _stepwise_batch(token_level_rewards, response_mask, index, sorted_ids)


def host_values(*values) -> list:
    """One-element tensors (bool, int, float) read by the host together, as floats: one sync on a GPU instead of one
    each, none when every value is a Python value already (those come back as they are)."""
    tensors = [v.reshape(()).double() for v in values if isinstance(v, torch.Tensor)]
    read = iter(torch.stack(tensors).tolist() if tensors else ())
    return [next(read) if isinstance(v, torch.Tensor) else v for v in values]


def _batch_in_one_read(token_level_rewards, response_mask, index, sorted_ids: bool) -> Batch | None:
    """``_stepwise_batch``'s batch, with every check's flag and the counts the calls need read by the host at once.

    Rows whose first mask entry is 0 are taken for padding, their scores and labels put aside (slot -1 of every
    per-group tensor) rather than removed, so nothing waits for their count; a second read confirms they are all
    zero. None when a check fails, a label cannot be grouped or such a row has a response token: the step-by-step
    path then raises as it always has, or builds the batch."""
    n_rows = token_level_rewards.shape[0]
    pad = response_mask[:, 0] == 0
    raw = token_level_rewards.sum(dim=-1)
    raw = raw if raw.is_floating_point() else raw.float()  # int/bool rewards: exact integer sums, then float
    scores = raw.float()
    if isinstance(index, torch.Tensor):
        gid, nan_label = tensor_ids_where(index, ~pad)
        slots = n_rows + 1
    else:
        try:  # the labels of padding rows too: most batches have none, and a phantom group is dropped below
            gid, n_labels = group_ids(index, scores.device, sorted_ids)
        except ValueError:  # the step-by-step path says which label (or finds it only in a padding row)
            return None
        gid, slots, nan_label = gid.masked_fill(pad, n_labels), n_labels + 1, None
    grpo_mean, grpo_std, count, score_mean = group_stats(scores, gid, slots)
    spread = group_reduce(scores, gid, slots, "amax") - group_reduce(scores, gid, slots, "amin")
    in_groups, f64 = count[:-1], torch.float64
    exists, valid_g = in_groups > 0, (in_groups >= 2) & (spread[:-1] > 0)  # valid_g: ``advantages._dgpo_parts``
    kept = scores.masked_fill(pad, 0.0)
    # The checks as float64 sums, finite exactly when every term is (N float32 terms cannot overflow): every score
    # (then every raw sum too), every group's std (check_magnitude); the float mask's range (check_mask_values)
    mask_range = response_mask.aminmax() if response_mask.is_floating_point() and response_mask.numel() else ()
    *mask_range, nan_label, n_pad, all_scores, all_std, n_groups, n_valid, n_valid_rows, non_binary, score_sum = \
        host_values(*mask_range, nan_label, pad.sum(dtype=f64), kept.sum(dtype=f64), grpo_std[:-1].sum(dtype=f64),
                    exists.sum(dtype=f64), valid_g.sum(dtype=f64), (in_groups * valid_g).sum(dtype=f64),
                    torch.count_nonzero(kept * (kept - 1)), kept.sum())
    in_range = not mask_range or (mask_range[0] >= 0 and mask_range[1] <= 1)  # NaN: False
    if not (in_range and not nan_label and math.isfinite(all_scores) and math.isfinite(all_std)) or n_pad == n_rows:
        return None
    n_pad, n_groups = int(n_pad), int(n_groups)
    keep = slice(0, n_groups)  # the tensor path numbers the groups of valid rows 0..G-1
    known = {"binary": non_binary == 0, "valid_groups": int(n_valid), "valid_group_rows": int(n_valid_rows)}
    if n_pad:
        unsure = torch.nonzero_static(pad, size=n_pad).squeeze(-1)
        rows = torch.nonzero_static(~pad, size=n_rows - n_pad).squeeze(-1)
        scores, gid = scores[rows], gid[rows]
        # the one more read a batch with padding rows takes: are they all zero, and Σ scores in their new order
        response, score_sum = host_values((response_mask[unsure] != 0).any(), scores.sum())
        if response:  # a row with a zero first entry but a response token: the exact path finds it
            return None
        if not isinstance(index, torch.Tensor):  # drop the groups only padding rows had, keeping the order
            keep = torch.nonzero_static(exists, size=n_groups).squeeze(-1)
            gid = (torch.cumsum(exists, 0) - 1)[gid]
    else:
        rows = torch.arange(n_rows, device=scores.device)
    known["score_sum"] = score_sum  # summed in b.scores' order: the same float as b.scores.sum()
    b = Batch(rows=rows, scores=scores, response_mask=response_mask, gid=gid, n_groups=n_groups,
              count=count[keep], grpo_mean=grpo_mean[keep], grpo_std=grpo_std[keep], score_mean=score_mean[keep],
              n_rows=n_rows, known=known)
    b.__dict__["spread"] = spread[keep]  # the cached property, computed above for valid_g
    return b


def _stepwise_batch(token_level_rewards, response_mask, index, sorted_ids: bool) -> Batch:
    """The batch, checked step by step (a host read per check): the path of a batch that fails a check."""
    n_rows = token_level_rewards.shape[0]
    check_mask_values(response_mask)
    rows = valid_rows(response_mask)
    if rows.numel() == 0:
        raise ValueError(f"the batch has {n_rows} rows but none with a response token (all padding)")
    all_valid = rows.numel() == n_rows
    scores = token_level_rewards.sum(dim=-1)
    scores = scores if all_valid else scores[rows]
    if not scores.is_floating_point():  # int/bool rewards: exact integer sums, then float
        scores = scores.float()
    if not torch.isfinite(scores).all():
        check_finite_sums(token_level_rewards, scores, rows)
    index_valid = index if all_valid else as_valid_index(index, rows)
    gid, n_groups = group_ids(index_valid, scores.device, sorted_ids)
    scores = scores.float()
    grpo_mean, grpo_std, count, score_mean = group_stats(scores, gid, n_groups)
    check_magnitude(scores, grpo_std, rows)
    return Batch(rows=rows, scores=scores, response_mask=response_mask, gid=gid, n_groups=n_groups, count=count,
                 grpo_mean=grpo_mean, grpo_std=grpo_std, score_mean=score_mean, n_rows=n_rows)


def check_finite_sums(token_level_rewards: torch.Tensor, scores: torch.Tensor, rows: torch.Tensor) -> None:
    """Raise for the non-finite ``scores`` (n,) of ``rows``: rewards that are NaN/Inf themselves, or finite rewards
    whose per-response sum overflows their dtype (two fp16 tokens of 40000). Only on the error path."""
    bad = ~torch.isfinite(scores)
    bad_rows = rows[bad]
    if bool(torch.isfinite(token_level_rewards[bad_rows]).all()):
        dtype = token_level_rewards.dtype
        raise ValueError(
            f"the rewards of rows {bad_rows[:5].tolist()} are finite but their sum over the response (the score) "
            f"overflows {dtype} (largest finite value {torch.finfo(dtype).max:.6g}): cast token_level_rewards to "
            "float32 before the advantage (verl's reward is float32 unless the reward code casts it), or rescale "
            "the reward function's output"
        )
    rows_named = bad_rows[:5].tolist()
    raise ValueError(f"non-finite (NaN/Inf) rewards in rows {rows_named}: check the reward function's output")


def check_mask_values(response_mask: torch.Tensor) -> None:
    """A floating-point ``response_mask`` must hold finite values in [0, 1]: NaN would otherwise make the row
    valid and its advantages NaN (under DGPO, through the valid-token factor, every row's).

    One pass over the mask (~12 ms at 8192 × 4096, a seventh of the estimator), so only float masks pay it:
    verl's masks are int64 slices of the attention mask (0/1 by construction), bool and int masks are not read.
    """
    if not response_mask.is_floating_point() or response_mask.numel() == 0:
        return
    lo, hi = response_mask.aminmax()  # NaN propagates into both
    if bool(lo >= 0) and bool(hi <= 1):
        return
    bad_row = ~((response_mask >= 0) & (response_mask <= 1)).all(dim=-1)  # only on the error path
    rows = bad_row.nonzero().squeeze(-1)[:5].tolist()
    example = response_mask[rows[0]][~((response_mask[rows[0]] >= 0) & (response_mask[rows[0]] <= 1))][:3].tolist()
    raise ValueError(
        f"response_mask has values outside [0, 1] (e.g. {example}) in rows {rows}: it must be 1 on response tokens "
        "and 0 elsewhere (verl's is the response part of attention_mask); check the code that built it"
    )


# The float32 statistics overflow once (s - mean)² does: |s - mean| ≳ 1.8e19. Beyond that verl's grpo silently
# gives 0 (std = inf) or NaN; here it is an error that says to rescale.
def check_magnitude(scores: torch.Tensor, std: torch.Tensor, rows: torch.Tensor) -> None:
    """Rewards too large for float32 group statistics (e.g. 1e30): a ValueError naming rows and the remedy."""
    if bool(torch.isfinite(std).all()) and bool(torch.isfinite(scores).all()):
        return
    big = scores.abs().nan_to_num(nan=float("inf"))
    worst = torch.topk(big, min(3, big.numel())).indices
    raise ValueError(
        f"rewards too large for the float32 group statistics (e.g. {scores[worst].tolist()} in rows "
        f"{rows[worst].tolist()}): their std overflows float32 (|score - group mean| must stay below ~1e19). "
        "Rescale the reward function's output"
    )


def group_stats(scores: torch.Tensor, gid: torch.Tensor, n_groups: int):
    """(G,) verl grpo's mean and unbiased std, the count, and the plain mean Σ/count of float32 ``scores`` (n,).

    The same operations in the same order as verl's ``group_mean_std(eps=0)``, so bit-identical to it (and to
    verl's grpo), minus its host syncs (``max().item()``, ``any()``; ``bincount``, on CUDA): every id in [0, G) has
    a row (a slot without one gets NaN: ``prepare_batch`` drops it). Single-response groups: mean 0, std 1, as in verl.
    """
    count = group_sum(torch.ones_like(scores), gid, n_groups)  # exact, as verl's index_add_ of ones
    group_mean = group_sum(scores, gid, n_groups) / count
    centered = scores - group_mean[gid]
    var = group_sum(centered * centered, gid, n_groups) / (count - 1.0).clamp_min(1.0)
    single = count <= 1.0
    mean = group_mean.masked_fill(single, 0.0)
    std = torch.sqrt(var.clamp(min=0.0)).masked_fill(single, 1.0)
    return mean, std, count, group_mean


def accuracy_of(scores: torch.Tensor, threshold: float | None, key: str, other_way: str = "") -> torch.Tensor:
    """(n,) accuracy in {0, 1}: the score itself when binary, else ``score > threshold``.

    ``key`` names the config key to set in the error for non-binary scores without a threshold; ``other_way``, in
    the framework's words, is appended to it (TRL: naming the reward function that is the accuracy).
    """
    acc, binary = accuracy_parts(scores, threshold)
    if binary is not None and not bool(binary):
        refuse_non_binary(scores, key, other_way)
    return acc


def accuracy_parts(scores: torch.Tensor, threshold: float | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``accuracy_of`` without reading the host: (n,) accuracy, and the device flag "every score is 0 or 1" that
    the caller reads with its other values (None with a threshold: nothing to check)."""
    if threshold is not None:
        return (scores > threshold).float(), None
    return scores.float(), ((scores == 0) | (scores == 1)).all()


def refuse_non_binary(scores: torch.Tensor, key: str, other_way: str = "") -> None:
    """The error for scores that are not binary accuracies (``accuracy_of``)."""
    binary = (scores == 0) | (scores == 1)
    example = scores[~binary][:3].tolist()
    raise ValueError(
        f"rewards are not binary accuracies (e.g. {example}); set {key}=<threshold> so that "
        f"accuracy = score > threshold (DAPO's ±1 rewards with overlong penalties: 0){other_way}"
    )

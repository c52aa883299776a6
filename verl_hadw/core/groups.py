"""Vectorised per-group statistics over verl's uid index, with padding rows excluded.

verl pads a step's batch with rows whose ``response_mask`` is all zero (``padding_utils``); they must not
count as responses. Every helper here works on the *valid* rows only, grouped as verl's own ``grpo`` groups the
uids, by equal labels (``group_labels.group_ids``); results for padding rows are zero. No Python loop over rows
or groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from verl_hadw.core.group_labels import as_labels, group_ids

__all__ = [
    "Batch",
    "check_inputs",
    "prepare_batch",
    "group_ids",
    "as_labels",
    "group_stats",
    "group_sum",
    "accuracy_of",
    "zero_spread",
    "check_mask_values",
    "check_finite_sums",
    "check_magnitude",
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

    def lengths(self) -> torch.Tensor:
        """(n,) response tokens per valid row (a full pass over the mask: only DGPO needs it)."""
        return self.response_mask.sum(dim=-1)[self.rows].float()

    @cached_property
    def spread(self) -> torch.Tensor:
        """(G,) max - min of each group's valid scores: exactly 0 when they are all equal."""
        return group_reduce(self.scores, self.gid, self.n_groups, "amax") - group_reduce(
            self.scores, self.gid, self.n_groups, "amin"
        )


def zero_spread(adv: torch.Tensor, b: Batch) -> torch.Tensor:
    """(n,) ``adv`` with exactly 0 in every group of >= 2 valid responses whose scores are all equal.

    Such a group carries no signal, but s - mean_g is not exactly 0 when the mean rounds (8 × 0.3 in float32),
    and (s - mean_g)/(std_g + ε) then turns rounding noise into advantages up to ~0.2 (verl's ``grpo`` does).
    Single-response groups keep verl's convention (mean 0, std 1). A deliberate deviation: docs/equations.md.
    """
    flat = (b.spread == 0) & (b.count >= 2)
    return adv.masked_fill(flat[b.gid], 0.0)


def valid_rows(response_mask: torch.Tensor) -> torch.Tensor:
    """(n,) positions of rows with at least one response token.

    Exact, but cheap: a row whose first mask entry is set is valid; only the others (verl's padding rows,
    in practice) are scanned in full.
    """
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
        raise ValueError(
            f"token_level_rewards has shape {_shape(token_level_rewards)} but must be 2-D (batch, response_length)"
        )
    if response_mask.shape != token_level_rewards.shape:
        raise ValueError(
            f"response_mask has shape {_shape(response_mask)} but token_level_rewards has "
            f"{_shape(token_level_rewards)}: both must be (batch, response_length)"
        )
    if response_mask.device != token_level_rewards.device:
        raise ValueError(
            f"response_mask is on {response_mask.device} but token_level_rewards on {token_level_rewards.device}: "
            "both must be on one device"
        )
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
    return Batch(
        rows=rows,
        scores=scores,
        response_mask=response_mask,
        gid=gid,
        n_groups=n_groups,
        count=count,
        grpo_mean=grpo_mean,
        grpo_std=grpo_std,
        score_mean=score_mean,
        n_rows=n_rows,
    )


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
    verl's grpo), minus its two host syncs (``max().item()``, ``any()``): every id in [0, G) has a row.
    Single-response groups: mean 0, std 1, as in verl.
    """
    count = torch.bincount(gid, minlength=n_groups).float()  # exact, as verl's index_add_ of ones
    group_mean = group_sum(scores, gid, n_groups) / count
    centered = scores - group_mean[gid]
    var = group_sum(centered * centered, gid, n_groups) / (count - 1.0).clamp_min(1.0)
    single = count <= 1.0
    mean = group_mean.masked_fill(single, 0.0)
    std = torch.sqrt(var.clamp(min=0.0)).masked_fill(single, 1.0)
    return mean, std, count, group_mean


def as_valid_index(index, rows: torch.Tensor):
    """``index`` (ndarray, tensor or list) restricted to ``rows``."""
    if isinstance(index, np.ndarray):
        return index[rows.cpu().numpy()]
    if isinstance(index, torch.Tensor):
        return index.reshape(-1)[rows.to(index.device)]
    return np.asarray(index, dtype=object)[rows.cpu().numpy()]


def accuracy_of(scores: torch.Tensor, threshold: float | None, key: str, other_way: str = "") -> torch.Tensor:
    """(n,) accuracy in {0, 1}: the score itself when binary, else ``score > threshold``.

    ``key`` names the config key to set in the error for non-binary scores without a threshold; ``other_way``, in
    the framework's words, is appended to it (TRL: naming the reward function that is the accuracy).
    """
    if threshold is not None:
        return (scores > threshold).float()
    binary = (scores == 0) | (scores == 1)
    if not binary.all():
        example = scores[~binary][:3].tolist()
        raise ValueError(
            f"rewards are not binary accuracies (e.g. {example}); set {key}=<threshold> so that "
            f"accuracy = score > threshold (DAPO's ±1 rewards with overlong penalties: 0){other_way}"
        )
    return scores.float()

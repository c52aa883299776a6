"""Group ids and per-group statistics of an estimator call's valid rows, vectorised over groups.

Rows are grouped as verl's ``grpo`` groups them, by equal labels (``"7"`` and ``"007"`` apart, ``1``, ``1.0`` and
``True`` together); labels a dict cannot group (NaN, a pair, a list) are refused. Padding rows are not responses."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

_NOT_SCALAR = (list, tuple, dict, set, frozenset, np.ndarray, torch.Tensor)


def as_labels(index):
    """``index`` as an ndarray or tensor: a list becomes an object array (its labels never coerced)."""
    if isinstance(index, (np.ndarray, torch.Tensor)):
        return index
    try:
        return np.asarray(index, dtype=object)
    except ValueError as exc:  # ragged nesting numpy cannot lay out
        raise ValueError(f"index must hold one scalar label per row (a uid string or a number): {exc}") from None


def _refuse(label, why: str):
    raise ValueError(f"index holds the group label {label!r:.80}, which {why}: verl's grpo groups rows by equal "
                     "labels, so each row needs one scalar label (a uid string or a number) equal to its group's "
                     "others")


def _order_key(label) -> tuple:
    """Canonical order of distinct labels: numbers by value, then text, bytes, None, others by type and repr."""
    for rank, kind in enumerate((numbers.Real, str, bytes)):
        if isinstance(label, kind):
            return (rank, label)
    return (3, 0) if label is None else (4, type(label).__qualname__, repr(label))


def tensor_ids_where(index: torch.Tensor, valid: torch.Tensor):
    """(N,) group ids of the rows ``valid`` (N,) bool, 0..G-1 in sorted label order, the others N, without a read by
    the host (``torch.unique`` reads twice); and the device flag "a valid row's label is NaN" (None for integers)."""
    if index.is_complex():
        raise ValueError(f"index is a {index.dtype} tensor: group labels must be real numbers or strings")
    values = index.reshape(-1).to(valid.device)
    n = values.numel()
    keys = values.to(torch.uint8) if values.dtype == torch.bool else values
    nan = (torch.isnan(keys) & valid).any() if keys.is_floating_point() else None
    lowest = -torch.inf if keys.is_floating_point() else torch.iinfo(keys.dtype).min
    # the other rows take the largest valid label, so they start no run of their own
    keys = keys.masked_fill(~valid, keys.masked_fill(~valid, lowest).max())
    ordered, order = torch.sort(keys, stable=True)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[1:] = ordered[1:] != ordered[:-1]  # each run of equal labels is one group (as torch.unique's !=)
    ids = (torch.cumsum(starts, 0) - 1).masked_fill_(~valid.index_select(0, order), n)
    return torch.empty_like(ids).scatter_(0, order, ids), nan


def group_ids(index, device, sorted_ids: bool = True) -> tuple[torch.Tensor, int]:
    """(n,) group ids in [0, G) on ``device`` of the labels ``index`` (n,), and G; equal labels are one group.
    ``sorted_ids``: groups numbered in a canonical label order, whatever the row order (False: by first appearance)."""
    if isinstance(index, torch.Tensor):
        ids, nan = tensor_ids_where(index, torch.ones(index.numel(), dtype=torch.bool, device=index.device))
        if nan is not None and bool(nan):
            _refuse(float("nan"), "is NaN, unequal to itself")
        return ids.to(device), int(ids.max()) + 1 if ids.numel() else 0
    labels = as_labels(index).reshape(-1)
    kind = labels.dtype.kind
    if kind in "biufUS":  # one numpy type for every label: equality is numpy's, vectorised
        if kind == "f" and bool(np.isnan(labels).any()):
            _refuse(float("nan"), "is NaN, unequal to itself")
        uniques, inverse = np.unique(labels, return_inverse=True)
        return torch.from_numpy(inverse.reshape(-1).astype(np.int64)).to(device), len(uniques)
    run_of_row, run_labels = _runs(labels)
    first_id: dict = {}
    for label in run_labels:  # runs of equal neighbours: one per group for verl's uids
        if isinstance(label, _NOT_SCALAR):
            _refuse(label, f"is a {type(label).__name__}, not one scalar label")
        if isinstance(label, (float, np.floating)) and label != label:
            _refuse(label, "is NaN, unequal to itself")
        try:
            first_id.setdefault(label, len(first_id))
        except TypeError as exc:  # unhashable
            _refuse(label, f"cannot be compared as a dict key ({exc})")
    run_gid = np.fromiter((first_id[label] for label in run_labels), dtype=np.int64, count=len(run_labels))
    if sorted_ids and len(first_id) > 1:
        order = sorted(first_id, key=_order_key)
        rank = np.empty(len(order), dtype=np.int64)
        rank[[first_id[label] for label in order]] = np.arange(len(order))
        run_gid = rank[run_gid]
    return torch.from_numpy(run_gid[run_of_row]).to(device), len(first_id)


def _runs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n,) run number of each row and (R,) the label of each run of equal neighbouring labels."""
    n = len(labels)
    try:
        new_run = labels[1:] != labels[:-1] if n > 1 else np.zeros(0, dtype=bool)
        plain = isinstance(new_run, np.ndarray) and new_run.dtype == bool and new_run.shape == (max(n - 1, 0),)
    except (ValueError, TypeError):  # labels whose comparison is not one truth value (arrays in an object array)
        plain = False
    if not plain:  # every row its own run: the dict does the grouping (and refuses what it cannot group)
        return np.arange(n, dtype=np.int64), labels
    run_of_row = np.zeros(n, dtype=np.int64)
    np.cumsum(new_run, out=run_of_row[1:])
    return run_of_row, labels[np.concatenate(([True], new_run))] if n else labels


@dataclass
class Batch:
    """A call's valid rows, compacted: every (n,) tensor is indexed by valid row, every (G,) by group."""

    rows: torch.Tensor  # (n,) long, positions of the valid rows in the (N, L) batch
    scores: torch.Tensor  # (n,) float32 outcome scores Σ_t token_level_rewards
    response_mask: torch.Tensor  # (N, L), kept for ``lengths()``
    gid: torch.Tensor  # (n,) long, group id in [0, G)
    n_groups: int  # G
    count: torch.Tensor  # (G,) valid responses per group
    grpo_mean: torch.Tensor  # (G,) the mean verl's grpo subtracts: Σ/count, 0 for a single response
    grpo_std: torch.Tensor  # (G,) verl grpo's unbiased group std, 1 for a single response
    score_mean: torch.Tensor  # (G,) Σ scores / count (differs from grpo_mean for single responses only)
    spread: torch.Tensor  # (G,) max - min of each group's scores: exactly 0 when they are all equal
    n_rows: int  # N, padding rows included
    binary: bool  # every score is 0 or 1
    valid_groups: int  # groups of >= 2 responses whose scores are not all equal
    valid_group_rows: int  # their responses
    score_sum: float  # Σ scores, summed in ``scores``' order (the float ``scores.sum()`` gives)

    def lengths(self) -> torch.Tensor:
        """(n,) response tokens per valid row (a pass over the mask: only DGPO needs it)."""
        return self.response_mask.sum(dim=-1)[self.rows].float()


def zero_spread(adv: torch.Tensor, b: Batch) -> torch.Tensor:
    """(n,) ``adv`` with exactly 0 in every group of >= 2 responses whose scores are all equal (verl's grpo turns the
    rounding of such a group's mean, 8 × 0.3 in float32, into advantages up to ~0.2)."""
    flat = (b.spread == 0) & (b.count >= 2)
    return adv.masked_fill(flat[b.gid], 0.0)


def group_sum(values: torch.Tensor, gid: torch.Tensor, n_groups: int) -> torch.Tensor:
    """(G,) Σ over each group's rows of ``values`` (n,)."""
    return torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add_(0, gid, values)


def check_inputs(token_level_rewards, response_mask, index) -> None:
    """Check types, shapes and devices of an estimator's inputs (metadata only), each error naming the argument."""
    for name, t in (("token_level_rewards", token_level_rewards), ("response_mask", response_mask)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (batch, response_length), got {type(t).__name__}")
        if t.is_complex():
            raise ValueError(f"{name} has complex dtype {t.dtype}; use a real (float, int or bool) tensor")
    shape = tuple(token_level_rewards.shape)
    if token_level_rewards.dim() != 2:
        raise ValueError(f"token_level_rewards has shape {shape} but must be 2-D (batch, response_length)")
    if response_mask.shape != token_level_rewards.shape:
        raise ValueError(f"response_mask has shape {tuple(response_mask.shape)} but token_level_rewards has {shape}: "
                         "both must be (batch, response_length)")
    if response_mask.device != token_level_rewards.device:
        raise ValueError(f"response_mask is on {response_mask.device} but token_level_rewards on "
                         f"{token_level_rewards.device}: both must be on one device")
    if token_level_rewards.shape[0] and token_level_rewards.shape[1] == 0:
        raise ValueError(f"token_level_rewards has shape {shape}: response_length is 0")
    n_index = getattr(as_labels(index), "shape", None)
    if n_index is not None and len(n_index) != 1:
        raise ValueError(f"index has shape {tuple(n_index)} but must be 1-D (batch,), one uid per row (a uid string "
                         "or a number; not a pair or a list per row)")
    if len(index) != token_level_rewards.shape[0]:
        raise ValueError(f"index has {len(index)} entries but the batch has {token_level_rewards.shape[0]} rows")


def host_values(*values) -> list:
    """One-element tensors read by the host together, as floats (one sync on a GPU); Python values pass through."""
    tensors = [v.reshape(()).double() for v in values if isinstance(v, torch.Tensor)]
    read = iter(torch.stack(tensors).tolist() if tensors else ())
    return [next(read) if isinstance(v, torch.Tensor) else v for v in values]


def prepare_batch(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index, sorted_ids=True) -> Batch:
    """The ``Batch`` of one estimator call's valid rows, every input checked: ``token_level_rewards`` (N, L), a row's
    sum its score; ``response_mask`` (N, L), rows all zero are padding; ``index`` (N,) group labels (uids: an ndarray,
    a list or a tensor); ``sorted_ids``: as in ``group_ids`` (False where no result depends on the numbering)."""
    if index is None:
        raise ValueError("the advantage estimator got no 'index': verl passes data.non_tensor_batch['uid'] as the "
                         "group index; make sure every row of the batch carries a 'uid'")
    index = as_labels(index)  # a list becomes one object array: labels compared by equality, never coerced
    check_inputs(token_level_rewards, response_mask, index)
    if token_level_rewards.shape[0] == 0:
        raise ValueError("the advantage estimator got an empty batch (0 rows)")
    pad = response_mask[:, 0] == 0  # padding, unless a response starts after its first token
    b = _build(token_level_rewards, response_mask, index, pad, sorted_ids)
    if b is None:  # a check failed, a label cannot be grouped, or a row taken for padding has a response token
        rows = _check_step_by_step(token_level_rewards, response_mask, index)  # raises if the batch is at fault
        pad = torch.ones_like(pad).index_fill_(0, rows, False)
        if not isinstance(index, torch.Tensor):  # padding rows take a valid row's label: theirs may not group
            index = index.copy()
            index[pad.cpu().numpy()] = index[int(rows[0])]
        b = _build(token_level_rewards, response_mask, index, pad, sorted_ids, exact=True)
    return b


def _build(token_level_rewards, response_mask, index, pad: torch.Tensor, sorted_ids: bool, exact: bool = False):
    """The batch, ``pad`` (N,) taken for its padding rows (``exact``: known to be), or None when the flags read say
    that a check failed or ``pad`` is wrong. Padding rows stay in slot -1 of every per-group tensor."""
    n_rows = token_level_rewards.shape[0]
    scores = token_level_rewards.sum(dim=-1)
    scores = (scores if scores.is_floating_point() else scores.float()).float()  # int/bool: exact sums, then float
    if isinstance(index, torch.Tensor):
        gid, nan_label = tensor_ids_where(index, ~pad)
        slots = n_rows + 1
    else:
        try:
            gid, n_labels = group_ids(index, scores.device, sorted_ids)
        except ValueError:  # a valid row's label, or only a padding row's
            return None
        gid, slots, nan_label = gid.masked_fill(pad, n_labels), n_labels + 1, None
    grpo_mean, grpo_std, count, score_mean = group_stats(scores, gid, slots)
    high = torch.zeros_like(count).scatter_reduce(0, gid, scores, reduce="amax", include_self=False)
    spread = high - torch.zeros_like(count).scatter_reduce(0, gid, scores, reduce="amin", include_self=False)
    in_groups, f64 = count[:-1], torch.float64
    exists, valid_g = in_groups > 0, (in_groups >= 2) & (spread[:-1] > 0)
    kept = scores.masked_fill(pad, 0.0)
    # float64 sums of float32 terms are finite exactly when every term is: the scores, the groups' std
    mask_range = response_mask.aminmax() if response_mask.is_floating_point() and response_mask.numel() else ()
    *mask_range, nan_label, n_pad, all_scores, all_std, n_groups, n_valid, n_valid_rows, non_binary, score_sum = \
        host_values(*mask_range, nan_label, pad.sum(dtype=f64), kept.sum(dtype=f64), grpo_std[:-1].sum(dtype=f64),
                    exists.sum(dtype=f64), valid_g.sum(dtype=f64), (in_groups * valid_g).sum(dtype=f64),
                    torch.count_nonzero(kept * (kept - 1)), kept.sum())
    in_range = not mask_range or (mask_range[0] >= 0 and mask_range[1] <= 1)  # NaN: False
    checked = in_range and not nan_label and math.isfinite(all_scores) and math.isfinite(all_std) and n_pad < n_rows
    if not (checked or exact):
        return None
    n_pad, n_groups = int(n_pad), int(n_groups)
    keep = slice(0, n_groups)  # tensor labels: the valid rows' groups are 0..G-1
    if n_pad:
        rows = torch.nonzero_static(~pad, size=n_rows - n_pad).squeeze(-1)
        scores, gid = scores[rows], gid[rows]
        unsure = torch.nonzero_static(pad, size=n_pad).squeeze(-1)
        response, score_sum = host_values((response_mask[unsure] != 0).any() if not exact else False, scores.sum())
        if response:
            return None
        if not isinstance(index, torch.Tensor):  # drop the groups only padding rows had, keeping the order
            keep = torch.nonzero_static(exists, size=n_groups).squeeze(-1)
            gid = (torch.cumsum(exists, 0) - 1)[gid]
    else:
        rows = torch.arange(n_rows, device=scores.device)
    return Batch(rows=rows, scores=scores, response_mask=response_mask, gid=gid, n_groups=n_groups,
                 count=count[keep], grpo_mean=grpo_mean[keep], grpo_std=grpo_std[keep], score_mean=score_mean[keep],
                 spread=spread[keep], n_rows=n_rows, binary=non_binary == 0, valid_groups=int(n_valid),
                 valid_group_rows=int(n_valid_rows), score_sum=score_sum)


def _check_step_by_step(token_level_rewards, response_mask, index) -> torch.Tensor:
    """Raise the batch's first problem, naming rows and remedy (a host read per check); else its (n,) valid rows."""
    if response_mask.is_floating_point() and response_mask.numel():  # int and bool masks (verl's) are not read
        outside = ~((response_mask >= 0) & (response_mask <= 1))  # NaN too
        if bool(outside.any()):
            bad = outside.any(dim=-1).nonzero().squeeze(-1)[:5].tolist()
            example = response_mask[bad[0]][outside[bad[0]]][:3].tolist()
            raise ValueError(
                f"response_mask has values outside [0, 1] (e.g. {example}) in rows {bad}: it must be 1 on response "
                "tokens and 0 elsewhere (verl's is the response part of attention_mask); check the code that built it")
    rows = (response_mask != 0).any(dim=-1).nonzero().squeeze(-1)
    if rows.numel() == 0:
        raise ValueError(f"the batch has {response_mask.shape[0]} rows but none with a response token (all padding)")
    scores = token_level_rewards.sum(dim=-1)[rows]
    scores = scores if scores.is_floating_point() else scores.float()
    bad = rows[~torch.isfinite(scores)]
    if bad.numel() and bool(torch.isfinite(token_level_rewards[bad]).all()):
        dtype = token_level_rewards.dtype
        raise ValueError(
            f"the rewards of rows {bad[:5].tolist()} are finite but their sum over the response (the score) overflows "
            f"{dtype} (largest finite value {torch.finfo(dtype).max:.6g}): cast token_level_rewards to float32 before "
            "the advantage (verl's reward is float32 unless the reward code casts it), or rescale the reward "
            "function's output")
    if bad.numel():
        raise ValueError(f"non-finite (NaN/Inf) rewards in rows {bad[:5].tolist()}: check the reward function's output")
    labels = index[rows.to(index.device)] if isinstance(index, torch.Tensor) else index[rows.cpu().numpy()]
    gid, n_groups = group_ids(labels, scores.device)
    scores = scores.float()
    if not bool(torch.isfinite(group_stats(scores, gid, n_groups)[1]).all()):
        # (s - mean)² overflows float32 for |s - mean| ≳ 1.8e19, where verl's grpo gives 0 or NaN
        worst = torch.topk(scores.abs(), min(3, scores.numel())).indices
        raise ValueError(
            f"rewards too large for the float32 group statistics (e.g. {scores[worst].tolist()} in rows "
            f"{rows[worst].tolist()}): their std overflows float32 (|score - group mean| must stay below ~1e19). "
            "Rescale the reward function's output")
    return rows


def group_stats(scores: torch.Tensor, gid: torch.Tensor, n_groups: int):
    """verl grpo's (G,) mean, unbiased std (0 and 1 for a single response), count and plain mean Σ/count of
    ``scores`` (n,) float32 by group id ``gid`` (n,), bit for bit (``group_mean_std(eps=0)``), without host syncs."""
    count = group_sum(torch.ones_like(scores), gid, n_groups)
    group_mean = group_sum(scores, gid, n_groups) / count
    centered = scores - group_mean[gid]
    var = group_sum(centered * centered, gid, n_groups) / (count - 1.0).clamp_min(1.0)
    single = count <= 1.0
    mean = group_mean.masked_fill(single, 0.0)
    std = torch.sqrt(var.clamp(min=0.0)).masked_fill(single, 1.0)
    return mean, std, count, group_mean


def accuracy_of(scores: torch.Tensor, threshold: float | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(n,) accuracy: ``scores`` (n,) themselves, or ``score > threshold``; and the device flag "every score is 0
    or 1" for the caller to read with its other values (None with a threshold)."""
    if threshold is not None:
        return (scores > threshold).float(), None
    return scores.float(), ((scores == 0) | (scores == 1)).all()


def refuse_non_binary(scores: torch.Tensor, key: str, other_way: str = "") -> None:
    """The error for scores that are not binary accuracies; ``other_way``: the framework's other remedy."""
    example = scores[(scores != 0) & (scores != 1)][:3].tolist()
    raise ValueError(f"rewards are not binary accuracies (e.g. {example}); set {key}=<threshold> so that "
                     f"accuracy = score > threshold (DAPO's ±1 rewards with overlong penalties: 0){other_way}")

"""Group labels (verl's uids) to contiguous group ids, grouped exactly as verl's own ``grpo`` groups them.

verl's ``compute_grpo_outcome_advantage`` keys a Python dict by each row's label, so two rows share a group when
their labels are equal (``==`` with equal hashes): ``"7"`` and ``"007"`` are two groups, so are ``0.5`` and ``0.7``
and ``1``, ``"1"`` and ``None``; ``1``, ``1.0`` and ``True`` are one. (verl's ``as_torch_index``, which its vectorised
estimators use, casts labels to int64 and merges such labels: it is not used here.) Labels that a dict cannot
group reliably are refused with a message: a NaN (unequal to itself), an unhashable or non-scalar entry (a pair,
a list); an index that is not one label per row fails ``groups.check_inputs``.

No Python loop over rows: numeric and fixed-width string arrays are factorised by ``np.unique``; object arrays
(verl's uids) by comparing each label with its neighbour (vectorised), then a dict over the first label of each run
of equal labels, one entry per group in practice. Ids are numbered in a canonical order of the labels (numbers by
value, then text, bytes, None, anything else by type and repr), so they do not depend on the order of the rows.
Tensor labels (TRL's) stay on their device: sorted, and numbered by run, without a read by the host.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

__all__ = ["group_ids", "as_labels", "as_valid_index", "tensor_ids_where"]

_NOT_SCALAR = (list, tuple, dict, set, frozenset, np.ndarray, torch.Tensor)


def as_labels(index):
    """``index`` as a 1-D-or-not ndarray or tensor: lists become object arrays (one label per entry, compared by
    equality, never coerced to a common type), so a list of pairs shows its (N, 2) shape to the shape check."""
    if isinstance(index, (np.ndarray, torch.Tensor)):
        return index
    try:
        return np.asarray(index, dtype=object)
    except ValueError as exc:  # ragged nesting numpy cannot lay out
        raise ValueError(f"index must hold one scalar label per row (a uid string or a number): {exc}") from None


def _refuse(label, why: str):
    raise ValueError(
        f"index holds the group label {label!r:.80}, which {why}: verl's grpo groups rows by equal labels, so each "
        "row needs one scalar label (a uid string or a number) equal to its group's others"
    )


def _check(label) -> None:
    if isinstance(label, _NOT_SCALAR):
        _refuse(label, f"is a {type(label).__name__}, not one scalar label")
    if isinstance(label, (float, np.floating)) and label != label:
        _refuse(label, "is NaN, unequal to itself")


def _order_key(label) -> tuple:
    """Canonical order of distinct labels: numbers by value, then text, bytes, None, others by type and repr."""
    if isinstance(label, numbers.Real):
        return (0, label)
    if isinstance(label, str):
        return (1, label)
    if isinstance(label, bytes):
        return (2, label)
    if label is None:
        return (3, 0)
    return (4, type(label).__qualname__, repr(label))


def _from_unique(uniques: np.ndarray, inverse: np.ndarray, device) -> tuple[torch.Tensor, int]:
    return torch.from_numpy(inverse.reshape(-1).astype(np.int64)).to(device), len(uniques)


def _real(values: torch.Tensor) -> torch.Tensor:
    if values.is_complex():
        raise ValueError(f"index is a {values.dtype} tensor: group labels must be real numbers or strings")
    return values


def _tensor_ids(index: torch.Tensor, device) -> tuple[torch.Tensor, int]:
    values = _real(index.reshape(-1))
    if values.is_floating_point() and bool(torch.isnan(values).any()):
        _refuse(float("nan"), "is NaN, unequal to itself")
    uniques, gid = torch.unique(values, return_inverse=True)
    return gid.to(device=device, dtype=torch.long), uniques.numel()


def tensor_ids_where(index: torch.Tensor, valid: torch.Tensor):
    """``_tensor_ids`` of the rows ``valid`` (N,) bool, with no read by the host (``torch.unique`` reads twice).

    Returns (N,) ids, those of valid rows numbered 0..G-1 in sorted label order as ``torch.unique``'s inverse,
    the others N, and the device flag "a valid row's label is NaN" (None for integers: nothing to read).
    """
    values = _real(index.reshape(-1)).to(valid.device)
    n = values.numel()
    keys = values.to(torch.uint8) if values.dtype == torch.bool else values
    nan = (torch.isnan(keys) & valid).any() if keys.is_floating_point() else None
    lowest = -torch.inf if keys.is_floating_point() else torch.iinfo(keys.dtype).min
    # other rows take the largest valid label, so they join its run instead of starting one (one sort, not two)
    keys = keys.masked_fill(~valid, keys.masked_fill(~valid, lowest).max())
    ordered, order = torch.sort(keys, stable=True)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[1:] = ordered[1:] != ordered[:-1]  # each run of equal labels is one group (as torch.unique's !=)
    ids = (torch.cumsum(starts, 0) - 1).masked_fill_(~valid.index_select(0, order), n)
    return torch.empty_like(ids).scatter_(0, order, ids), nan


def as_valid_index(index, rows: torch.Tensor):
    """``index`` (ndarray, tensor or list) restricted to ``rows``."""
    if isinstance(index, np.ndarray):
        return index[rows.cpu().numpy()]
    if isinstance(index, torch.Tensor):
        return index.reshape(-1)[rows.to(index.device)]
    return np.asarray(index, dtype=object)[rows.cpu().numpy()]


def group_ids(index, device, sorted_ids: bool = True) -> tuple[torch.Tensor, int]:
    """(n,) contiguous group ids in [0, G) and G for the labels ``index`` (n,), grouped by equality as verl's grpo.

    ``sorted_ids=False`` is for callers whose results do not depend on how groups are numbered (HA-DW over GRPO:
    per-group sums run in row order whatever the id): groups are then numbered in order of first appearance and
    nothing is sorted (verl's uuids, one run per group: the run number).
    """
    if isinstance(index, torch.Tensor):
        return _tensor_ids(index, device)
    labels = as_labels(index).reshape(-1)
    kind = labels.dtype.kind
    if kind in "biufUS":  # one numpy type for every label: equality is numpy's, vectorised
        if kind == "f" and bool(np.isnan(labels).any()):
            _refuse(float("nan"), "is NaN, unequal to itself")
        return _from_unique(*np.unique(labels, return_inverse=True), device)
    run_of_row, run_labels = _runs(labels)
    first_id: dict = {}
    try:
        for label in run_labels:  # one entry per run of equal labels: per group, for verl's side-by-side uids
            _check(label)
            if label not in first_id:
                first_id[label] = len(first_id)
        run_gid = np.fromiter((first_id[label] for label in run_labels), dtype=np.int64, count=len(run_labels))
    except TypeError as exc:  # unhashable
        _refuse(next(x for x in run_labels if not _hashable(x)), f"cannot be compared as a dict key ({exc})")
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


def _hashable(label) -> bool:
    try:
        hash(label)
    except TypeError:
        return False
    return True

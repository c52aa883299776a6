"""A call reads the host once per decision, not once per check, held without a GPU.

On a GPU every read of a device value by the host (``.item()``, ``bool(t)``, ``.tolist()``, a boolean mask, a
``nonzero`` or ``unique`` whose size depends on the data) waits for the queue to empty. ``HostReads`` counts, on
CPU, every tensor operation of a call that would be such a read on a GPU, through a ``TorchFunctionMode``; each
estimator call is held to its exact count, the table of docs/performance.md (``READS_PER_CALL``; a batch with padding
rows one more): a stray read on any path fails its case. Uids given as strings are factorised on the host, whose copy
of the ids to the device is not counted here (on CPU it is no copy): the counts are the tensor uids' (TRL's form),
and the string uids' are held to the same numbers. What the counter cannot see: a read inside a C++ kernel that
does not pass through Python's torch function dispatch (none of the estimators' operations is such a kernel on CPU),
the host-side copy of string uids above, and ``.to(device)`` given a ``torch.device`` (the batch's own device, the CPU
here; ``.to("cpu")`` named as text is counted).
"""

from __future__ import annotations

import re
import weakref

import numpy as np
import pytest
import torch
from batches import algo
from repo_paths import ROOT
from torch.overrides import TorchFunctionMode

from verl_hadw.core import advantages as core_advantages
from verl_hadw.core import groups as core_groups
from verl_hadw.verl import process_state
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw

# what reads the host on a GPU: the value itself, or a result whose size depends on it
READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__", "__complex__",
         "__array__", "__format__", "__repr__", "nonzero", "argwhere", "unique", "unique_consecutive", "bincount",
         "masked_select", "equal", "allclose", "is_nonzero"}
INDEXING = {"__getitem__", "__setitem__", "index_put", "index_put_"}
FACTORIES = {"zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint"}  # a size given as a tensor: read
PADDING_EXTRA = 1
# each case's host reads per call without padding rows: docs/performance.md's "after" column
READS_PER_CALL = {"hadw": 2, "hadw-threshold": 3, "hadw-normalize-phi": 2, "hadw-reward-difficulty": 2,
                  "hadw-over-dgpo": 2, "hadw-over-dgpo-two-thresholds": 3, "dgpo": 2, "dgpo-threshold": 2,
                  "dgpo-without-dqw": 2}


def _has_bool_index(index) -> bool:
    items = index if isinstance(index, (tuple, list)) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _has_tensor_slice(index) -> bool:
    """``x[:n]`` with a tensor ``n``: the bound is read (``__index__``) before the slice is taken."""
    items = index if isinstance(index, (tuple, list)) else (index,)
    return any(isinstance(i, slice) and any(isinstance(b, torch.Tensor) for b in (i.start, i.stop, i.step))
               for i in items)


def _holds_tensor(value) -> bool:
    """A (nested) list or tuple holding a tensor: ``torch.tensor([t0, t1])`` reads each element."""
    return isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) or _holds_tensor(v) for v in value)


def _to_cpu(args, kwargs) -> bool:
    """``.to("cpu")`` named as text: a copy to the host. A ``torch.device`` is how the code names the batch's own
    device (``rewards.device``), which is the CPU in these runs and a GPU in a user's: not counted (it cannot tell)."""
    targets = [*args[1:], kwargs.get("device")]
    return any(t.startswith("cpu") for t in targets if isinstance(t, str))


class HostReads(TorchFunctionMode):
    """Counts the host reads of the code run under it; ``sites`` says which operation made each."""

    def __init__(self):
        super().__init__()
        self.sites: list[str] = []
        self._cpu_copies: list[weakref.ref] = []

    @property
    def count(self) -> int:
        return len(self.sites)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self._reads(name, args, kwargs):
            self.sites.append(name)
        out = func(*args, **kwargs)
        if name == "cpu" and isinstance(out, torch.Tensor):  # .cpu().numpy() is one read, not two
            self._cpu_copies.append(weakref.ref(out))
        return out

    def _reads(self, name, args, kwargs) -> bool:
        if name == "numpy" and any(r() is args[0] for r in self._cpu_copies):
            return False
        if name in READS:
            return True
        if name in INDEXING and len(args) > 1:
            return _has_bool_index(args[1]) or _has_tensor_slice(args[1])
        if name == "to":  # .to("cpu") copies to the host (a no-op on CPU, a sync on a GPU)
            return _to_cpu(args, kwargs)
        if name in ("tensor", "as_tensor"):
            return bool(args) and _holds_tensor(args[0])
        if name in FACTORIES:
            return any(isinstance(a, torch.Tensor) or _holds_tensor(a) for a in args)
        if name == "where":  # torch.where(cond) is nonzero
            return len(args) + len(kwargs) == 1
        if name == "repeat_interleave":  # tensor repeats without output_size: its size is read
            return isinstance(args[1] if len(args) > 1 else kwargs.get("repeats"), torch.Tensor) and \
                "output_size" not in kwargs
        return False


def batch(n_groups=6, group=8, length=12, padding=0, uids="tensor", seed=0, binary=True):
    """(rewards, mask, index): ``padding`` all-zero rows at the end, verl's way."""
    g = torch.Generator().manual_seed(seed)
    n = n_groups * group
    lengths = torch.randint(1, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    rewards = torch.zeros(n, length)
    score = (torch.rand(n, generator=g) < 0.4).float() if binary else torch.randn(n, generator=g).round(decimals=2)
    rewards[torch.arange(n), lengths - 1] = score
    labels = torch.arange(n) // group * 7 + 3
    if padding:
        rewards = torch.cat([rewards, torch.zeros(padding, length)])
        mask = torch.cat([mask, torch.zeros(padding, length, dtype=mask.dtype)])
        labels = torch.cat([labels, torch.full((padding,), 10_000)])
    index = labels if uids == "tensor" else np.array([f"uid-{v}" for v in labels.tolist()], dtype=object)
    return rewards, mask, index


CASES = {  # name: (estimator, algorithm options, batch options)
    "hadw": (hadw, {}, {}),
    "hadw-threshold": (hadw, {"success_threshold": 0.5}, {"binary": False}),
    "hadw-normalize-phi": (hadw, {"normalize_phi": True}, {}),
    "hadw-reward-difficulty": (hadw, {"difficulty_from": "reward"}, {"binary": False}),
    "hadw-over-dgpo": (hadw, {"base": "dgpo"}, {}),
    "hadw-over-dgpo-two-thresholds": (hadw, {"base": "dgpo", "success_threshold": 0.5,
                                             "dgpo": {"success_threshold": 0.2}}, {"binary": False}),
    "dgpo": (dgpo, {}, {}),
    "dgpo-threshold": (dgpo, {"dgpo": {"success_threshold": 0.5}}, {"binary": False}),
    "dgpo-without-dqw": (dgpo, {"dgpo": {"dqw": False}}, {}),
}


def reads_of(fn, options, inputs, step=1) -> HostReads:
    """The host reads of one estimator call at step ``step`` (the anchor's first call of the step)."""
    rewards, mask, index = inputs
    config = algo("hadw" if fn is hadw else "dgpo", state_key="host-reads", **options)
    process_state.reset()
    with HostReads() as reads:
        fn(token_level_rewards=rewards, response_mask=mask, index=index, config=config)
    return reads


@pytest.mark.parametrize("padding", [0, 3])
@pytest.mark.parametrize("uids", ["tensor", "str"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_call_reads_the_host_exactly_as_often_as_the_table_says(case, uids, padding):
    fn, options, batch_options = CASES[case]
    reads = reads_of(fn, options, batch(padding=padding, uids=uids, **batch_options))
    expected = READS_PER_CALL[case] + (PADDING_EXTRA if padding else 0)
    assert reads.count == expected, f"{case}: {reads.count} host reads {reads.sites}, the table says {expected}"


def test_the_docs_table_is_the_counts_held_here():
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    section = page[page.index("## Host reads per call"):]
    rows = [line for line in section.splitlines() if re.match(r"\| `(hadw|dgpo)`", line)]
    assert len(rows) == len(CASES), rows
    for case, row in zip(CASES, rows):  # the table's rows are the cases, in order
        after = [int(entry.split("→")[1]) for entry in row.strip("|").split("|")[1:]]
        n = READS_PER_CALL[case]
        assert after == [n, n + PADDING_EXTRA, n, n + PADDING_EXTRA], (case, row)


def test_the_usual_calls_read_the_host_twice():
    # binary scores, no threshold, no padding: HA-DW's K_t comes with the batch's read; DGPO reads its counts once
    for fn in (hadw, dgpo):
        reads = reads_of(fn, {}, batch())
        assert reads.sites == ["tolist", "tolist"], reads.sites


def test_the_step_by_step_checks_read_the_host_per_check():
    # what every call paid before one read per decision, and what a refused batch still pays: the counter sees each read
    rewards, mask, index = batch()
    with HostReads() as reads:
        core_groups._check_step_by_step(rewards, mask, index)
    assert reads.count >= 4 and {"__bool__", "nonzero"} <= set(reads.sites), reads.sites


def test_a_planted_item_takes_a_call_off_its_count(monkeypatch):
    inputs = batch()
    baseline = reads_of(hadw, {}, inputs).count
    real = core_advantages.hadw_weights

    def with_an_item(adv, p_hat, prior, lambda_scale):
        phi = real(adv, p_hat, prior, lambda_scale)
        phi.max().item()  # a stray read, as a debugging line left behind would be
        return phi

    monkeypatch.setattr(core_advantages, "hadw_weights", with_an_item)
    planted = reads_of(hadw, {}, inputs)
    assert planted.count == baseline + 1 and "item" in planted.sites
    with pytest.raises(AssertionError, match="the table says"):
        test_each_call_reads_the_host_exactly_as_often_as_the_table_says("hadw", "tensor", 0)


def test_the_counter_sees_each_kind_of_read():
    x, flags = torch.arange(4.0), torch.tensor([True, False, True, False])
    with HostReads() as reads:
        x.sum().item(), bool(x.any()), float(x[0]), int(x[1]), x.tolist(), x.cpu().numpy()
        x[flags], x.nonzero(), torch.unique(x), torch.where(flags), torch.bincount(x.long())
        x.to("cpu"), x[:torch.tensor(2)], torch.tensor([x[0], x[1]]), torch.zeros(torch.tensor(3))
        x[torch.tensor([0, 2])], torch.where(flags, x, 0.0), torch.nonzero_static(flags, size=2)  # none of these
        x.to(torch.float64), torch.zeros(3), torch.tensor([1.0, 2.0])  # nor these
    assert reads.sites == ["item", "__bool__", "__float__", "__int__", "tolist", "cpu", "__getitem__", "nonzero",
                           "unique", "where", "bincount", "to", "__getitem__", "tensor", "zeros"]


@pytest.mark.parametrize("uids", ["tensor", "str"])
@pytest.mark.parametrize("padding", [0, 2, 5])
def test_one_read_batches_are_the_valid_rows_statistics_bit_for_bit(uids, padding):
    # padding rows with labels of their own (a group only padding has) and with a valid row's label
    for seed in range(4):
        rewards, mask, index = batch(n_groups=5, group=4, padding=padding, uids=uids, seed=seed, binary=seed % 2 == 0)
        if padding > 2:
            index[-1] = index[0]
        b = core_groups.prepare_batch(rewards, mask, index)
        rows = torch.arange(rewards.shape[0] - padding)
        scores = rewards.sum(-1)[rows]
        labels = index[rows] if uids == "tensor" else index[rows.numpy()]
        gid, n_groups = core_groups.group_ids(labels, scores.device)
        mean, std, count, score_mean = core_groups.group_stats(scores, gid, n_groups)
        high = torch.stack([scores[gid == g].max() - scores[gid == g].min() for g in range(n_groups)])
        valid = (count >= 2) & (high > 0)
        expected = {"rows": rows, "scores": scores, "gid": gid, "count": count, "grpo_mean": mean, "grpo_std": std,
                    "score_mean": score_mean, "spread": high}
        for name, value in expected.items():
            assert torch.equal(getattr(b, name), value), (name, seed)
        assert b.n_groups == n_groups and b.binary == bool(((scores == 0) | (scores == 1)).all())
        assert b.score_sum == float(scores.sum()) and b.valid_groups == int(valid.sum())
        assert b.valid_group_rows == int(count[valid].sum())


def test_a_row_masked_only_at_its_first_token_is_a_response():
    rewards, mask, index = batch(padding=1)
    mask[-1, 3:] = 1  # a response starting at token 3: valid, though its first entry is 0
    rewards[-1, 5] = 1.0
    b = core_groups.prepare_batch(rewards, mask, index)
    assert b.rows.numel() == b.n_rows and b.scores[-1] == 1.0 and b.score_sum == float(b.scores.sum())


def test_a_label_only_padding_rows_carry_is_not_refused():
    rewards, mask, index = batch(padding=2, uids="str")
    index[-1] = ("a", "pair")  # no group label, but a padding row's: nothing to refuse
    b = core_groups.prepare_batch(rewards, mask, index)
    assert b.n_groups == 6 and b.rows.numel() == 48
    index[0] = ("a", "pair")
    with pytest.raises(ValueError, match="not one scalar label"):
        core_groups.prepare_batch(rewards, mask, index)


def test_a_nan_tensor_label_is_refused_unless_only_padding_rows_carry_it():
    rewards, mask, index = batch(padding=2)
    labels = index.double()
    labels[-1] = float("nan")  # a padding row's label: not a group, nothing to refuse
    assert core_groups.prepare_batch(rewards, mask, labels).n_groups == 6
    labels[0] = float("nan")
    with pytest.raises(ValueError, match="NaN, unequal to itself"):
        core_groups.prepare_batch(rewards, mask, labels)

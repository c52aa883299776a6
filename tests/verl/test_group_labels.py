"""Group labels are grouped exactly as verl's own ``grpo`` groups them, by equality: floats, ``"7"``
beside ``"007"``, ``1`` beside ``"1"`` and ``None`` stay apart, ``1``, ``1.0`` and ``True`` are one group; labels it
cannot group (NaN, a pair or a list per row) are refused with a message. Ids do not depend on the row order."""

import numpy as np
import pytest
import torch
from batches import algo
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from verl_hadw.core.advantages import grpo_advantage
from verl_hadw.core.groups import group_ids, prepare_batch
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw

RNG = np.random.default_rng(28)
UIDS = np.array([f"{RNG.integers(1 << 40):010x}" for _ in range(12)], dtype=object)


def obj(*labels):
    out = np.empty(len(labels), dtype=object)
    out[:] = labels
    return out


LABELS = {
    "floats": np.repeat([0.5, 0.7, 0.5, 2.0], 3),  # as_torch_index merged 0.5 and 0.7
    "float-objects": obj(0.5, 0.7, 0.5, 0.7, 0.25, 0.5),
    "zero-padded-text": obj("7", "007", "7", "007", "07", "7"),
    "one-text-none": obj(1, "1", None, 1, "1", None, "None"),
    "equal-numbers": obj(1, 1.0, True, 2, 2.0, np.int64(2), "2"),  # one dict key each: 1 == 1.0 == True
    "numeric-text": obj(*[str(v) for v in RNG.integers(0, 30, 40)]),
    "unicode-array": np.repeat(np.array(["b", "a", "10", "9"]), 3),
    "bytes": obj(b"a", b"a", b"b", "a", "a", b"b"),
    "nul-suffix": obj("a", "a\x00", "a", "b"),
    "ints": np.repeat(RNG.permutation(12) * 7, 4),
    "verl-uids": np.repeat(UIDS, 4),
    "shuffled-uids": np.repeat(UIDS, 4)[RNG.permutation(48)],
    "split-runs": np.concatenate([np.repeat(UIDS[:4], 3), np.repeat(UIDS[:2], 2), np.repeat(UIDS[4:], 3)]),
    "list": [0.5, "7", "007", None, 0.5, "7", "007", None],
}


def verl_grpo(scores, index):
    rewards = torch.tensor(scores, dtype=torch.float32).unsqueeze(-1)
    adv, _ = compute_grpo_outcome_advantage(rewards, torch.ones_like(rewards), index)
    return adv.squeeze(-1)


@pytest.mark.parametrize("case", list(LABELS))
def test_groups_are_verls_grpo_groups(case):
    index = LABELS[case]
    scores = RNG.normal(size=len(index)).round(3)  # distinct: a merged or split group changes every advantage
    rewards = torch.tensor(scores, dtype=torch.float32).unsqueeze(-1)
    b = prepare_batch(rewards, torch.ones_like(rewards), index)
    ours = grpo_advantage(b, 1e-6, True)
    assert torch.allclose(ours, verl_grpo(scores, index), rtol=1e-5, atol=1e-6), case
    assert b.n_groups == len({label: None for label in index})  # verl's dict: one key per group


@pytest.mark.parametrize("case", ["one-text-none", "equal-numbers", "shuffled-uids", "bytes", "floats", "list"])
def test_ids_do_not_depend_on_the_row_order(case):
    index = np.asarray(LABELS[case], dtype=object) if isinstance(LABELS[case], list) else LABELS[case]
    gid, n = group_ids(index, "cpu")
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(index))
        shuffled, n_shuffled = group_ids(index[perm], "cpu")
        assert n_shuffled == n and torch.equal(shuffled, gid[perm])
    assert sorted(set(gid.tolist())) == list(range(n))


@pytest.mark.parametrize("case", ["verl-uids", "split-runs", "one-text-none", "zero-padded-text"])
def test_unsorted_ids_are_the_same_partition(case):
    index = LABELS[case]
    (fast, n_fast), (ref, n_ref) = group_ids(index, "cpu", sorted_ids=False), group_ids(index, "cpu")
    pairs = set(zip(fast.tolist(), ref.tolist()))
    assert n_fast == n_ref == len(pairs) == len(set(fast.tolist()))  # a bijection between the ids
    if case == "verl-uids":  # distinct uuid runs: numbered in order of appearance, nothing sorted
        assert fast.tolist() == [i // 4 for i in range(48)] and not torch.equal(fast, ref)


BAD = {
    "nan-float-array": (np.array([0.5, np.nan, 0.5, np.nan]), r"group label nan, which is NaN"),
    "nan-object": (obj("a", float("nan"), "a", "b"), r"group label nan, which is NaN"),
    "nan-tensor": (torch.tensor([1.0, float("nan"), 1.0, 2.0]), r"group label nan, which is NaN"),
    "pairs-as-a-list": ([(0, 1), (0, 1), (2, 3), (2, 3)], r"index has shape \(4, 2\) but must be 1-D"),
    "pairs-in-an-array": (obj((0, 1), (0, 1), (2, 3), (2, 3)), r"group label \(0, 1\), which is a tuple"),
    "lists-in-an-array": (obj([0], [0], [1], [1]), r"group label \[0\], which is a list"),
    "ragged-list": ([[0, 1], [0], [1], [1]], r"group label \[0, 1\], which is a list"),
    "complex-tensor": (torch.tensor([1j, 1j, 2j, 2j]), r"index is a torch.complex64 tensor"),
}


@pytest.mark.parametrize("estimator", ["hadw", "dgpo"])
@pytest.mark.parametrize("case", list(BAD))
def test_labels_verl_cannot_group_are_refused_with_a_message(estimator, case):
    index, message = BAD[case]
    fn = {"hadw": hadw, "dgpo": dgpo}[estimator]
    rewards = torch.tensor([[1.0], [0.0], [1.0], [0.0]])
    with pytest.raises(ValueError, match=message) as info:
        fn(token_level_rewards=rewards, response_mask=torch.ones_like(rewards), index=index, config=algo(estimator))
    assert "index" in str(info.value) and not isinstance(info.value, (RuntimeError, IndexError))

"""Malformed estimator inputs fail at the top with errors naming the argument."""

import pytest
import torch
from batches import algo, make_inputs
from torch.overrides import TorchFunctionMode

from verl_hadw.core.groups import check_inputs
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw

FIXED = {"mode": "fixed", "fixed_value": 0.5}
BOTH = pytest.mark.parametrize("fn", [hadw, dgpo], ids=["hadw", "dgpo"])


def call(fn, rewards, mask, index):
    return fn(token_level_rewards=rewards, response_mask=mask, index=index, config=algo(anchor=FIXED))


def inputs(n=8, length=6):
    scores = [1, 0, 1, 1, 0, 0, 1, 0][:n]
    return make_inputs(scores, [i // 4 for i in range(n)], lengths=[6, 5, 4, 6, 3, 6, 2, 6][:n], length=length)


@BOTH
def test_mask_shape_must_match_the_rewards(fn):
    rewards, mask, index = inputs()
    with pytest.raises(ValueError) as info:
        call(fn, rewards, mask[:, :5], index)
    assert str(info.value) == (
        "response_mask has shape (8, 5) but token_level_rewards has (8, 6): both must be (batch, response_length)"
    )
    with pytest.raises(ValueError, match=r"response_mask has shape \(6, 6\) but token_level_rewards has \(8, 6\)"):
        call(fn, rewards, mask[:6], index)
    with pytest.raises(ValueError, match=r"response_mask has shape \(8,\) but token_level_rewards has \(8, 6\)"):
        call(fn, rewards, mask[:, 0], index)


@BOTH
def test_rewards_must_be_two_dimensional(fn):
    rewards, mask, index = inputs()
    with pytest.raises(ValueError, match=r"token_level_rewards has shape \(8,\) but must be 2-D \(batch, response_len"):
        call(fn, rewards.sum(-1), mask.sum(-1), index)  # was a bare IndexError
    with pytest.raises(ValueError, match=r"token_level_rewards has shape \(8, 6, 1\) but must be 2-D"):
        call(fn, rewards[..., None], mask[..., None], index)
    with pytest.raises(ValueError, match=r"shape \(8, 0\): response_length is 0"):
        call(fn, rewards[:, :0], mask[:, :0], index)


@BOTH
def test_mask_on_another_device_is_named(fn):
    rewards, mask, index = inputs()
    elsewhere = torch.empty(mask.shape, device="meta")  # any device other than the rewards' one
    with pytest.raises(ValueError, match="response_mask is on meta but token_level_rewards on cpu: both must be on"):
        call(fn, rewards, elsewhere, index)


@BOTH
def test_index_must_be_one_uid_per_row(fn):
    rewards, mask, index = inputs()
    with pytest.raises(ValueError, match=r"index has shape \(8, 1\) but must be 1-D \(batch,\)"):
        call(fn, rewards, mask, index[:, None])
    with pytest.raises(ValueError, match="index has 7 entries but the batch has 8 rows"):
        call(fn, rewards, mask, list(index[:7]))
    pairs = [(i // 4, i % 4) for i in range(8)]  # a list of pairs: was a raw index_add_ RuntimeError
    with pytest.raises(ValueError, match=r"index has shape \(8, 2\) but must be 1-D \(batch,\), one uid per row"):
        call(fn, rewards, mask, pairs)


@BOTH
def test_fp16_rewards_whose_sum_overflows_are_named_as_such(fn):
    rewards, mask, index = inputs()
    rewards = rewards.half()
    rewards[2, :2] = 40000.0  # each finite in fp16; their sum (80000) is not
    with pytest.raises(ValueError) as info:
        call(fn, rewards, mask, index)
    message = str(info.value)
    assert "rows [2] are finite but their sum over the response (the score) overflows torch.float16" in message
    assert "cast token_level_rewards to float32" in message and "non-finite" not in message
    rewards[2, 0] = float("inf")  # a reward that is itself infinite is still the reward function's
    with pytest.raises(ValueError, match=r"non-finite \(NaN/Inf\) rewards in rows \[2\]: check the reward function"):
        call(fn, rewards, mask, index)


@BOTH
def test_non_tensor_and_complex_inputs_are_named(fn):
    rewards, mask, index = inputs()
    with pytest.raises(TypeError, match="token_level_rewards must be a torch.Tensor .* got list"):
        call(fn, rewards.tolist(), mask, index)
    with pytest.raises(TypeError, match="response_mask must be a torch.Tensor .* got ndarray"):
        call(fn, rewards, mask.numpy(), index)
    with pytest.raises(ValueError, match="token_level_rewards has complex dtype torch.complex64"):
        call(fn, rewards.to(torch.complex64), mask, index)


@BOTH
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_and_bool_rewards_are_accepted_as_their_float_values(fn, dtype):
    rewards, mask, index = inputs()
    expected, _ = call(fn, rewards, mask, index)
    got, _ = call(fn, rewards.to(dtype), mask, index)
    assert got.dtype == torch.float32 and torch.equal(got, expected)


@BOTH
@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float64])
def test_any_real_mask_dtype_gives_the_same_advantages(fn, dtype):
    rewards, mask, index = inputs()
    expected, _ = call(fn, rewards, mask, index)
    got, _ = call(fn, rewards, mask.to(dtype), index)
    assert torch.equal(got.float(), expected) and torch.all(got[~mask.bool()] == 0)


class RecordTorchCalls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_the_check_reads_only_metadata():
    rewards, mask, index = inputs()
    with RecordTorchCalls() as calls:
        check_inputs(rewards, mask, index)
    # attribute reads (shape, device) and dim/is_complex only: no elementwise op, no reduction
    assert calls.names == {"__get__", "dim", "is_complex"}

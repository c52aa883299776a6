"""Zero-spread groups: a group of >= 2 valid responses whose scores are all equal gets an
advantage of exactly 0 under every estimator and option, for binary, signed and continuous rewards.

verl's ``grpo`` (and the authors' released code) computes (s - mean)/(std + ε): when the group mean rounds
(8 × 0.3 in float32), that is rounding noise divided by rounding noise. The tests use scores that are not
dyadic fractions, where the mean does round.
"""

import itertools

import numpy as np
import pytest
import torch
from batches import algo, make_inputs, row_adv
from hypothesis import given, settings
from hypothesis import strategies as st
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw

_keys = itertools.count()
NOT_DYADIC = [0.3, 0.1, 1 / 3, 0.7, -0.3, 2 / 3, 0.9, 1e-3, 123.456, -1 / 7]

# Every estimator set-up whose base advantage differs: grpo with/without std, dgpo with DGAE/std, HA-DW over both
# bases, accuracy (with a threshold, so any reward type works) or reward difficulty.
SETUPS = {
    "hadw-grpo": ("hadw", {"success_threshold": 0.5}),
    "hadw-grpo-nostd": ("hadw", {"success_threshold": 0.5, "norm": False}),
    "hadw-grpo-reward": ("hadw", {"difficulty_from": "reward"}),
    "hadw-grpo-normphi": ("hadw", {"success_threshold": 0.5, "normalize_phi": True}),
    # DQW under the DGPO base reads DGPO's own threshold (algorithm.dgpo.success_threshold)
    "hadw-dgpo": ("hadw", {"base": "dgpo", "success_threshold": 0.5, "dgpo": {"success_threshold": 0.5}}),
    "hadw-dgpo-std": ("hadw", {"base": "dgpo", "success_threshold": 0.5,
                               "dgpo": {"dgae": False, "success_threshold": 0.5}}),
    "dgpo": ("dgpo", {"dgpo": {"success_threshold": 0.5}}),
    "dgpo-std": ("dgpo", {"dgpo": {"dgae": False, "success_threshold": 0.5}}),
    "dgpo-nodqw": ("dgpo", {"dgpo": {"dqw": False}}),
}


def advantages(setup: str, scores, groups, lengths=None) -> torch.Tensor:
    name, options = SETUPS[setup]
    options = {**options, "state_key": f"zero-spread-{next(_keys)}", "anchor": {"init": 0.4}}
    rewards, mask, index = make_inputs(scores, groups, lengths)
    fn = hadw if name == "hadw" else dgpo
    adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index, config=algo(estimator=name, **options))
    return row_adv(adv, mask)


def test_verl_grpo_turns_equal_non_dyadic_scores_into_noise():
    """The deviation this file pins down: verl's own grpo gives non-zero advantages to 0.3 × 8."""
    rewards, mask, index = make_inputs([0.3] * 8, ["g"] * 8)
    verl_adv, _ = compute_grpo_outcome_advantage(rewards, mask, index)
    assert row_adv(verl_adv, mask).abs().max() > 0.01  # measured: up to ~0.16


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("value", NOT_DYADIC)
def test_equal_non_dyadic_scores_give_exactly_zero(setup, value):
    # a flat group beside a group with spread, so the call is not degenerate as a whole
    scores = [value] * 8 + [0.0, 1.0, 1.0, 0.0]
    got = advantages(setup, scores, ["flat"] * 8 + ["mixed"] * 4)
    assert torch.all(got[:8] == 0), got[:8]
    assert torch.all(got[8:] != 0)


@pytest.mark.parametrize("setup", SETUPS)
def test_binary_and_signed_flat_groups_give_exactly_zero(setup):
    scores = [1.0] * 4 + [0.0] * 4 + [-1.0] * 3 + [1.0, -1.0, 1.0]
    got = advantages(setup, scores, ["ones"] * 4 + ["zeros"] * 4 + ["minus"] * 3 + ["mixed"] * 3)
    assert torch.all(got[:11] == 0) and torch.all(got[11:] != 0)


@pytest.mark.parametrize("setup", SETUPS)
def test_a_flat_group_stays_flat_with_padding_rows_between_its_rows(setup):
    """Padding rows (length 0, any reward) are not in the group: the remaining valid rows are all equal."""
    scores = [0.3, 5.0, 0.3, 0.3, 0.0, 1.0]
    lengths = [3, 0, 6, 2, 4, 5]  # row 1: padding inside the flat group's uid
    got = advantages(setup, scores, ["f", "f", "f", "f", "m", "m"], lengths)
    assert torch.all(got[:4] == 0)


@st.composite
def mixed_batches(draw):
    """Flat groups (one non-dyadic value repeated 2-8 times) mixed with groups of continuous scores, any order."""
    n_flat = draw(st.integers(1, 4))
    n_free = draw(st.integers(1, 4))
    scores, groups, flat = [], [], []
    for g in range(n_flat + n_free):
        size = draw(st.integers(2, 8))
        if g < n_flat:
            value = draw(st.sampled_from(NOT_DYADIC) | st.floats(-50, 50, allow_nan=False, width=32))
            values = [value] * size
        else:
            values = draw(st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=size, max_size=size))
        scores += values
        groups += [f"g{g}"] * size
        flat += [g < n_flat] * size
    order = draw(st.permutations(range(len(scores))))
    return [scores[i] for i in order], [groups[i] for i in order], np.array([flat[i] for i in order])


@settings(max_examples=40, deadline=None)
@given(mixed_batches(), st.sampled_from(sorted(SETUPS)))
def test_property_flat_groups_get_exactly_zero(batch, setup):
    scores, groups, flat = batch
    got = advantages(setup, scores, groups)
    assert torch.all(got[torch.from_numpy(flat)] == 0)
    assert torch.isfinite(got).all()

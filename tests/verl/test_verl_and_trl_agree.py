"""The advantages the real TRL ``GRPOTrainer`` (through ``HadwGRPOTrainer``) trains on equal what verl's registered
estimator returns for the same rewards and groups, generation batch by generation batch, replayed in order from a
fresh anchor as the run's. Needs both frameworks: the test environment (the TRL-only tests: tests/trl/).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from trl_helpers import GROUP, config, trained_on_what_it_buffered, trainer

from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage
from verl_hadw.verl.process_state import reset


def verl_replay(t, estimator):
    """verl's registered estimator over the recorded generation batches, in order (a fresh anchor, as the run's)."""
    reset()
    node = t.args.algorithm_node()
    if estimator is compute_dgpo_outcome_advantage or node["hadw"]["base"] == "grpo":  # only what it reads
        node.pop("hadw" if estimator is compute_dgpo_outcome_advantage else "dgpo")
    out = []
    for g in t.generations:
        scores = g.rewards[:, 0]
        token_rewards = torch.zeros(g.completion_mask.shape)
        token_rewards[:, 0] = scores
        uid = np.array([f"prompt-{i // GROUP}" for i in range(scores.numel())], dtype=object)
        adv, _ = estimator(token_rewards, g.completion_mask, uid, config=node)
        out.append(adv[:, 0])  # one value per completion, over its tokens
    reset()
    return out


def check_same_as_verl(t, estimator):
    trained_on_what_it_buffered(t)
    for g, expected in zip(t.generations, verl_replay(t, estimator), strict=True):
        torch.testing.assert_close(g.advantages, expected, rtol=1e-6, atol=1e-7)  # what TRL buffers and trains on


@pytest.mark.parametrize(("overrides", "estimator"), [
    ({"max_steps": 4}, compute_hadw_outcome_advantage),
    ({"adv_estimator": "dgpo"}, compute_dgpo_outcome_advantage),
    ({"hadw_base": "dgpo"}, compute_hadw_outcome_advantage),
    ({"max_steps": 4, "num_iterations": 2}, compute_hadw_outcome_advantage),  # one anchor step per generation
], ids=["hadw", "dgpo", "hadw_over_dgpo", "hadw_num_iterations_2"])
def test_trl_trains_on_the_advantages_verls_estimator_returns(overrides, estimator, tmp_path):
    t = trainer(config(tmp_path, **overrides))
    t.train()
    check_same_as_verl(t, estimator)

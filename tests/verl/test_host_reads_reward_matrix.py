"""TRL's and ms-swift's step (``hf_trainer.reward_matrix.generation_advantages``: a reward matrix -> advantages)
reads the host exactly as often as the estimators' table says plus two of its own: the reward weights (a CPU tensor
in both frameworks, so no GPU sync there, but counted here) and one read for every check of the matrix together (an
infinite reward, an overflowing sum, whether any completion was scored)."""

from __future__ import annotations

import pytest
import torch
from test_host_reads import READS_PER_CALL, HostReads

from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.core.options import DgpoConfig, HadwConfig
from verl_hadw.hf_trainer.checkpoint_anchor import TrainerAnchor
from verl_hadw.hf_trainer.reward_matrix import RewardColumns, generation_advantages
from verl_hadw.trl.grpo_config import TRL

OWN = 2  # the weights' check (a CPU tensor) and the matrix's checks, read together


def reads(estimator: str, base: str = "grpo", accuracy_index=None) -> HostReads:
    torch.manual_seed(0)
    rewards = torch.stack([torch.randint(0, 2, (64,)).float(), torch.rand(64)], dim=1)  # accuracy, a shaped reward
    hadw = HadwConfig(base=base, success_threshold=None if accuracy_index is not None else 0.5)
    dgpo = DgpoConfig(success_threshold=None if accuracy_index is not None else 0.5)
    columns = RewardColumns(["acc", "shaped"], torch.tensor([1.0, 0.5]), accuracy_index)
    anchor = TrainerAnchor(hadw, {}, TRL) if estimator == "hadw" else None
    with HostReads() as counted:
        generation_advantages(rewards, torch.full((64,), 4.0), 8, columns, hadw_cfg=hadw, dgpo_cfg=dgpo,
                              norm_by_std=True, anchor=anchor, step=1, training=True, metrics=MetricBuffer(),
                              terms=TRL, exclude_unscorable=True)
    return counted


@pytest.mark.parametrize("estimator, base", [("hadw", "grpo"), ("hadw", "dgpo"), ("dgpo", "grpo")])
@pytest.mark.parametrize("accuracy_index", [0, None])
def test_the_reward_matrix_step_reads_the_host_exactly_its_count(estimator, base, accuracy_index):
    counted = reads(estimator, base, accuracy_index)
    # the accuracy apart from the scores (a column, or thresholded scores): HA-DW reads K_t on its own, as verl's
    # hadw-threshold case; DGPO's counts come in one read, as dgpo-threshold
    expected = READS_PER_CALL[f"{estimator}-threshold"] + OWN
    assert counted.count == expected, counted.sites

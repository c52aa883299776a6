"""Under TRL: no wrong input trains silently, and every message is true.

A config changed after it was built is checked again by the trainer; NaN or infinite reward weights are refused
naming the weight; a reward function returning text is named with the type; ``accuracy_reward_index`` accepts numpy
integers; an option no run reads is warned about; every option is checked at the same moment under every
estimator. Each refusal leaves nothing written (no output folder) and the anchor as it was.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch
from trl_helpers import accuracy, config, toy_dataset, trainer

from verl_hadw.core.errors import ConfigError, UnusedOptionsWarning
from verl_hadw.hf_trainer.trainer_hooks import checked_outputs


@pytest.mark.parametrize("field, value, match", [
    ("adv_estimator", "dgpo", "loss_type='grpo' averages each completion"),  # built with loss_type="grpo"
    ("scale_rewards", "batch", "scale_rewards='batch' has no counterpart"),
    ("multi_objective_aggregation", "normalize_then_sum", "multi_objective_aggregation='normalize_then_sum'"),
    ("loss_type", "bogus", "loss_type='bogus' is not one of TRL's loss types"),
    ("hadw_lambda_scale", 0.0, "hadw_lambda_scale=0.0 is out of range"),
])
def test_a_config_changed_after_it_was_built_is_checked_again_by_the_trainer(tmp_path, field, value, match):
    out = tmp_path / "out"
    args = config(out, loss_type="grpo")
    setattr(args, field, value)
    with pytest.raises(ConfigError, match=match):
        trainer(args)
    assert not out.exists()  # refused before TRL builds anything: nothing written
    if field == "scale_rewards":
        with pytest.raises(ConfigError, match="has no counterpart"):
            args.norm_by_std()  # never read as Dr.GRPO


def test_steps_per_generation_changed_later_is_checked_again(tmp_path):
    args = config(tmp_path / "out", adv_estimator="dgpo")
    args.steps_per_generation = 2
    with pytest.raises(ConfigError, match="steps_per_generation=2 with gradient_accumulation_steps=1"):
        trainer(args)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("weights", [[float("nan"), 1.0], [1.0, float("inf")]])
def test_reward_weights_that_are_not_finite_are_refused(tmp_path, weights):
    def style(completions, **kwargs):
        return [0.5] * len(completions)

    with pytest.raises(ConfigError, match=r"reward_weights=\[.*\] holds a weight that is not a finite number"):
        trainer(config(tmp_path / "out", accuracy_reward_index=0, reward_weights=weights),
                reward_funcs=[accuracy, style])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("weights, index, said", [
    ([0.0], None, r"reward_weights=\[0.0\] weighs a reward function by 0 or less \(0.0 for number 0\)"),
    ([-1.0, 1.0], 0, r"gives the accuracy reward function number 0 \(accuracy_reward_index=0\) the weight -1.0"),
])
def test_an_accuracy_read_from_a_function_weighed_by_zero_or_less_is_refused(tmp_path, weights, index, said):
    """With --reward_weights 0 on its only function the anchor read an accuracy of 0.0 and trained."""
    def style(completions, **kwargs):
        return [0.5] * len(completions)

    funcs = [accuracy, style][:len(weights)]
    with pytest.raises(ConfigError, match=said):
        trainer(config(tmp_path / "out", accuracy_reward_index=index, reward_weights=weights), reward_funcs=funcs)
    assert not (tmp_path / "out").exists()


def test_an_infinite_weight_set_later_is_blamed_on_the_weight_not_the_function(tmp_path):
    t = trainer(config(tmp_path, accuracy_reward_index=0))
    t.reward_weights = torch.tensor([float("inf")])
    rewards = torch.tensor([[1.0], [0.0], [1.0], [0.0]] * 2)
    with pytest.raises(ConfigError, match=r"reward_weights=\[inf\] holds a weight that is not a finite number "
                                          r"\(inf for 'accuracy'\)") as info:
        t.hadw_advantages(rewards, torch.full((8,), 4))
    assert "returned an infinite value" not in str(info.value)
    assert t.hadw_anchor.state.open_step is None  # nothing observed


def test_a_reward_function_returning_text_is_named_with_the_type(tmp_path):
    def verdict(completions, **kwargs):
        return ["correct"] * len(completions)

    with pytest.raises(TypeError, match=r"the reward function 'verdict' returned str 'correct' for completion 0"):
        checked_outputs(verdict, "verdict")(completions=[1, 2])
    assert checked_outputs(accuracy, "accuracy") is not accuracy  # wrapped; a model is not
    t = trainer(config(tmp_path / "out", save_strategy="steps", save_steps=1, max_steps=1), reward_funcs=[verdict],
                train_dataset=toy_dataset(8))
    with pytest.raises(TypeError, match="the reward function 'verdict' returned str"):
        t.train()
    assert t.hadw_anchor.state.open_step is None and not (tmp_path / "out" / "checkpoint-1").exists()


def test_accuracy_reward_index_takes_a_numpy_integer(tmp_path):
    args = config(tmp_path, accuracy_reward_index=np.int64(0))
    assert args.accuracy_reward_index == 0 and type(args.accuracy_reward_index) is int


def test_an_accuracy_index_no_accuracy_reads_is_warned_about(tmp_path):
    with pytest.warns(UnusedOptionsWarning, match=r"accuracy_reward_index is set but this run .*"
                                                  r"hadw_difficulty_from=reward\) does not read it"):
        trainer(config(tmp_path, hadw_difficulty_from="reward", accuracy_reward_index=0))
    with pytest.warns(UnusedOptionsWarning, match="dgpo_temperature is set"):
        trainer(config(tmp_path, dgpo_temperature=3.0))  # HA-DW over GRPO reads no dgpo_*
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedOptionsWarning)
        trainer(config(tmp_path, hadw_base="dgpo", hadw_difficulty_from="reward", accuracy_reward_index=0))  # DQW


def test_every_option_is_checked_when_the_config_is_built_whichever_estimator_runs(tmp_path):
    with pytest.raises(ConfigError, match="dgpo_temperature=-1.0 is out of range"):
        config(tmp_path, dgpo_temperature=-1.0)  # HA-DW over GRPO: refused here, not only by the trainer
    with pytest.raises(ConfigError, match="loss_type='bogus' is not one of TRL's loss types"):
        config(tmp_path, loss_type="bogus")  # HA-DW: refused here, not inside TRL's loss
    assert not os.listdir(tmp_path)

"""Bad input under TRL, as under verl: one clear error naming the TRL field, at construction where it can be known.

Unknown and out-of-range options, TRL settings under which the method would not be the one named (loss_type,
scale_rewards, multi_objective_aggregation), a reward index out of range, infinite rewards, non-binary accuracy without
a threshold, and resumes: a changed meaning refuses, a changed tuning warns, a missing or foreign file is an error
unless hadw_allow_missing_state. The fields are those of options.py, and only verl_hadw/trl imports trl.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import re
from pathlib import Path

import pytest
import torch
from field_checks import check_fields, fields_table, loss_types_table
from repo_paths import ROOT
from trl import GRPOConfig
from trl_helpers import accuracy, config, trainer

from verl_hadw.core.anchor.compatibility import (
    ACCURACY_INDEX,
    ADV_ESTIMATOR,
    NORM_BY_STD,
    REWARD_FUNCS,
    REWARD_WEIGHTS,
    declared_options,
)
from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import (
    AnchorFileError,
    ConfigError,
    MissingAnchorStateError,
    PartialCheckpointError,
    ResumeConflictError,
)
from verl_hadw.hf_trainer.checkpoint_anchor import TrainerAnchor
from verl_hadw.hf_trainer.option_fields import declared_fields
from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer
from verl_hadw.trl.checks import LOSS_TYPES
from verl_hadw.trl.grpo_config import TRL


def refused(match: str, **overrides):
    with pytest.raises(ConfigError, match=match) as info:
        config("/tmp/unused", **overrides)
    assert "algorithm." not in str(info.value)  # TRL's names, not verl's
    return str(info.value)


# ------------------------------------------------------------------------------------------------ options
def test_every_declared_option_is_a_field_with_its_type_default_and_doc():
    # verl's keys (TRL's scale_rewards and its own adv_estimator field) and the reward columns (TRL's own fields)
    verls_own = (NORM_BY_STD, ADV_ESTIMATOR, ACCURACY_INDEX, REWARD_WEIGHTS, REWARD_FUNCS)
    expected = {k[len("algorithm."):].replace(".", "_") for k in declared_options() if k not in verls_own}
    assert set(declared_fields()) == expected
    check_fields(HadwGRPOConfig)
    signature = inspect.signature(HadwGRPOConfig).parameters  # what IDEs and doc tools read
    assert {*expected, "adv_estimator", "accuracy_reward_index", "output_dir"} <= set(signature)
    assert all(f"        {name} (`" in HadwGRPOConfig.__doc__ for name in expected)  # the docstring's Parameters


def test_unknown_field_names_the_field_and_suggests_ours():
    message = refused("Unknown HadwGRPOConfig field 'lambda_scale'", lambda_scale=1.5)
    assert "Did you mean 'hadw_lambda_scale'?" in message
    assert "Did you mean 'hadw_anchor_eta'?" in refused("hadw_anchor_etta", hadw_anchor_etta=8.0)


@pytest.mark.parametrize("field, value, match", [
    ("hadw_lambda_scale", 0.0, r"hadw_lambda_scale=0.0 is out of range; valid: \(0.0, inf\]"),
    ("hadw_anchor_window", 0, "hadw_anchor_window=0 is out of range"),
    ("hadw_anchor_eta_min", 1.5, r"hadw_anchor_eta_min=1.5 is out of range; valid: \[0.0, 1.0\]"),
    ("hadw_anchor_mode", "kalmann", "hadw_anchor_mode='kalmann' is not valid; choose one of: kalman"),
    ("hadw_anchor_init", "2", "hadw_anchor_init=2.0 is not valid; use 'first_batch' or a number in"),
    ("hadw_success_threshold", float("nan"), "hadw_success_threshold must be a finite number"),
    ("dgpo_temperature", -1.0, "dgpo_temperature=-1.0 is out of range"),
    ("adv_estimator", "grpo", "adv_estimator='grpo' is not valid; choose one of: hadw, dgpo"),
    ("accuracy_reward_index", -1, "accuracy_reward_index=-1 is not valid"),
])
def test_out_of_range_names_the_trl_field(field, value, match):
    refused(match, **({"adv_estimator": "dgpo"} if field.startswith("dgpo") else {}), **{field: value})


@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES.table))
def test_loss_type_is_exact_or_refused_under_dgpo(loss_type):
    if LOSS_TYPES.table[loss_type][0]:
        assert config("/tmp/unused", adv_estimator="dgpo", loss_type=loss_type).uses_valid_token_norm()
    else:
        refused(f"loss_type='{loss_type}'.*dgpo_valid_token_norm=False", adv_estimator="dgpo", loss_type=loss_type)
        refused(f"loss_type='{loss_type}'", hadw_base="dgpo", loss_type=loss_type)  # HA-DW over DGPO too
    config("/tmp/unused", adv_estimator="dgpo", loss_type=loss_type, dgpo_valid_token_norm=False)
    config("/tmp/unused", loss_type=loss_type)  # HA-DW over GRPO does not aggregate tokens itself


def test_tokens_dropped_inside_the_loss_are_refused_under_dgpos_valid_token_averaging():
    """TRL's top_entropy_quantile < 1 multiplies the per-token loss by each micro-batch's entropy mask while
    dapo's loss still divides by num_items_in_batch: T_valid would count tokens the loss does not train."""
    refused(r"top_entropy_quantile=0.2 trains only each micro-batch's high-entropy tokens: it drops loss tokens inside "
            r"the loss.*dgpo_valid_token_norm=False", adv_estimator="dgpo", loss_type="dapo", top_entropy_quantile=0.2)
    config("/tmp/unused", adv_estimator="dgpo", loss_type="dapo", top_entropy_quantile=0.2, dgpo_valid_token_norm=False)
    config("/tmp/unused", adv_estimator="hadw", top_entropy_quantile=0.2)  # HA-DW's advantages count no tokens


def test_valid_token_averaging_needs_one_generation_per_optimizer_step():
    refused("steps_per_generation=2 with gradient_accumulation_steps=1: an optimizer step then sees part of one",
            adv_estimator="dgpo", steps_per_generation=2)
    refused("sees several generation batches", adv_estimator="dgpo", steps_per_generation=1,
            gradient_accumulation_steps=2)
    config("/tmp/unused", adv_estimator="dgpo", gradient_accumulation_steps=2)  # steps_per_generation follows
    with pytest.raises(ConfigError, match="loss_type='dapo_v2' is not one verl-hadw has checked"):
        LOSS_TYPES.check("dapo_v2", 1, 1)


def test_trl_settings_that_change_the_method_are_refused():
    refused("scale_rewards='batch' has no counterpart", scale_rewards="batch")
    refused("multi_objective_aggregation='normalize_then_sum'", multi_objective_aggregation="normalize_then_sum")
    assert config("/tmp/unused", scale_rewards="none").algorithm_node()["norm_adv_by_std_in_grpo"] is False


def test_the_trainer_needs_a_hadw_config(tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], num_generations=4,
                      per_device_train_batch_size=8)
    with pytest.raises(ConfigError, match="args=HadwGRPOConfig"):
        HadwGRPOTrainer(model="unused", reward_funcs=[], args=args)


@pytest.mark.slow  # trains: TRL's defaults (3 epochs of one prompt here, 256-token completions)
def test_without_args_the_trainer_builds_the_default_config_and_trains(tmp_path, monkeypatch):
    """TRL's GRPOTrainer(model=..., reward_funcs=..., train_dataset=...) works without args; so does ours: the
    default config (named after the model, as TRL names it) with HA-DW's defaults.

    TRL's default config trains in bf16, which transformers accepts only beside a GPU (on a CPU-only machine TRL's
    own default fails the same way, "Your setup doesn't support bf16/gpu"); here transformers is told bf16 is
    available, and torch runs the bf16 autocast on the CPU."""
    import transformers.training_args
    from trl_helpers import accuracy, toy_dataset

    from verl_hadw.toy.model import build_model, build_tokenizer

    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    monkeypatch.chdir(tmp_path)  # the default output_dir is relative, as TRL's
    default = GRPOConfig("tiny-qwen2-GRPO")
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, 0)
    model.config._name_or_path = "local/tiny-qwen2"
    trainer = HadwGRPOTrainer(model=model, reward_funcs=accuracy, train_dataset=toy_dataset(1),
                              processing_class=tokenizer)
    assert isinstance(trainer.args, HadwGRPOConfig) and trainer.args.output_dir.endswith("tiny-qwen2-GRPO")
    assert all(getattr(trainer.args, f.name) == getattr(default, f.name) for f in dataclasses.fields(GRPOConfig)
               if f.name not in ("logging_dir",))  # TRL's default, field for field
    assert trainer.args.adv_estimator == "hadw" and trainer.hadw_anchor is not None
    trainer.train()
    assert trainer.state.global_step >= 1 and trainer.hadw_anchor.state.open_step is not None  # the anchor moved
    assert any("hadw/phi_mean" in entry for entry in trainer.state.log_history)


def test_accuracy_reward_index_out_of_range(tmp_path):
    with pytest.raises(ConfigError, match=r"accuracy_reward_index=1 is out of range: there are 1 reward function\(s\) "
                                          r"\(0: accuracy\); valid: 0..0, or leave it unset"):
        trainer(config(tmp_path, accuracy_reward_index=1))


# ------------------------------------------------------------------------------------------------ rewards
@pytest.fixture(scope="module")
def two_rewards(tmp_path_factory):
    """A trainer with two reward functions (not trained: its estimator is called directly on chosen rewards)."""
    def style(completions, **kwargs):
        return [0.5] * len(completions)

    return trainer(config(tmp_path_factory.mktemp("two"), accuracy_reward_index=0),
                   reward_funcs=[accuracy, style])


def test_a_completion_no_reward_function_scored_is_trls_not_an_error(two_rewards):
    """TRL 1.6+ leaves it out of its group (advantage 0), 1.0-1.5 give it nansum's 0; a None from the accuracy
    function alone is a 0, as in TRL's sum."""
    from packaging.version import Version
    from trl import __version__

    excludes = Version(__version__) >= Version("1.6.0")
    assert two_rewards.excludes_unscorable == excludes
    rewards = torch.tensor([[1.0, 0.5], [0.0, 0.5], [1.0, 0.5], [float("nan"), 0.5]] * 2)
    rewards[5] = float("nan")
    two_rewards.hadw_anchor.start(None)
    advantages, values = two_rewards.hadw_advantages(rewards, torch.full((8,), 4))
    assert values["hadw/batch_acc"] == (4 / 7 if excludes else 4 / 8) and (advantages[5] == 0) == excludes
    two_rewards.hadw_anchor.start(None)


@pytest.mark.parametrize("column, name", [(0, "accuracy"), (1, "style")])
def test_infinite_rewards_name_the_reward_function(two_rewards, column, name):
    rewards = torch.tensor([[1.0, 0.5], [0.0, 0.5], [1.0, 0.5], [0.0, 0.5]] * 2)
    rewards[6, column] = float("-inf")
    with pytest.raises(ValueError, match=rf"the reward function '{name}' returned an infinite value \(e.g. -inf\) "
                                         r"for completions \[6\]") as info:
        two_rewards.hadw_advantages(rewards, torch.full((8,), 4))
    assert "finite number" in str(info.value)
    assert two_rewards.hadw_anchor.state.open_step is None  # nothing observed


def test_the_accuracy_column_drives_the_anchor_and_the_sum_the_advantage(two_rewards):
    rewards = torch.tensor([[1.0, 0.5], [0.0, 0.5], [1.0, 0.5], [0.0, 0.5]] * 2)
    two_rewards.hadw_anchor.start(None)
    adv, values = two_rewards.hadw_advantages(rewards, torch.full((8,), 4))
    assert values["hadw/batch_acc"] == 0.5  # from column 0, although the summed scores are 1.5 and 0.5
    assert adv.shape == (8,) and bool((adv[[0, 2]] > 0).all()) and bool((adv[[1, 3]] < 0).all())


@pytest.mark.parametrize("estimator, field", [("hadw", "hadw_success_threshold"), ("dgpo", "dgpo_success_threshold")])
def test_non_binary_accuracy_without_threshold_names_the_field(tmp_path, estimator, field):
    t = trainer(config(tmp_path, adv_estimator=estimator))
    rewards = torch.tensor([[0.9], [0.2], [0.4], [0.7]] * 2)
    with pytest.raises(ValueError, match=rf"rewards are not binary accuracies .*; set {field}=<threshold>") as info:
        t.hadw_advantages(rewards, torch.full((8,), 4))
    assert "; or, if one of reward_funcs (accuracy) is the accuracy (0 or 1), name it: accuracy_reward_index=" in str(
        info.value)  # both ways out
    t = trainer(config(tmp_path, adv_estimator=estimator, **{field: 0.5}))
    assert t.hadw_advantages(rewards, torch.full((8,), 4))[0].abs().sum() > 0


# ------------------------------------------------------------------------------------------------ resumes
def saved_checkpoint(root: Path, step: int = 2, **overrides) -> Path:
    """A ``checkpoint-<step>`` folder holding an anchor file written by a run with ``overrides``."""
    args = config(root, **overrides)
    anchor = TrainerAnchor(args.hadw_options(), args.recorded_options([1.0], ["accuracy"]), TRL)  # as the trainer
    anchor.observe(1, 3.0, 8)
    anchor.observe(step, 5.0, 8)
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    anchor.save(str(folder), step)
    return folder


def anchor_of(root: Path, **overrides) -> TrainerAnchor:
    args = config(root, **overrides)
    return TrainerAnchor(args.hadw_options(), args.recorded_options([1.0], ["accuracy"]), TRL)


def test_resume_with_a_changed_meaning_refuses_naming_the_field(tmp_path):
    folder = saved_checkpoint(tmp_path)
    t = trainer(config(tmp_path, hadw_lambda_scale=1.5))
    with pytest.raises(ResumeConflictError) as info:
        t.train(resume_from_checkpoint=str(folder))  # refused before TRL loads anything
    message = str(info.value)
    assert "hadw_lambda_scale: 1.3 -> 1.5" in message and "set them back (hadw_lambda_scale=1.3)" in message
    assert "hadw_allow_missing_state=True" in message and "another output_dir" in message
    assert not re.search(r"algorithm\.|trainer\.|\+\w", message), message


def test_resume_with_a_changed_tuning_warns_and_continues(tmp_path, caplog):
    folder = saved_checkpoint(tmp_path)
    anchor = anchor_of(tmp_path, hadw_anchor_eta=8.0)
    with caplog.at_level(logging.WARNING):
        anchor.start(str(folder))
    assert anchor.state.posteriors and anchor.state.open_step == 2 and anchor.state.config.eta == 8.0
    assert "hadw_anchor_eta: 16.0 -> 8.0" in caplog.text and "algorithm." not in caplog.text


def test_resume_without_an_anchor_file(tmp_path, caplog):
    good = saved_checkpoint(tmp_path, step=2)
    empty = tmp_path / "checkpoint-4"
    empty.mkdir()
    (empty / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    with pytest.raises(MissingAnchorStateError, match=rf"holds no HA-DW anchor \({STATE_FILE}\).*resume from "
                                                      rf"{re.escape(str(good))}.*hadw_allow_missing_state=True"):
        anchor_of(tmp_path).start(str(empty))
    anchor = anchor_of(tmp_path, hadw_allow_missing_state=True)
    with caplog.at_level(logging.WARNING):
        anchor.start(str(empty))
    assert anchor.state.open_step is None and "hadw_allow_missing_state=True: continuing with a fresh" in caplog.text
    # no trainer_state.json: transformers 5.x stops on it after loading the weights (the adapter warned
    # "TRL restarts at step 0 with its weights only"); refused first, naming the newest whole checkpoint
    weights_only = tmp_path / "weights"
    weights_only.mkdir()
    (weights_only / STATE_FILE).write_text((good / STATE_FILE).read_text())
    said = rf"resume from {re.escape(str(weights_only))}: it holds no trainer_state.json.*{re.escape(str(good))} is"
    with pytest.raises(PartialCheckpointError, match=said):
        anchor_of(tmp_path).start(str(weights_only))


def test_resume_from_a_damaged_or_copied_file(tmp_path):
    saved_checkpoint(tmp_path, step=2)
    later = saved_checkpoint(tmp_path / "other", step=4)
    (later / STATE_FILE).write_text("{")
    with pytest.raises(AnchorFileError, match=r"is not valid JSON"):
        anchor_of(tmp_path).start(str(later))
    copied = tmp_path / "checkpoint-6"
    copied.mkdir()
    (copied / "trainer_state.json").write_text(json.dumps({"global_step": 6}))
    (copied / STATE_FILE).write_text((tmp_path / "checkpoint-2" / STATE_FILE).read_text())
    with pytest.raises(AnchorFileError, match=r"belongs to step 2 .* but TRL resumes from step 6: the file was copied"
                                              rf".*resume from {re.escape(str(tmp_path / 'checkpoint-2'))}"):
        anchor_of(tmp_path).start(str(copied))


# ------------------------------------------------------------------------------------------ the boundaries
def test_only_verl_hadw_trl_imports_trl():
    importers = [str(p.relative_to(ROOT)) for p in (ROOT / "verl_hadw").rglob("*.py")
                 if re.search(r"^\s*(from trl\b|import trl\b)", p.read_text(encoding="utf-8"), re.M)]
    # and the TRL study's baseline, TRL's own GRPO (research.trl_study_run imports it inside the run), and Axolotl's
    # adapter, whose GRPO is TRL's (it reads TRL's defaults in its own environment, where Axolotl pins TRL)
    allowed = (os.path.join("verl_hadw", "trl"), os.path.join("verl_hadw", "research", "trl_study_run.py"),
               os.path.join("verl_hadw", "axolotl"))
    assert importers and all(p.startswith(allowed) for p in importers), importers


def test_the_docs_show_the_loss_type_table_and_every_field():
    page = (ROOT / "docs" / "trl.md").read_text(encoding="utf-8")
    assert loss_types_table(LOSS_TYPES) in page and fields_table() in page
    for name in ("adv_estimator", "accuracy_reward_index"):
        assert f"`{name}`" in page, name


@pytest.mark.parametrize("before, after", [("hadw", "dgpo"), ("dgpo", "hadw")])
def test_switching_estimator_on_resume_is_refused_naming_the_field(tmp_path, before, after):
    t = trainer(config(tmp_path, adv_estimator=before, save_strategy="steps", save_steps=1, max_steps=1))
    t.train()
    folder = tmp_path / "checkpoint-1"
    saved = json.loads((folder / STATE_FILE).read_text())
    assert (saved["state"] is None) == (before == "dgpo")  # DGPO records its options only
    with pytest.raises(ResumeConflictError) as info:
        trainer(config(tmp_path, adv_estimator=after)).train(resume_from_checkpoint=str(folder))
    message = str(info.value)
    assert f"adv_estimator: {before!r} -> {after!r} (the method" in message and "algorithm." not in message
    assert f"set them back (adv_estimator={before})" in message

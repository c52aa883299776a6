"""The plugin's keys through Axolotl's own config loading (``axolotl.cli.config.load_cfg``, what ``axolotl train``
runs before it loads a model): the documented YAML validates with every option and the plugin's trainer; a misspelt
key gets "did you mean", a value out of range names its key and range, and every Axolotl or TRL setting under which
the method would not be the one named is refused, each in one line with the way out."""

import sys
import types

import pytest
import yaml
from axolotl_runs import write_yaml
from pydantic import ValidationError

from verl_hadw.axolotl import checks
from verl_hadw.axolotl.checks import TRAINER_PATH
from verl_hadw.core.errors import ConfigError


def load(assets, tmp_path, trl=None, **keys):
    from axolotl.cli.config import load_cfg

    return load_cfg(str(write_yaml(assets, tmp_path / "run", trl=trl, **keys)))


def refused(assets, tmp_path, trl=None, **keys) -> str:
    with pytest.raises((ConfigError, ValidationError)) as error:
        load(assets, tmp_path, trl=trl, **keys)
    return str(error.value)


def test_the_documented_yaml_validates_with_every_option_and_the_plugins_trainer(assets, tmp_path):
    cfg = load(assets, tmp_path)
    assert (cfg.hadw_adv_estimator, cfg.hadw_lambda_scale, cfg.hadw_anchor_eta, cfg.dgpo_temperature) == (
        "hadw", 1.3, 16.0, 2.0)
    assert cfg.trainer_cls == TRAINER_PATH
    assert yaml.safe_load(open(assets["hadw.yml"]))["plugins"] == ["verl_hadw.axolotl.HadwPlugin"]


def test_every_key_the_plugin_adds_carries_its_prefix_and_none_is_axolotls(assets):
    from axolotl.utils.schemas.config import AxolotlInputConfig

    from verl_hadw.axolotl.args import HadwArgs

    axolotls, ours = set(AxolotlInputConfig.model_fields), list(HadwArgs.model_fields)
    assert [k for k in ours if k in axolotls or not k.startswith(("hadw_", "dgpo_"))] == []
    assert set(yaml.safe_load(open(assets["hadw.yml"]))) - axolotls == {"hadw_adv_estimator", "hadw_lambda_scale"}


@pytest.mark.parametrize("key, meant", [
    ("hadw_lamda_scale", "hadw_lambda_scale"), ("lambda_scale", "hadw_lambda_scale"),
    ("dgpo_temprature", "dgpo_temperature"), ("hadw_anchor", "hadw_anchor_eta"), ("hadw_qzx", None),
    ("adv_estimator", "hadw_adv_estimator"), ("accuracy_reward_index", "hadw_accuracy_reward_index")])
def test_a_misspelt_key_gets_did_you_mean(assets, tmp_path, key, meant):
    said = refused(assets, tmp_path, **{key: 1.5})
    assert f"Unknown key {key!r}." in said and "The HA-DW / DGPO keys are: hadw_adv_estimator, " in said
    assert f"Did you mean {meant!r}?" in said if meant else "Did you mean" not in said


@pytest.mark.parametrize("key, value, said", [
    ("hadw_lambda_scale", -1.0, "hadw_lambda_scale=-1.0 is out of range; valid: (0.0, inf]."),
    ("hadw_anchor_eta_min", 2.0, "hadw_anchor_eta_min=2.0 is out of range; valid: [0.0, 1.0]."),
    ("hadw_adv_estimator", "ppo", "hadw_adv_estimator"),
    ("hadw_lambda_scale", "big", "hadw_lambda_scale"),
])
def test_a_value_out_of_range_fails_naming_the_key(assets, tmp_path, key, value, said):
    assert said in refused(assets, tmp_path, **{key: value})


@pytest.mark.parametrize("keys, trl, said", [
    ({"rl": "gdpo"}, None, "rl other than grpo is not supported with hadw_adv_estimator: hadw"),
    ({"context_parallel_size": 2, "attn_implementation": "flash_attention_2"}, None,
     "context_parallel_size > 1 is not supported with hadw_adv_estimator: hadw: it selects "
     "AxolotlGRPOSequenceParallelTrainer"),
    ({}, {"async_prefetch": True},
     "trl.async_prefetch, trl.use_data_producer is not supported with hadw_adv_estimator: hadw: they select "
     "AxolotlAsyncGRPOTrainer"),
    ({}, {"use_data_producer": True}, "set both to false"),
    ({}, {"use_liger_loss": True}, "To use the plugin, set trl.use_liger_loss: false."),
    ({"trainer_cls": "axolotl.core.trainers.grpo.trainer.AxolotlGRPOTrainer"}, None,
     "To use the plugin, remove trainer_cls, or name a subclass of HadwAxolotlGRPOTrainer."),
    ({}, {"scale_rewards": "batch"}, "trl.scale_rewards='batch' has no counterpart in hadw"),
    ({}, {"multi_objective_aggregation": "normalize_then_sum"},
     "trl.multi_objective_aggregation: normalize_then_sum normalises each reward function on its own (GDPO)"),
    ({"hadw_adv_estimator": "dgpo"}, {"loss_type": "grpo"},
     "trl.loss_type: grpo averages each completion over its own length first"),
    ({"hadw_adv_estimator": "dgpo"}, {"generation_batch_size": 16},
     "steps_per_generation: 2 with gradient_accumulation_steps: 1"),
])
def test_a_setting_under_which_the_method_is_not_the_one_named_is_refused_with_the_way_out(assets, tmp_path, keys,
                                                                                        trl, said, monkeypatch):
    if "context_parallel_size" in keys:  # Axolotl first checks that ring-flash-attn (GPU-only) is installed
        monkeypatch.setitem(sys.modules, "ring_flash_attn", types.ModuleType("ring_flash_attn"))
    assert said in refused(assets, tmp_path, trl=trl, **keys)


def test_dgpo_under_an_exact_loss_type_and_hadw_under_any_are_accepted(assets, tmp_path):
    load(assets, tmp_path, trl={"loss_type": "cispo"}, hadw_adv_estimator="dgpo")
    load(assets, tmp_path, trl={"loss_type": "grpo", "scale_rewards": "none"})
    load(assets, tmp_path, trainer_cls="axolotl_recording.RecordingTrainer")  # a subclass of the plugin's trainer


def test_an_axolotl_outside_the_range_is_refused(assets, tmp_path, monkeypatch):
    real = checks.installed
    monkeypatch.setattr(checks, "installed", lambda dist, extra: "0.18.0" if dist == "axolotl" else real(dist, extra))
    assert "supports axolotl>=0.19.0,<0.20; the installed Axolotl is 0.18.0" in refused(assets, tmp_path)


def test_the_page_shows_the_documented_yaml_and_every_refusal():
    """docs/axolotl.md's YAML is the one the tests train (``axolotl_data.YAML``), and its tables are the checks'."""
    from field_checks import loss_types_table, refused_settings_table
    from repo_paths import ROOT

    from verl_hadw.toy.axolotl_data import YAML

    page = (ROOT / "docs" / "axolotl.md").read_text(encoding="utf-8")
    assert f"<!-- axolotl-yaml:begin -->\n```yaml\n{YAML.format(out='toy')}```\n<!-- axolotl-yaml:end -->" in page
    assert f"<!-- axolotl-refused:begin -->\n{refused_settings_table(checks.REFUSED_SETTINGS, 'Axolotl')}\n" in page
    assert f"<!-- axolotl-losses:begin -->\n{loss_types_table(checks.LOSS_TYPES)}\n" in page

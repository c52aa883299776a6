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


@pytest.mark.parametrize("trl, keys, said", [
    ({"adv_estimator": "dgpo"}, {}, "trl.adv_estimator is not read: write hadw_adv_estimator: dgpo at the top level"),
    ({"hadw_lambda_scale": 2.0}, {}, "trl.hadw_lambda_scale is not read: write hadw_lambda_scale: 2.0 at the top"),
    ({"dgpo_temperature": 0.5}, {}, "trl.dgpo_temperature is not read: write dgpo_temperature: 0.5 at the top"),
    (None, {"special_tokens": {"hadw_base": "dgpo"}}, "special_tokens.hadw_base is not read: write hadw_base: dgpo"),
    (None, {"algorithm": {"adv_estimator": "dgpo"}}, "algorithm.adv_estimator is not read: write hadw_adv_estimator"),
    (None, {"algorithm": {"hadw": {"lambda_scale": 2.0}}}, "algorithm.hadw.lambda_scale is not read: write "
     "hadw_lambda_scale: 2.0"),
    (None, {"hadw": {"lambda_scale": 2.0}}, "hadw.lambda_scale is not read: write hadw_lambda_scale: 2.0"),
    (None, {"hadw": {"anchor": {"eta": 8.0}}}, "hadw.anchor.eta is not read: write hadw_anchor_eta: 8.0"),
    (None, {"dgpo": {"temperature": 0.5}}, "dgpo.temperature is not read: write dgpo_temperature: 0.5"),
    (None, {"HADW_LAMBDA_SCALE": 2.0}, "HADW_LAMBDA_SCALE is not read: write hadw_lambda_scale: 2.0 at the top level"),
    ({"hadw_lamda_scale": 2.0}, {}, "trl.hadw_lamda_scale is not read: write hadw_lambda_scale: 2.0 at the top level"),
    (None, {"HADW_LAMDA_SCALE": 2.0}, "HADW_LAMDA_SCALE is not read: write hadw_lambda_scale: 2.0 at the top level"),
    (None, {"hadw": {"qzx": 1}}, "hadw.qzx is not read, and no key of ours is like it: hadw_adv_estimator, "),
])
def test_a_value_of_ours_written_where_axolotl_drops_it_is_refused_naming_where_it_belongs(assets, tmp_path, trl, keys,
                                                                                          said):
    """In a section (trl: or any), in verl's nesting (hadw:, dgpo:, algorithm:) or in upper case, Axolotl's validation
    would drop the value without a word: the plugin's register, on the YAML as written, refuses it first."""
    assert said in (message := refused(assets, tmp_path, trl=trl, **keys)) and "Did you mean" not in message


@pytest.mark.parametrize("key, value", [("temperature", 0.7), ("epsilon", 0.2), ("top_p", 0.9), ("Temperature", 0.7)])
def test_a_trl_setting_at_the_top_level_is_pointed_to_trl_not_to_a_key_of_ours(assets, tmp_path, key, value):
    said, key = refused(assets, tmp_path, **{key: value}), key.lower()
    assert f"TRL's {key} sits under trl:; write trl: {{{key}: {value}}}." in said
    assert "Did you mean" not in said and "dgpo_" not in said and "hadw_" not in said
    assert load(assets, tmp_path, trl={key: value}).trl[key] == value  # where it is written, it reaches the run


def test_an_override_of_ours_on_the_command_line_reaches_the_config_or_is_refused_before_the_model_loads(assets,
                                                                                                         tmp_path):
    """``axolotl train`` has no flag for a plugin's key: it hands ``--hadw-lambda-scale 2.0`` to the launcher
    (``accelerate`` refuses it, ``--launcher python`` dropped it and exited 0), so the plugin refuses it; keywords
    that reach ``load_cfg`` (``python -m axolotl.cli.train x.yml --hadw_lambda_scale=2.0``) are checked as YAML keys."""
    from axolotl.cli.config import load_cfg
    from axolotl_runs import axolotl_command, train_process

    config = write_yaml(assets, tmp_path / "run")
    assert load_cfg(str(config), hadw_lambda_scale=2.0, learning_rate=0.05).hadw_lambda_scale == 2.0
    assert "Did you mean 'hadw_adv_estimator'?" in str(pytest.raises(ConfigError, load_cfg, str(config),
                                                                     adv_estimator="dgpo").value)
    done = train_process(axolotl_command(), "train", config, "--learning-rate", "0.05", "--hadw-lambda-scale", "2.0",
                         "--adv-estimator", "dgpo", "--launcher", "python", timeout=300)
    assert done.returncode != 0 and not (tmp_path / "run").exists()  # refused before the output folder, the model
    assert "--hadw-lambda-scale is not read: write hadw_lambda_scale: 2.0 at the top level of the YAML." in done.stderr


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


ACCURACY, SHORT = "verl_hadw.toy.axolotl_data.accuracy", "verl_hadw.toy.task.compute_score"  # two reward functions


@pytest.mark.parametrize("key, value", [
    ("hadw_lambda_scale", True), ("hadw_anchor_init", False), ("hadw_accuracy_reward_index", True)])
def test_a_boolean_written_for_a_number_is_refused_at_validation(assets, tmp_path, key, value):
    """``hadw_accuracy_reward_index: true`` with [accuracy, short] was 1: ``short`` read as the accuracy, silently."""
    said = refused(assets, tmp_path, trl={"reward_funcs": [ACCURACY, SHORT]}, **{key: value})
    assert f"{key}: {str(value).lower()} is a boolean, not a number. Write a number." in said


@pytest.mark.parametrize("written", ["0.5", "5e-1"])
def test_a_number_written_as_a_string_is_read_once_at_validation_and_the_trainer_runs_it(assets, tmp_path, written):
    from verl_hadw.axolotl.grpo_config import HadwTrainingArgs, option_values

    cfg = load(assets, tmp_path, hadw_anchor_init=written, hadw_lambda_scale=written)
    assert (cfg.hadw_anchor_init, type(cfg.hadw_anchor_init), cfg.hadw_lambda_scale) == (0.5, float, 0.5)
    options = HadwTrainingArgs(**option_values(cfg)).hadw_options()  # the trainer's arguments, read as it reads them
    assert (options.anchor.init, options.lambda_scale) == (0.5, 0.5)


@pytest.mark.parametrize("trl, keys, said", [
    ({"reward_weights": [float("nan")]}, {}, "trl.reward_weights=[nan] holds a weight that is not a finite number"),
    ({"reward_funcs": [ACCURACY, SHORT], "reward_weights": [0, 1]}, {"hadw_accuracy_reward_index": 0},
     f"trl.reward_weights: [0.0, 1.0] gives the accuracy reward function '{ACCURACY}' (hadw_accuracy_reward_index: 0) "
     "the weight 0.0"),
    ({"reward_weights": [-1]}, {}, "trl.reward_weights: [-1.0] weighs a reward function by 0 or less"),
    ({}, {"hadw_accuracy_reward_index": 1}, "hadw_accuracy_reward_index: 1 is out of range: there are 1 reward"),
])
def test_reward_weights_and_the_accuracy_index_are_refused_when_the_config_loads(assets, tmp_path, trl, keys, said):
    assert said in refused(assets, tmp_path, trl=trl, **keys)


def test_dgpos_generation_batch_is_refused_at_validation_in_axolotls_keys(assets, tmp_path):
    said = refused(assets, tmp_path, trl={"generation_batch_size": 16}, hadw_adv_estimator="dgpo")
    assert ("trl.generation_batch_size: 16 with micro_batch_size × gradient_accumulation_steps × ranks: 8: an "
            "optimizer step then sees part of one generation batch") in said
    assert "Leave trl.generation_batch_size unset (it defaults to micro_batch_size × gradient_accumulation_steps × " \
           "ranks)" in said and "steps_per_generation" not in said
    cfg = load(assets, tmp_path, trl={"generation_batch_size": 8}, hadw_adv_estimator="dgpo")  # one step's batch
    assert cfg.trl.generation_batch_size == 8


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


def test_the_plugin_listed_twice_is_refused_in_one_line_naming_both(assets, tmp_path, monkeypatch):
    """Listed under two paths, Axolotl merged HadwArgs twice: ``TypeError: duplicate base class HadwArgs``."""
    from collections import OrderedDict

    from axolotl.integrations.base import PluginManager

    manager = PluginManager.get_instance()
    monkeypatch.setattr(manager, "plugins", OrderedDict(manager.plugins))  # the second entry gone after the test
    both = ["verl_hadw.axolotl.HadwPlugin", "verl_hadw.axolotl.plugin.HadwPlugin"]
    said = f"plugins: lists HadwPlugin twice ({', '.join(both)}): list it once."
    assert refused(assets, tmp_path, plugins=both) == said


@pytest.mark.parametrize("keys, said", [
    ({"hadw_lamda_scale": 2.0}, "Unknown key 'hadw_lamda_scale'. Did you mean 'hadw_lambda_scale'?"),  # register's
    ({"hadw_lambda_scale": True}, "hadw_lambda_scale: true is a boolean, not a number. Write a number."),  # pydantic's
])
def test_axolotl_train_ends_a_refusal_with_its_message_as_the_last_line(assets, tmp_path, keys, said):
    """A refusal in a validator ended inside pydantic's dump (message, input, URL); now, like one raised in
    ``register``, the traceback ends with the message alone (Axolotl's own refusals end in a traceback too)."""
    from axolotl_runs import axolotl_command, train_process

    config = write_yaml(assets, tmp_path / "run", **keys)
    done = train_process(axolotl_command(), "train", config, "--launcher", "python")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith(f"verl_hadw.core.errors.ConfigError: {said}"), done.stderr[-3000:]
    out_of_range = "hadw_lambda_scale=-1.0 is out of range; valid: (0.0, inf]."  # a ConfigError, in one line
    assert refused(assets, tmp_path, hadw_lambda_scale=-1.0) == out_of_range


def test_both_pages_say_what_a_yaml_without_the_plugins_line_trains(assets, tmp_path):
    """Without ``plugins:``, Axolotl drops our keys (misspelt ones too) and trains its own GRPO; the pages say so."""
    from repo_paths import ROOT

    cfg = load(assets, tmp_path, plugins=None, hadw_lamda_scale=2.0)
    assert [k for k in cfg if k.startswith(("hadw_", "dgpo_"))] == [] and cfg.trainer_cls is None
    for page in (ROOT / "README.md", ROOT / "docs" / "axolotl.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert all(said in text for said in ("Without the `plugins:` line", "trains its own GRPO", "unread",
                                             "`Plugin loaded successfully: verl_hadw.axolotl.HadwPlugin`")), page

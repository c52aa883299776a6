"""``verl-hadw-swift rlhf``'s command line before anything loads: every HA-DW / DGPO option is a flag ``--help``
lists, a typo gets "did you mean" (ours or swift's), values are checked naming the flag, and every swift setting the
methods cannot honour is refused in one line (``checks.REFUSED_SETTINGS``), as is a DGPO loss type under which
valid-token averaging would not be exact."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from field_checks import check_fields, loss_types_table, refused_settings_table
from repo_paths import ROOT
from swift_runs import toy_arguments

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import check_accuracy_index, declared_fields
from verl_hadw.swift import checks as swift_checks
from verl_hadw.swift.checks import LOSS_TYPES, REFUSED_SETTINGS, check_trainer
from verl_hadw.swift.grpo_config import HadwSwiftArguments
from verl_hadw.swift.rlhf import help_text, parse

DOCS = ROOT / "docs" / "swift.md"


def argv(assets, tmp_path, *flags, **extra):
    return toy_arguments(assets, tmp_path / "out", **extra) + list(flags)


def test_every_declared_option_is_a_flag_with_its_type_default_and_doc():
    check_fields(HadwSwiftArguments)
    text = help_text()
    for name in [*declared_fields(), "adv_estimator", "accuracy_reward_index"]:
        assert f"--{name}" in text, name


def test_the_options_reach_the_run_checked(assets, tmp_path):
    args, ours = parse(argv(assets, tmp_path, "--adv_estimator", "hadw", "--hadw_lambda_scale", "1.5",
                            "--hadw_anchor_init", "0.3", "--scale_rewards", "none"))
    assert ours.hadw_options().lambda_scale == 1.5 and ours.hadw_options().anchor.init == 0.3
    assert args.scale_rewards == "none" and ours.norm_by_std() is False
    assert parse(argv(assets, tmp_path))[1].norm_by_std() is True  # swift's default scale_rewards: group


@pytest.mark.parametrize("flags, message", [
    (["--hadw_lamda_scale", "1.2"], "Unknown argument --hadw_lamda_scale. Did you mean --hadw_lambda_scale?"),
    (["--lambda_scale", "1.2"], "Unknown argument --lambda_scale. Did you mean --hadw_lambda_scale?"),
    (["--num_generaions", "4"], "Unknown argument --num_generaions. Did you mean --num_generations?"),
    (["--hadw_lambda_scale", "-1"], "--hadw_lambda_scale=-1.0 is out of range"),
    (["--adv_estimator", "gdpo"], "invalid choice: 'gdpo'"),
    (["--hadw_anchor_init", "first"], "--hadw_anchor_init"),
])
def test_a_wrong_flag_is_refused_naming_it(assets, tmp_path, flags, message, capsys):
    with pytest.raises((ConfigError, SystemExit)) as raised:
        parse(argv(assets, tmp_path, *flags))
    text = str(raised.value) if raised.type is ConfigError else capsys.readouterr().err
    assert message in text


REFUSED = {  # each row of REFUSED_SETTINGS -> a command line that sets it
    "--rlhf_type other than grpo": ["--rlhf_type", "dpo"],
    "--advantage_estimator rloo or reinforce_plus_plus": ["--advantage_estimator", "rloo"],
    "--scale_rewards batch": ["--scale_rewards", "batch"],
    "--scale_rewards gdpo": ["--scale_rewards", "gdpo"],
    "--dynamic_sample true": ["--dynamic_sample", "true"],
    "--kl_in_reward true": ["--kl_in_reward", "true"],
    "--sequence_parallel_size > 1": ["--sequence_parallel_size", "2"],
    "--use_flash_ckpt true": ["--use_flash_ckpt", "true"],
    "--advantage_reweight rlsd, --sdar_loss_coef > 0": ["--advantage_reweight", "rlsd"],
    "--teacher_model, --teacher_model_server": ["--teacher_model_server", "http://127.0.0.1:1"],
    "--loss_type real": ["--loss_type", "real"],
}


def test_every_refusal_has_a_command_line_here():
    assert set(REFUSED) == {setting for setting, _, _ in REFUSED_SETTINGS}


@pytest.mark.parametrize("setting", list(REFUSED))
def test_each_swift_setting_the_methods_cannot_honour_is_refused_in_one_line(assets, tmp_path, setting):
    """Refused by the adapter, naming the setting; a setting this swift release does not have is refused by its
    parser (swift's own message, or ours with "did you mean")."""
    with pytest.raises((ConfigError, ValueError, AssertionError)) as raised:
        parse(argv(assets, tmp_path, *REFUSED[setting]))
    text = str(raised.value)
    if raised.type is ConfigError and not text.startswith("Unknown argument"):
        assert text.startswith(f"{setting} is not supported with --adv_estimator hadw: ") and "\n" not in text


@pytest.mark.parametrize("extra, message", [
    ({}, "--loss_type grpo averages each completion over its own length first"),  # swift's default under GRPO
    ({"loss_type": "bnpo"}, "--loss_type bnpo divides by each process's micro-batch tokens"),
    ({"loss_type": "dapo", "steps_per_generation": 2}, "--steps_per_generation 2 with --gradient_accumulation_steps 1"),
    # swift drops these tokens inside its loss, after the advantages; num_items_in_batch still counts them
    ({"loss_type": "dapo", "overlong_filter": "true"}, "--overlong_filter true drops truncated completions' tokens: "
                                                       "it drops loss tokens inside the loss"),
    ({"loss_type": "dapo", "top_entropy_quantile": 0.2}, "--top_entropy_quantile 0.2 trains only each micro-batch's "
                                                         "high-entropy tokens"),
])
def test_dgpos_valid_token_averaging_is_refused_where_it_would_not_be_exact(assets, tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse(argv(assets, tmp_path, "--adv_estimator", "dgpo", **extra))
    parse(argv(assets, tmp_path, "--adv_estimator", "dgpo", "--dgpo_valid_token_norm", "false", **extra))
    parse(argv(assets, tmp_path, "--adv_estimator", "dgpo", loss_type="dapo"))


def test_what_swift_decides_when_it_builds_the_trainer_is_checked_there(assets, tmp_path):
    _, ours = parse(argv(assets, tmp_path, "--accuracy_reward_index", "1"))
    with pytest.raises(ConfigError, match="sample count varies per prompt"):
        check_trainer(SimpleNamespace(dynamic_num_samples=True, reward_func_names=["acc"]), ours)
    check_trainer(SimpleNamespace(dynamic_num_samples=False, reward_func_names=["acc"]), ours)
    with pytest.raises(ConfigError, match=r"--accuracy_reward_index 1 is out of range: .*0: acc"):
        check_accuracy_index(ours.accuracy_reward_index, ["acc"], ours.terms)  # hf_trainer's, once swift built them


def test_a_swift_outside_the_range_is_refused_naming_it(monkeypatch):
    monkeypatch.setattr(swift_checks, "installed_swift", lambda: "3.12.0")
    with pytest.raises(ConfigError, match=r"supports ms-swift>=4\.3\.0,<4\.7; the installed ms-swift is 3\.12\.0"):
        swift_checks.check_swift_version()


def test_the_docs_show_the_tables():
    text = DOCS.read_text()
    assert refused_settings_table(REFUSED_SETTINGS) in text and loss_types_table(LOSS_TYPES) in text


def test_the_paths_a_swift_user_names_load_from_the_install():
    """``verl_hadw.swift.rlhf_main`` and the ``verl-hadw-swift`` console script, from the extra the environment
    installed the way a user does (the main environment's wheel test loads every other user-named path)."""
    from importlib.metadata import entry_points

    from verl_hadw.swift import rlhf_main

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "verl-hadw-swift"]
    assert script.value == "verl_hadw.swift.cli:main" and callable(script.load()) and callable(rlhf_main)


def written(out: Path) -> list[Path]:
    """What a run left in its output folder beyond what swift's argument parsing writes: checkpoints, anchor files."""
    return [*out.rglob("checkpoint-*"), *out.rglob("verl_hadw_anchor.json")] if out.exists() else []


def test_verl_hadw_swift_help_and_an_unknown_subcommand_say_what_runs(capsys):
    """``verl-hadw-swift --help`` ended in swift's KeyError('--help'); an unknown subcommand likewise."""
    from verl_hadw.swift.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "verl-hadw-swift rlhf --help" in out and "verl-hadw-swift rlhf x.yaml" in out
    with pytest.raises(SystemExit) as done:
        main(["rlfh"])
    assert done.value.code == 2 and "unknown subcommand 'rlfh'. Choose one of: " in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--advantage_estimator", "hadw"], "--advantage_estimator hadw chooses swift's own baseline (grpo, rloo, "
                                        "reinforce_plus_plus). Choose HA-DW or DGPO with --adv_estimator hadw"),
    (["--advantage_estimator=dgpo"], "with --adv_estimator dgpo"),
    (["--config", "x.yaml"], "swift takes a config file as the first argument after rlhf. Run verl-hadw-swift rlhf "
                             "x.yaml"),
    (["--loss_type", "bogus"], "--loss_type bogus is not one of swift's GRPO loss types. Use one of: dapo, cispo, "
                               "grpo"),
    (["--accuracy_reward_index", "-1"], "--accuracy_reward_index=-1 is not valid. Give the position of the accuracy "
                                        "among the reward functions (an integer >= 0), or leave it unset."),
    (["--reward_weights", "0"], r"--reward_weights 0.0 weighs a reward function by 0 or less (0.0 for 'toy_accuracy')"),
])
def test_what_a_swift_user_types_is_refused_at_parse_time_in_the_words_they_typed(assets, tmp_path, flags, message):
    """Each of these failed later, or named only swift's words, or gave advice the command line refuses."""
    with pytest.raises(ConfigError) as refused:
        parse(argv(assets, tmp_path, *flags))
    assert message in str(refused.value)
    assert not written(tmp_path / "out")  # refused before a model loads


def test_a_config_file_given_first_reaches_our_flags(assets, tmp_path):
    """swift's config-file route (a .yaml / .yml / .json file first after ``rlhf``, 4.3-4.6) under verl-hadw-swift:
    the file's flags, ours among them, are read and checked; a refusal is one line on stderr, exit 2."""
    import subprocess
    import sys

    config, key = {}, None
    for token in argv(assets, tmp_path, "--adv_estimator", "hadw", "--hadw_lambda_scale", "-1"):
        if token.startswith("--"):
            key = token[2:]
            config[key] = []
        else:
            config[key].append(token)
    path = tmp_path / "run.yaml"
    path.write_text("".join(f"{k}: {v if len(v) > 1 else v[0]!r}\n" for k, v in config.items()))
    script = Path(sys.executable).with_name("verl-hadw-swift")
    run = subprocess.run([script, "rlhf", str(path)], capture_output=True, text=True, timeout=600)
    said = [line for line in run.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert run.returncode == 2 and len(said) == 1, run.stderr[-3000:]
    assert said[0].startswith("verl-hadw-swift rlhf: error: --hadw_lambda_scale=-1.0 is out of range"), said
    assert not written(tmp_path / "out")


@pytest.mark.parametrize("tuner", ["full", "lora"])
def test_a_partial_checkpoint_is_refused_before_swift_loads_from_it(assets, tmp_path, tuner):
    """Swift loads a LoRA adapter from --resume_from_checkpoint while it prepares the model, before its
    trainer exists; a checkpoint whose save was cut off (no trainer_state.json) ended in safetensors' "incomplete
    metadata". Refused at parse time, naming the newest whole checkpoint; so is the last-checkpoint link once its
    target is gone (swift's own parser stopped on it with a bare FileNotFoundError)."""
    from verl_hadw.core.errors import PartialCheckpointError
    from verl_hadw.hf_trainer.checkpoint_anchor import TrainerAnchor
    from verl_hadw.swift.grpo_config import SWIFT

    out = tmp_path / "out"
    whole, partial, link = out / "checkpoint-1", out / "checkpoint-2", out / "last-checkpoint"
    _, ours = parse(argv(assets, tmp_path, tuner_type=tuner))
    whole.mkdir(parents=True)
    (whole / "trainer_state.json").write_text('{"global_step": 1}')
    TrainerAnchor(ours.hadw_options(), ours.recorded_options([1.0], ["toy_accuracy"]), SWIFT).save(str(whole), 1)
    partial.mkdir()
    (partial / "adapter_model.safetensors").write_bytes(b"\x10\x00")  # half written
    link.symlink_to("checkpoint-0")  # its target rotated away
    for resume, problem in ((partial, "it holds no trainer_state.json"),
                            (link, "it is a link to 'checkpoint-0', which does not exist")):
        with pytest.raises(PartialCheckpointError, match=rf"^cannot resume from {resume}: {problem}\. .*{whole} is the "
                                                         "newest whole checkpoint beside it"):
            parse(argv(assets, tmp_path, tuner_type=tuner, resume_from_checkpoint=str(resume)))
    parse(argv(assets, tmp_path, tuner_type=tuner, resume_from_checkpoint=str(whole)))
    if tuner == "full":  # the weights only, a new run: not checked (swift's way to start from a folder of weights)
        parse(argv(assets, tmp_path, tuner_type=tuner, resume_from_checkpoint=str(partial), resume_only_model="true"))

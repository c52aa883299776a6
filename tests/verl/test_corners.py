"""The remaining corners, tested by class: each ends in a clear error or a defined behaviour.

- masks: a floating-point ``response_mask`` with NaN/Inf or values outside [0, 1];
- magnitudes: scores too large for float32 group statistics, non-finite scores, Φ overflow under reward difficulty;
- near-miss config sections and misplaced options ("did you mean"), before training;
- options of an estimator that is not selected (a warning naming them);
- ``trainer.resume_from_path`` that does not end in an existing ``global_step_N`` folder.
"""

import itertools
import os
import warnings

import numpy as np
import pytest
import torch
from batches import algo, make_inputs, row_adv
from omegaconf import OmegaConf

from verl_hadw.core.errors import ConfigError, UnusedOptionsWarning
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl.anchor_store import legacy_snapshots
from verl_hadw.verl.anchor_store.persistence import resolve_resume_dir
from verl_hadw.verl.config.checks import check_sections, unused_options
from verl_hadw.verl.config.run_options import read_call
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw
from verl_hadw.verl.startup_check import validate_config

_keys = itertools.count()
BOTH = pytest.mark.parametrize("fn", [hadw, dgpo], ids=["hadw", "dgpo"])


def call(fn, rewards, mask, index, **options):
    estimator = "hadw" if fn is hadw else "dgpo"
    options.setdefault("state_key", f"corner-{next(_keys)}")
    config = algo(estimator, anchor={"init": 0.5}, **options)
    return fn(token_level_rewards=rewards, response_mask=mask, index=index, config=config)


def batch(scores=(1, 0, 1, 1, 0, 0, 1, 0), dtype=torch.float32):
    rewards, mask, index = make_inputs(list(scores), [i // 4 for i in range(len(scores))])
    return rewards.to(dtype), mask, index


# ------------------------------------------------------------------------------------------------- masks
@BOTH
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1.0, 2.0, -1e-3])
@pytest.mark.parametrize("where", [(2, 3), (7, 0)], ids=["inside", "first-column"])
def test_float_mask_values_outside_0_1_are_an_error_naming_the_row(fn, bad, where):
    rewards, mask, index = batch()
    mask[where] = bad
    with pytest.raises(ValueError, match=rf"response_mask has values outside \[0, 1\] .* in rows \[{where[0]}\]"):
        call(fn, rewards, mask, index)


@BOTH
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fractional_mask_weights_in_0_1_are_accepted(fn, dtype):
    rewards, mask, index = batch()
    mask = mask.to(dtype)
    mask[1, :2] = 0.5  # a legal soft weight: the advantage is the row's scalar times the weight, as in verl's grpo
    adv, _ = call(fn, rewards, mask, index)
    assert torch.isfinite(adv).all() and torch.equal(adv[1, :2], adv[1, 3].repeat(2).to(adv.dtype) * 0.5)


@BOTH
def test_empty_and_all_padding_masks_are_errors(fn):
    rewards, mask, index = batch()
    with pytest.raises(ValueError, match="none with a response token"):
        call(fn, rewards, torch.zeros_like(mask), index)
    with pytest.raises(ValueError, match="empty batch"):
        call(fn, rewards[:0], mask[:0], index[:0])


# -------------------------------------------------------------------------------------------- magnitudes
@BOTH
@pytest.mark.parametrize("scale", [1e15, 1e18, 1e19])
def test_large_finite_scores_give_the_advantages_of_the_unscaled_ones(fn, scale):
    """Below the float32 limit the statistics are scale-invariant: binary × 1e15 == binary (accuracy by threshold)."""
    rewards, mask, index = batch()
    expected, _ = call(fn, rewards, mask, index, success_threshold=0.5, dgpo={"success_threshold": 0.5})
    got, _ = call(fn, rewards * scale, mask, index, success_threshold=0.5, dgpo={"success_threshold": 0.5})
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@BOTH
@pytest.mark.parametrize(
    "value, dtype",
    [
        (1e20, torch.float32), (1e30, torch.float32), (3e38, torch.float32),
        (1e39, torch.float64), (1e300, torch.float64),
    ],
)
def test_scores_too_large_for_float32_statistics_are_an_error(fn, value, dtype):
    rewards, mask, index = batch(dtype=dtype)
    rewards = rewards * value
    with pytest.raises(ValueError, match=r"rewards too large for the float32 group statistics .* Rescale"):
        call(fn, rewards, mask, index, success_threshold=0.5, dgpo={"success_threshold": 0.5})


@BOTH
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_scores_are_an_error_naming_the_row(fn, value):
    rewards, mask, index = batch()
    rewards[5, -1] = value
    with pytest.raises(ValueError, match=r"non-finite \(NaN/Inf\) rewards in rows \[5\]"):
        call(fn, rewards, mask, index)


def test_phi_overflow_under_reward_difficulty_is_an_error():
    rewards, mask, index = batch(scores=[1e3, 0, 1e3, 0, 0, 0, 1e3, 0])
    with pytest.raises(ValueError, match=r"difficulty weight overflows float32: .* rescale the rewards"):
        call(hadw, rewards, mask, index, difficulty_from="reward")
    adv, _ = call(hadw, rewards / 1e3, mask, index, difficulty_from="reward")  # the same rewards at order 1 run
    assert torch.isfinite(adv).all() and row_adv(adv, mask).abs().max() > 0


# ---------------------------------------------------------------------------------- near-miss config sections
def verl_algorithm(**extra):
    """verl 0.9.1's own ``algorithm`` defaults plus ``extra`` (as +algorithm.<key> overrides add them)."""
    from verl.trainer.config import AlgoConfig

    node = OmegaConf.structured(AlgoConfig)
    node = OmegaConf.merge(OmegaConf.create(OmegaConf.to_container(node)), {"adv_estimator": "hadw", **extra})
    return node


@pytest.mark.parametrize(
    "key, section",
    [
        ("hadww", "hadw"), ("HADW", "hadw"), ("Hadw", "hadw"), ("ha_dw", "hadw"), ("ha-dw", "hadw"),
        ("hdaw", "hadw"), ("hadw_options", "hadw"), ("dpgo", "dgpo"), ("DGPO", "dgpo"), ("dgpoo", "dgpo"),
        ("gdpo", "dgpo"),
    ],
)
def test_a_near_miss_section_is_an_error_naming_the_right_one(key, section):
    option = "lambda_scale" if section == "hadw" else "temperature"
    expected = rf"Unknown section 'algorithm.{key}': did you mean 'algorithm.{section}'\?"
    with pytest.raises(ConfigError, match=expected):
        check_sections(verl_algorithm(**{key: {option: 1.5}}))


def test_a_scalar_near_miss_and_a_misplaced_option_are_errors():
    with pytest.raises(ConfigError, match=r"did you mean 'algorithm.hadw'\?"):
        check_sections(verl_algorithm(hadww=1.3))
    with pytest.raises(ConfigError, match=r"Unknown key 'algorithm.lambda_scale': did you mean 'algorithm.hadw.lambda"):
        check_sections(verl_algorithm(lambda_scale=1.5))
    with pytest.raises(ConfigError, match=r"'algorithm.temprature': did you mean 'algorithm.dgpo.temperature'\?"):
        check_sections(verl_algorithm(temprature=5.0))


@pytest.mark.parametrize("key", ["hadw", "HADW", "dgpo", "hadww"])
def test_a_section_at_the_config_root_is_an_error(key):
    root = OmegaConf.create({"algorithm": OmegaConf.to_container(verl_algorithm()), key: {"lambda_scale": 1.5}})
    with pytest.raises(ConfigError, match=rf"Unknown top-level section '{key}': did you mean 'algorithm.(hadw|dgpo)'"):
        check_sections(root.algorithm, root)


def test_verl_keys_our_sections_and_unrelated_sections_pass():
    """No false alarms: verl's own keys (incl. gdpo_reward_keys), our sections, someone else's estimator section."""
    node = verl_algorithm(
        hadw={"lambda_scale": 1.5}, dgpo={"temperature": 3.0}, dapo={"clip": 0.2}, my_estimator={"x": 1}
    )
    node.gdpo_reward_keys = ["acc"]
    root = OmegaConf.create({"algorithm": OmegaConf.to_container(node), "trainer": {"project_name": "p"}})
    check_sections(node, root)


def test_the_near_miss_check_runs_inside_each_estimator_call():
    """Runs without the checkpoint callback get the error at their first step, before any update."""
    rewards, mask, index = batch()
    config = {**algo("dgpo"), "dpgo": {"temperature": 5.0}}
    with pytest.raises(ConfigError, match=r"did you mean 'algorithm.dgpo'"):
        dgpo(token_level_rewards=rewards, response_mask=mask, index=index, config=config)


def test_validate_config_runs_the_checks_before_training():
    config = OmegaConf.create({"algorithm": OmegaConf.to_container(verl_algorithm(HADW={"lambda_scale": 1.5}))})
    with pytest.raises(ConfigError, match=r"did you mean 'algorithm.hadw'"):
        validate_config(config)


# ------------------------------------------------------------------------------ options of another estimator
@pytest.mark.parametrize(
    "estimator, sections, unused",
    [
        ("dgpo", {"hadw": {"lambda_scale": 1.5, "anchor": {"eta": 4.0}}},
         ["algorithm.hadw.lambda_scale", "algorithm.hadw.anchor.eta"]),
        ("grpo", {"hadw": {"state_key": "k", "lambda_scale": 1.5}, "dgpo": {"dqw": False}},
         ["algorithm.hadw.lambda_scale", "algorithm.dgpo.dqw"]),  # state_key names the anchor: every base sets it
        ("gae", {"dgpo": {"temperature": 5.0}}, ["algorithm.dgpo.temperature"]),
        # HA-DW over GRPO reads no algorithm.dgpo key, its threshold included (algorithm.hadw.success_threshold)
        ("hadw", {"dgpo": {"temperature": 5.0, "success_threshold": 0.0}},
         ["algorithm.dgpo.temperature", "algorithm.dgpo.success_threshold"]),
        ("hadw", {"hadw": {"success_threshold": 0.5}, "dgpo": {"success_threshold": 0.0}},
         ["algorithm.dgpo.success_threshold"]),
        ("hadw", {"hadw": {"base": "dgpo"}, "dgpo": {"temperature": 5.0}}, []),
        ("dgpo", {"dgpo": {"temperature": 5.0}}, []),
        ("dgpo", {"hadw": {"log_metrics": False}}, []),  # the one metrics switch of both estimators
        ("hadw", {"hadw": {"lambda_scale": 1.5}}, []),
    ],
)
def test_options_of_an_unselected_estimator_warn_naming_them(estimator, sections, unused):
    node = verl_algorithm(adv_estimator=estimator, **sections)
    assert unused_options(node) == unused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        validate_config(OmegaConf.create({"algorithm": OmegaConf.to_container(node)}))
    messages = [str(w.message) for w in caught if issubclass(w.category, UnusedOptionsWarning)]
    if unused:
        assert len(messages) == 1 and all(key in messages[0] for key in unused)
        assert f"algorithm.adv_estimator={estimator}" in messages[0] and "no effect" in messages[0]
    else:
        assert messages == []


# ------------------------------------------------------------------------------------ trainer.resume_from_path
@pytest.fixture
def checkpoints(tmp_path):
    (tmp_path / "global_step_4" / "actor").mkdir(parents=True)
    (tmp_path / "global_step_4" / "actor" / "model.pt").write_text("x")
    return tmp_path


def resume(path):
    return OmegaConf.create({"resume_mode": "resume_path", "resume_from_path": path, "default_local_dir": "ck"})


@pytest.mark.parametrize("inside", ["global_step_4/actor", "global_step_4/", "global_step_4/actor/model.pt"])
def test_a_path_inside_a_checkpoint_names_the_folder_to_use(checkpoints, inside):
    path = str(checkpoints / inside) if not inside.endswith("/") else f"{checkpoints}/{inside}"
    with pytest.raises(ConfigError) as info:
        resolve_resume_dir(resume(path))
    assert f"trainer.resume_from_path={path!r} does not end in a global_step_N folder" in str(info.value)
    assert f"set trainer.resume_from_path={checkpoints / 'global_step_4'}." in str(info.value)


def test_other_resume_paths_are_errors_or_the_folder(checkpoints, monkeypatch):
    with pytest.raises(ConfigError, match=r"'.*global_step_9': no such checkpoint folder"):
        resolve_resume_dir(resume(str(checkpoints / "global_step_9")))
    with pytest.raises(ConfigError, match="does not end in a global_step_N folder .*: name the folder itself"):
        resolve_resume_dir(resume(str(checkpoints / "global_step_last")))
    with pytest.raises(ConfigError, match="must name a global_step_N folder"):
        resolve_resume_dir(resume(str(checkpoints)))
    assert resolve_resume_dir(resume(str(checkpoints / "global_step_4"))) == str(checkpoints / "global_step_4")
    monkeypatch.chdir(checkpoints)  # relative paths resolve against the cwd, as verl does
    assert resolve_resume_dir(resume("global_step_4")) == os.path.join(str(checkpoints), "global_step_4")


def test_the_legacy_trainer_reads_the_same_checked_path(checkpoints):
    """The legacy restore resolves its folder with the same function: the same error, not verl's raw ValueError."""
    trainer = {
        "default_local_dir": str(checkpoints), "resume_mode": "resume_path", "save_freq": 1, "use_v1": False,
        "resume_from_path": str(checkpoints / "global_step_4" / "actor"),
    }
    node = OmegaConf.create({"algorithm": {"adv_estimator": "hadw"}, "trainer": trainer})
    checkpoint = legacy_snapshots.from_call(read_call(node.algorithm))
    with pytest.raises(ConfigError, match="set trainer.resume_from_path=.*global_step_4"):
        checkpoint.load(HadwConfig(state_key="k"), 5)


def test_zero_length_arrays_of_scores_stay_errors():
    """np arrays as index with no rows: still the empty-batch error (the mask check does not hide it)."""
    with pytest.raises(ValueError, match="empty batch"):
        hadw(token_level_rewards=torch.zeros(0, 4), response_mask=torch.zeros(0, 4), index=np.array([]), config=algo())


@pytest.mark.parametrize(
    "node, expected",
    [
        ({"hadw": {"eta": 4.0}}, "'eta' is an option of algorithm.hadw.anchor: did you mean 'algorithm.hadw.anchor.e"),
        ({"hadw": {"dqw": False}}, "did you mean 'algorithm.dgpo.dqw'?"),
        ({"dgpo": {"lambda_scale": 1.5}}, "did you mean 'algorithm.hadw.lambda_scale'?"),
        ({"hadw": {"anchor": {"base": "dgpo"}}}, "did you mean 'algorithm.hadw.base'?"),
    ],
)
def test_an_option_in_another_section_names_its_section(node, expected):
    from verl_hadw.verl.config.run_options import parse_run

    with pytest.raises(ConfigError) as info:
        parse_run(node)  # each section is parsed on its own
    assert expected in str(info.value)

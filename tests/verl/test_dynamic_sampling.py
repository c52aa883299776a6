"""HA-DW with DAPO's dynamic sampling (algorithm.filter_groups.enable=true) is refused before training.

The end-to-end refusal through verl's main_ppo is in tests/e2e/test_e2e_modes.py; these check the decision and the
message on the config alone, and that verl 0.9.1 still filters where the refusal says it does.
"""

import inspect

import pytest
from omegaconf import OmegaConf

from verl_hadw.core.errors import ConfigError
from verl_hadw.verl.config.checks import check_filter_groups, drops_groups
from verl_hadw.verl.startup_check import validate_config


def config(estimator="hadw", enable=True, use_v1=True, **hadw):
    return OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": estimator,
                "filter_groups": {"enable": enable, "metric": "acc"},
                "hadw": hadw,
            },
            "trainer": {"use_v1": use_v1, "resume_mode": "disable"},
        }
    )


def test_hadw_with_filter_groups_on_v1_is_refused_with_why_and_what_to_do():
    with pytest.raises(ConfigError) as info:
        check_filter_groups(config())
    message = str(info.value)
    assert "algorithm.filter_groups.enable=true" in message
    assert "biased toward 0.5" in message  # why
    assert "algorithm.filter_groups.enable=false" in message and "adv_estimator=dgpo" in message  # what to do
    with pytest.raises(ConfigError, match="filter_groups"):  # HA-DW over a DGPO base reads y_t too
        check_filter_groups(config(base="dgpo"))


@pytest.mark.parametrize(
    "cfg",
    [
        config(enable=False),  # no dynamic sampling
        config(estimator="dgpo"),  # DGPO has no anchor; degenerate groups have zero advantage either way
        config(estimator="grpo"),
        config(use_v1=False),  # verl's legacy RayPPOTrainer has no filter_groups: nothing is dropped
        config(anchor={"mode": "fixed"}),  # a fixed anchor never reads y_t
    ],
)
def test_combinations_that_see_every_response_or_never_read_y_t_pass(cfg):
    check_filter_groups(cfg)


def test_drops_groups_reads_a_missing_node_as_off():
    cfg = OmegaConf.create({"algorithm": {"adv_estimator": "hadw"}, "trainer": {}})
    assert not drops_groups(cfg)
    assert drops_groups(config())


@pytest.mark.verl091
def test_the_checkpoint_callback_refuses_at_trainer_build():
    from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback

    """verl builds the callback in PPOTrainer.__init__, before any worker or rollout starts."""
    with pytest.raises(ConfigError, match="biased toward 0.5"):
        validate_config(config())
    with pytest.raises(ConfigError, match="biased toward 0.5"):
        HadwCheckpointCallback(config())


def test_a_typo_and_dynamic_sampling_are_reported_together_at_start_up():
    """One start, every problem: the typo names its key, the refusal says why, each once and numbered."""
    with pytest.raises(ConfigError) as info:
        validate_config(config(lamda_scale=1.3))
    message = str(info.value)
    assert message.startswith("2 problems in the config:\n  1. ")
    assert "Unknown key 'algorithm.hadw.lamda_scale'. Did you mean 'algorithm.hadw.lambda_scale'?" in message
    assert "\n  2. algorithm.adv_estimator=hadw cannot run with algorithm.filter_groups.enable=true" in message
    assert message.count("lamda_scale") == 1
    with pytest.raises(ConfigError) as info:  # one problem: its message alone, as before
        validate_config(config(enable=False, lamda_scale=1.3))
    assert str(info.value).startswith("Unknown key 'algorithm.hadw.lamda_scale'")
    validate_config(config(enable=False))  # and a clean config passes


def test_verl_still_filters_inside_the_replay_buffer_before_the_advantage():
    """The refusal's premise, read off verl 0.9.1: v1 filtering happens in ReplayBuffer.sample (called by
    _step_once before _compute_advantage), and the legacy trainer never reads filter_groups."""
    from verl.trainer.ppo import ray_trainer
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    sample = inspect.getsource(ReplayBuffer.sample)
    assert "_evict_terminal_groups" in sample and "_terminal_eviction_reasons" in sample
    step_once = inspect.getsource(trainer_base.PPOTrainer._step_once)
    assert step_once.index("self.replay_buffer.sample(") < step_once.index("self._compute_advantage(")
    assert "filter_groups" not in inspect.getsource(ray_trainer)

"""verl's ``gdpo`` with ``algorithm.dgpo.*`` set is refused ("did you mean dgpo?") where the plugin's checks run: the
start-up check and the checkpoint callback. The estimator ``gdpo`` is verl's own function, untouched: a run without
our checks gets verl's GDPO exactly as without the plugin.

Through verl's own functions: ``compute_advantage`` (what both trainers call before each update) and the estimator
verl registered. The GDPO batch is a multi-reward batch as verl hands it to GDPO: two reward columns in
``non_tensor_batch`` named by ``algorithm.gdpo_reward_keys``, prompts and an attention mask.
"""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage

import verl_hadw.verl.entry_point  # noqa: F401  (as verl's plugin loader loads it: its hook runs at once here)
from verl_hadw.core.errors import ConfigError
from verl_hadw.verl.startup_check import validate_config

DID_YOU_MEAN_DGPO = (r"algorithm.adv_estimator=gdpo with algorithm.dgpo.temperature set: "
                     r"did you mean algorithm.adv_estimator=dgpo")


def config(**algorithm):
    return OmegaConf.create({"algorithm": {"adv_estimator": "gdpo", "norm_adv_by_std_in_grpo": True, **algorithm},
                             "trainer": {"resume_mode": "disable"}})


def gdpo_batch(groups=3, group=4, prompt=3, response=5) -> DataProto:
    rng = np.random.default_rng(0)
    n = groups * group
    mask = torch.ones(n, response)
    rewards = torch.zeros(n, response)
    rewards[:, -1] = torch.from_numpy(rng.integers(0, 2, n).astype(np.float32))
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask,
                 "prompts": torch.ones(n, prompt, dtype=torch.long),
                 "attention_mask": torch.ones(n, prompt + response, dtype=torch.long)},
        non_tensors={"uid": np.array([f"p{i // group}" for i in range(n)], dtype=object),
                     "accuracy": rng.integers(0, 2, n).astype(np.float32),
                     "format": rng.uniform(0, 1, n).astype(np.float32)},
    )


def test_the_start_up_check_refuses_dgpo_options_under_gdpo_saying_what_gdpo_is():
    with pytest.raises(ConfigError, match=DID_YOU_MEAN_DGPO) as info:
        validate_config(config(dgpo={"temperature": 2.0}))
    assert "verl's gdpo (GDPO, multi-reward normalisation) never reads algorithm.dgpo" in str(info.value)
    assert "remove the algorithm.dgpo options to train GDPO" in str(info.value)


@pytest.mark.verl091
def test_the_checkpoint_callback_refuses_dgpo_options_under_gdpo_where_verl_builds_it():
    from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback

    with pytest.raises(ConfigError, match=DID_YOU_MEAN_DGPO):
        HadwCheckpointCallback(config(dgpo={"temperature": 2.0}))  # verl builds it before any worker starts


def test_verls_gdpo_is_verls_own_function_untouched():
    from verl.trainer.ppo import core_algos

    gdpo = get_adv_estimator_fn("gdpo")
    assert gdpo is core_algos.compute_gdpo_outcome_advantage and gdpo.__module__ == "verl.trainer.ppo.core_algos"
    assert not hasattr(gdpo, "__wrapped__")
    cfg = config(dgpo={"temperature": 2.0})  # a run without our checks: verl's GDPO says what it says, unchanged
    with pytest.raises(AssertionError, match="GDPO requires 'algorithm.gdpo_reward_keys'"):
        compute_advantage(gdpo_batch(), "gdpo", config=cfg.algorithm)


def test_gdpo_without_dgpo_options_is_verls_gdpo_unchanged():
    cfg = config(gdpo_reward_keys=["accuracy", "format"], gdpo_reward_weights=[1.0, 0.5])
    validate_config(cfg)
    data = compute_advantage(gdpo_batch(), "gdpo", config=cfg.algorithm)
    batch = gdpo_batch()
    expected, _ = get_adv_estimator_fn("gdpo")(  # verl's own function, as compute_advantage calls it
        token_level_rewards=batch.batch["token_level_rewards"], response_mask=batch.batch["response_mask"],
        config=cfg.algorithm, index=batch.non_tensor_batch["uid"], non_tensor_batch=batch.non_tensor_batch,
        batch=batch.batch)
    assert torch.equal(data.batch["advantages"], expected) and expected.abs().sum() > 0
    with pytest.raises(AssertionError, match="GDPO requires 'algorithm.gdpo_reward_keys'"):  # verl's own message
        compute_advantage(gdpo_batch(), "gdpo", config=config().algorithm)


def test_every_estimator_but_ours_is_verls_own():
    """With the plugin loaded (the entry point, imported above), hadw and dgpo are ours and every other estimator in
    verl's registry is verl's own function."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_hadw.verl import estimators

    registry = dict(ADV_ESTIMATOR_REGISTRY)  # read only
    assert registry.pop("hadw").__module__ == registry.pop("dgpo").__module__ == estimators.__name__
    not_verls = {name: fn.__module__ for name, fn in registry.items() if fn.__module__ != "verl.trainer.ppo.core_algos"}
    assert not_verls == {}
    assert {"gae", "grpo", "gdpo", "rloo"} <= set(registry)


def test_a_second_import_of_the_estimators_registers_nothing_new():
    """verl's register_adv_est refuses a second function under a name: a re-import (new function objects) keeps
    the first import's estimators and raises nothing."""
    import importlib.util

    before = {name: get_adv_estimator_fn(name) for name in ("hadw", "dgpo")}
    spec = importlib.util.find_spec("verl_hadw.verl.estimators")
    again = importlib.util.module_from_spec(spec)  # a second copy, outside sys.modules
    spec.loader.exec_module(again)
    assert again.compute_hadw_outcome_advantage is not before["hadw"]
    assert {name: get_adv_estimator_fn(name) for name in ("hadw", "dgpo")} == before

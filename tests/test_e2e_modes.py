"""verl's v1 async trainer modes on CPU: what the demo launcher adds for ``trainer.v1.trainer_mode=<mode>``.

The end-to-end ``main_ppo`` runs of the async modes (and of HA-DW refused with dynamic sampling) are on branch
``i14b``: they had not passed on this machine when this landed (issue 14), so they are not here yet.
"""


import pytest

from verl_hadw.toy.launch import command
from verl_hadw.toy.modes import SEPARATE_SYNC_STEPS, mode_overrides, requested_mode


# ------------------------------------------------------------------------------ the launcher's additions (fast)
def test_sync_needs_nothing_and_unknown_modes_are_named():
    from verl_hadw.toy.launch import config_dir

    assert mode_overrides(["algorithm.adv_estimator=dgpo"], config_dir()) == []
    both = ["trainer.v1.trainer_mode=sync", "trainer.v1.trainer_mode=colocate_async"]
    assert requested_mode(both) == "colocate_async"
    with pytest.raises(ValueError, match="colocate_async, separate_async"):
        requested_mode(["trainer.v1.trainer_mode=fully_async"])


def test_separate_async_gets_a_rollout_pool_a_cpu_weight_sync_and_a_consistent_mini_batch():
    from verl_hadw.toy.launch import config_dir

    user = ["trainer.v1.trainer_mode=separate_async", "data.train_batch_size=12"]
    extra = dict(item.split("=", 1) for item in mode_overrides(user, config_dir()))
    assert extra["trainer.v1.sampler.custom_sampler.path"] == "null"  # verl's async replay buffer
    assert int(extra["trainer.v1.separate_async.parameter_sync_step"]) == SEPARATE_SYNC_STEPS
    assert int(extra["actor_rollout_ref.actor.ppo_mini_batch_size"]) * SEPARATE_SYNC_STEPS == 12  # verl's assert
    assert extra["actor_rollout_ref.rollout.checkpoint_engine.backend"] == "hfcpu_ray"
    rows = 6 * 4  # responses per mini-batch: 6 prompts x rollout.n=4; verl splits them into whole micro-batches
    assert 24 % int(extra["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]) == 0
    assert rows % int(extra["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"]) == 0
    assert extra["ray_kwargs.ray_init.num_gpus"] == "2"  # the trainer's logical GPU and the rollout pool's
    # the user's own overrides come after the additions, so they win
    cmd = command([*user, "actor_rollout_ref.actor.ppo_mini_batch_size=3"])
    mini = "actor_rollout_ref.actor.ppo_mini_batch_size="
    assert cmd.index(mini + "3") > cmd.index(mini + "6")

"""What the CPU demo adds when the user picks one of verl's v1 trainer modes (``trainer.v1.trainer_mode=...``).

``configs/cpu/demo.yaml`` is written for the ``sync`` trainer; the async modes need verl's own async replay buffer,
and ``separate_async`` also mini-batches, a rollout pool and the ``hfcpu_ray`` checkpoint engine (docs/cpu.md).
The additions go *before* the user's overrides, so anything the user sets explicitly wins.
"""

from __future__ import annotations

import math

from omegaconf import OmegaConf

__all__ = ["MODES", "SEPARATE_SYNC_STEPS", "requested_mode", "mode_overrides"]

MODES = ("sync", "colocate_async", "separate_async")
SEPARATE_SYNC_STEPS = 2  # estimator calls (mini-batches) per training step in the separate_async demo
_MODE_KEY = "trainer.v1.trainer_mode"
MICRO_BATCH_KEYS = (
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
)


def requested_mode(overrides: list[str]) -> str:
    """The trainer mode the overrides ask for (the last one wins, as in Hydra); ``sync`` if none."""
    mode = "sync"
    for item in overrides:
        key, _, value = item.lstrip("+").partition("=")
        if key == _MODE_KEY:
            mode = value.strip("'\"")
    if mode not in MODES:
        raise ValueError(f"{_MODE_KEY}={mode!r} is not a verl 0.9.1 v1 trainer mode; choose one of {', '.join(MODES)}")
    return mode


def _composed(config_dir: str, config_name: str, overrides: list[str]):
    """The demo config as main_ppo would compose it (verl's config tree found as files: no verl import)."""
    from hydra import compose, initialize_config_dir

    from verl_hadw.toy.config_paths import verl_config_dir

    search = f"hydra.searchpath=[file://{verl_config_dir()}]"
    with initialize_config_dir(config_dir=config_dir, version_base=None, job_name="verl_hadw_demo_mode"):
        return compose(config_name=config_name, overrides=[*overrides, search])


def mode_overrides(overrides: list[str], config_dir: str, config_name: str = "demo") -> list[str]:
    """The overrides the requested trainer mode needs on top of the demo config (empty for ``sync``)."""
    mode = requested_mode(overrides)
    if mode == "sync":
        return []
    # verl's own async replay buffer: CanonicalReplayBuffer fixes the sync trainer's row order and refuses the async
    # modes, whose batches depend on rollout timing anyway
    extra = ["trainer.v1.sampler.custom_sampler.path=null", "trainer.v1.sampler.custom_sampler.name=null"]
    if mode == "colocate_async":
        return extra
    config = _composed(config_dir, config_name, overrides)
    batch = int(config.data.train_batch_size)
    # separate_async: verl asserts train_batch_size == parameter_sync_step * ppo_mini_batch_size, wants a rollout pool
    # of its own (one more logical Ray GPU) and a checkpoint engine other than naive (ours: verl_hadw.cpu.weight_sync)
    steps = SEPARATE_SYNC_STEPS if batch % SEPARATE_SYNC_STEPS == 0 else 1
    gpus = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes) + 1
    rows = batch // steps * int(config.actor_rollout_ref.rollout.n)  # responses per mini-batch (one estimator call)
    micro = [  # verl splits each mini-batch into micro-batches of exactly this many rows (and asserts they divide it)
        f"{key}={math.gcd(int(OmegaConf.select(config, key)), rows)}"
        for key in MICRO_BATCH_KEYS
        if OmegaConf.select(config, key) is not None and rows % int(OmegaConf.select(config, key))
    ]
    return extra + micro + [
        f"trainer.v1.separate_async.parameter_sync_step={steps}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch // steps}",
        "actor_rollout_ref.rollout.nnodes=1",
        "actor_rollout_ref.rollout.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.checkpoint_engine.backend=hfcpu_ray",
        f"ray_kwargs.ray_init.num_gpus={gpus}",  # logical: the trainer's GPUs plus the rollout pool's one
    ]

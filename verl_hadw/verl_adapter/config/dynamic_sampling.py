"""HA-DW and DAPO's dynamic sampling (``algorithm.filter_groups.enable=true``): refused before training.

Where verl 0.9.1 drops the groups: the v1 trainers (``sync``, ``colocate_async``, ``separate_async``) filter in
the replay buffer (``verl/trainer/ppo/v1/replay_buffer.py``, ``_dapo_filtered_keys`` / ``_evict_terminal_groups``):
a finished group whose metric is the same for every response is cleared from TransferQueue *inside*
``ReplayBuffer.sample``, before ``_compute_advantage`` fetches the batch. The estimator therefore never sees the
all-correct and all-wrong groups, so y_t (Eq. 7, the accuracy over *all* of the step's responses) and through it
the anchor C_t drift towards 0.5. The legacy ``RayPPOTrainer`` (``trainer.use_v1=false``) has no
``filter_groups`` at all (DAPO there is verl-recipe's separate ``dapo_ray_trainer``), so nothing is dropped.

Why refuse rather than count the dropped groups: the only trace the estimator could read is the replay buffer's
metrics dict (``training/filter_groups/evicted_samples`` and ``{reward value: group count}``), which verl passes
to its logger, never to ``compute_advantage``; the one extension point near it, ``trainer.v1.sampler
.custom_sampler``, replaces verl's replay buffer and so switches verl's own filtering off (verl hands a custom
sampler none of the ``filter_groups`` arguments). Counting them would mean re-implementing verl's DAPO sampler.
"""

from __future__ import annotations

from verl_hadw.core.errors import ConfigError
from verl_hadw.verl_adapter.config.run_options import RunOptions

__all__ = ["check_filter_groups", "drops_groups"]


def drops_groups(config) -> bool:
    """Whether verl will drop degenerate groups before the estimator: filter_groups on a v1 trainer."""
    node = config.algorithm.get("filter_groups", None)
    enabled = bool(node is not None and node.get("enable", False))
    return enabled and bool(config.trainer.get("use_v1", True))


def check_filter_groups(config, run: RunOptions | None = None) -> None:
    """Raise ConfigError for HA-DW (any base) with dynamic sampling on a v1 trainer, unless the anchor is fixed.
    ``run``: the config's parsed options, when the caller has them."""
    if config.algorithm.get("adv_estimator") != "hadw" or not drops_groups(config):
        return
    if run is not None:
        mode = run.hadw.anchor.mode
    else:  # read as written: a typo elsewhere in the section is another problem, reported on its own
        mode = ((config.algorithm.get("hadw") or {}).get("anchor") or {}).get("mode")
    if mode == "fixed":
        return  # a fixed anchor never reads y_t
    raise ConfigError(
        "algorithm.adv_estimator=hadw cannot run with algorithm.filter_groups.enable=true (DAPO dynamic "
        "sampling): verl's v1 replay buffer drops the all-correct and all-wrong groups before the estimator sees "
        "the batch, so the batch accuracy y_t (Eq. 7, over all of the step's responses) and the anchor C_t would "
        "be biased toward 0.5. Set algorithm.filter_groups.enable=false (HA-DW already gives degenerate groups "
        "zero advantage), or use algorithm.adv_estimator=dgpo (which needs no anchor), or "
        "+algorithm.hadw.anchor.mode=fixed (an anchor that never reads y_t)."
    )

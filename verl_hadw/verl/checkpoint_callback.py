"""``HadwCheckpointCallback``, verl's v1 checkpoint callback (``trainer.checkpoint_callback_class``, verl >= 0.9.1).
verl builds it in its driver before it loads its own checkpoint: the constructor checks the config and restores the
anchor from the ``global_step_N`` verl resumes from; ``on_save`` writes the anchor into each checkpoint."""

from __future__ import annotations

import verl_hadw.verl.support as support

if not support.has_checkpoint_callback():  # verl 0.9.0: no checkpoint_callback_class, no CheckpointCallback
    raise ImportError(
        f"verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback needs verl>={support.CALLBACK_SINCE}, which has "
        f"checkpoint callbacks; verl {support.installed_verl()} has none. Remove trainer.checkpoint_callback_class: "
        "on this verl the HA-DW anchor is saved in per-step snapshots.")

from verl.trainer.ppo.checkpoint_callback import CheckpointCallback  # noqa: E402

from verl_hadw.verl import metrics  # noqa: E402
from verl_hadw.verl.anchor_store import client as anchor_client  # noqa: E402
from verl_hadw.verl.anchor_store.checkpoint_files import CheckpointFiles  # noqa: E402
from verl_hadw.verl.startup_check import validated_options  # noqa: E402


class HadwCheckpointCallback(CheckpointCallback):
    """Validates the config, restores the HA-DW anchor on resume, and saves it with every verl checkpoint."""

    def __init__(self, config=None):
        super().__init__(config)
        run = validated_options(config, by_callback=True)  # the one parse of this run's options
        self.estimator, self.hadw = run.estimator, run.hadw
        metrics.enable(self.hadw.log_metrics)
        self.files = CheckpointFiles(config.trainer, run.flat())
        if self.estimator == "hadw":
            anchor_client.open_client(self.hadw, self.files, owner=config.algorithm)  # the node verl passes
        else:  # a resume from a checkpoint trained under another estimator (HA-DW's anchor) is refused
            self.files.check_estimator()
        self.restored_step = self.files.restored_step  # N of the global_step_N the anchor came from (None: fresh)

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        # other estimators record their options only: a resume under another estimator is then refused
        state = anchor_client.state_dict(self.hadw) if self.estimator == "hadw" else None
        self.files.on_checkpoint(global_step, self.hadw.state_key, state, checkpoint_dir)

"""``trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback`` (verl's v1 trainer; that path is a
one-line alias of this module, the one every shipped YAML and users' own name).

verl builds this callback in its driver inside ``PPOTrainer.__init__``, before the workers start and before
it loads its own checkpoint. That makes the constructor the plugin's fail-fast point and its restore point:

1. validate ``algorithm.hadw`` / ``algorithm.dgpo`` and check that ``algorithm.adv_estimator`` is registered
   (``validation``);
2. build the HA-DW anchor's client with the v1 persistence back-end (``anchor.checkpoint_files``), which
   restores the anchor from the ``global_step_N`` folder verl resumes from.

``on_save`` hands the anchor to that back-end, which writes it into each ``global_step_N`` folder atomically;
under another estimator (``dgpo``) the file records the run's options only, and a resume checks them: switching
estimator on resume is refused (``anchor.compatibility``), as is resuming another estimator from an HA-DW checkpoint.
"""

from __future__ import annotations

from verl_hadw import verl_support

if not verl_support.has_checkpoint_callback():  # verl 0.9.0: no checkpoint_callback_class, no CheckpointCallback
    raise ImportError(
        f"verl_hadw.callback.HadwCheckpointCallback needs verl>={verl_support.CALLBACK_SINCE}: it is a verl "
        f"checkpoint callback (trainer.checkpoint_callback_class), which verl {verl_support.installed_verl()} does "
        "not have. On this verl remove "
        "trainer.checkpoint_callback_class from the config: the HA-DW anchor is saved and restored by per-step "
        "snapshots (<trainer.default_local_dir>/verl_hadw_anchor/step_N.json) and the config is checked at the "
        "first estimator call."
    )

from verl.trainer.ppo.checkpoint_callback import CheckpointCallback  # noqa: E402

from verl_hadw.verl_adapter import metrics  # noqa: E402
from verl_hadw.verl_adapter.anchor_home import anchor_client as anchor_client  # noqa: E402
from verl_hadw.verl_adapter.anchor_home.checkpoint_files import CheckpointFiles  # noqa: E402
from verl_hadw.verl_adapter.validation import validated_options  # noqa: E402

__all__ = ["HadwCheckpointCallback"]


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

    @property
    def restored_step(self) -> int | None:
        """N of the ``global_step_N`` the anchor was restored from (None: a fresh anchor)."""
        return self.files.restored_step

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        # the anchor's current state, through the back-end it was restored with; other estimators record their
        # options only, so that a resume under another estimator is told what the checkpoint was trained with
        state = anchor_client.state_dict(self.hadw) if self.estimator == "hadw" else None
        self.files.on_checkpoint(global_step, self.hadw.state_key, state, checkpoint_dir)

"""``trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback`` (verl's v1 trainer).

verl builds this callback in its driver inside ``PPOTrainer.__init__``, before the workers start and before
it loads its own checkpoint. That makes the constructor the plugin's fail-fast point and its restore point:

1. validate ``algorithm.hadw`` / ``algorithm.dgpo`` and check that ``algorithm.adv_estimator`` is registered
   (verl hides plugin import errors and only looks the estimator up at the first training step);
2. resolve the resume directory exactly as verl's ``_load_checkpoint`` does and restore the anchor from
   ``global_step_N/verl_hadw_anchor.json`` into its Ray actor, checking the saved step against N.

``on_save`` writes the anchor state atomically (temp file + rename) into each ``global_step_N`` directory.
"""

from __future__ import annotations

import json
import logging
import os

from verl.trainer.ppo.checkpoint_callback import CheckpointCallback

from verl_hadw import anchor_client, metrics
from verl_hadw.options import ConfigError, parse_dgpo, parse_hadw

__all__ = ["HadwCheckpointCallback", "STATE_FILE", "resolve_resume_dir", "validate_config"]

logger = logging.getLogger(__name__)

STATE_FILE = "verl_hadw_anchor.json"


def resolve_resume_dir(trainer_config) -> str | None:
    """The ``global_step_N`` folder verl's v1 ``_load_checkpoint`` will resume from, or None (fresh start)."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    mode = trainer_config.get("resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "auto":
        folder = trainer_config.default_local_dir
        if not os.path.isabs(folder):
            folder = os.path.join(os.getcwd(), folder)
        return find_latest_ckpt_path(folder)
    if mode == "resume_path":
        path = trainer_config.get("resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:
            raise ConfigError(f"trainer.resume_from_path must name a global_step_N folder, got {path!r}")
        return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    raise ConfigError(f"trainer.resume_mode={mode!r} is not valid; choose one of: auto, disable, resume_path")


def validate_config(config) -> str:
    """Parse both option nodes and check the estimator is registered; returns ``algorithm.adv_estimator``."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import verl_hadw.register  # noqa: F401  (registers even where the entry point was disabled or failed)

    algorithm = config.algorithm
    parse_hadw(algorithm)
    parse_dgpo(algorithm)
    estimator = algorithm.get("adv_estimator", "gae")
    try:
        get_adv_estimator_fn(estimator)
    except ValueError as exc:
        raise ConfigError(f"algorithm.adv_estimator={estimator!r} is not a registered estimator ({exc})") from exc
    return estimator


def _step_of(folder: str) -> int:
    return int(os.path.basename(os.path.normpath(folder)).split("global_step_")[-1])


class HadwCheckpointCallback(CheckpointCallback):
    """Validates the config, restores the HA-DW anchor on resume, and saves it with every verl checkpoint."""

    def __init__(self, config=None):
        super().__init__(config)
        self.estimator = validate_config(config)
        self.hadw = parse_hadw(config.algorithm)
        metrics.enable(self.hadw.log_metrics)
        self.restored_step: int | None = None
        if self.estimator == "hadw":
            self._restore(resolve_resume_dir(config.trainer))

    def _restore(self, folder: str | None) -> None:
        if folder is None:
            anchor_client.restore(self.hadw, None)  # fresh run: an explicit start
            return
        step = _step_of(folder)
        path = os.path.join(folder, STATE_FILE)
        if not os.path.exists(path):
            message = (
                f"resuming from {folder} but it holds no HA-DW anchor ({STATE_FILE}): that checkpoint was not "
                "written with trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback. "
                "Resume from a checkpoint that has it, or set +algorithm.hadw.allow_missing_state=true to "
                "continue with a fresh anchor."
            )
            if not self.hadw.allow_missing_state:
                raise anchor_client.MissingAnchorStateError(message)
            logger.warning(f"{message} (allow_missing_state=true: continuing with a fresh anchor)")
            anchor_client.restore(self.hadw, None)
            return
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        if saved["global_step"] != step or saved["state"]["open_step"] not in (None, step):
            raise anchor_client.MissingAnchorStateError(
                f"{path} belongs to step {saved['global_step']} (anchor step {saved['state']['open_step']}) but verl "
                f"resumes from step {step}: the file was copied from another checkpoint"
            )
        if saved["state_key"] != self.hadw.state_key:
            logger.warning(f"restoring anchor '{saved['state_key']}' as algorithm.hadw.state_key='{self.hadw.state_key}'")
        anchor_client.restore(self.hadw, saved["state"])
        self.restored_step = step
        logger.info(f"HA-DW anchor restored from {path} (step {step})")

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        if self.estimator != "hadw":
            return
        state = anchor_client.state_dict(self.hadw)
        if state["open_step"] not in (None, global_step):
            logger.warning(f"saving anchor at verl step {global_step} but the anchor's last step is {state['open_step']}")
        payload = {"global_step": global_step, "state_key": self.hadw.state_key, "state": state}
        os.makedirs(checkpoint_dir, exist_ok=True)
        path = os.path.join(checkpoint_dir, STATE_FILE)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

"""The v1 back-end: the anchor in every verl checkpoint folder, ``global_step_N/verl_hadw_anchor.json``.

The checkpoint callback builds the anchor client with this back-end in verl's driver, before verl loads its
own checkpoint: ``load`` resolves the resume folder exactly as verl does and restores the anchor, checking its
step against N; ``on_checkpoint`` (verl's ``on_save``) writes the file atomically. A missing or damaged file
ends in one error naming the file, the problem and the ways out (an earlier valid checkpoint,
``allow_missing_state``).

verl's v1 trainer calls ``on_save`` last: after it has written ``global_step_N``, removed older checkpoints' weights
(``max_actor_ckpt_to_keep``) and named N in its tracker file. A kill in between would leave the checkpoint verl
resumes from without its anchor, and, with one checkpoint kept, none that has one. So when verl saves checkpoints
(``trainer.save_freq > 0``) the anchor is also staged after each step's observation, before verl's save begins
(``after_step``: ``<default_local_dir>/verl_hadw_anchor/step_N.json``, the legacy back-end's snapshot, its checks
and its guard against an older run's file); ``load`` reads the staged file of step N where ``global_step_N`` has
none, and ``on_checkpoint`` removes the staged files its folder now holds.
"""

from __future__ import annotations

import logging
import os

from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint, step_of
from verl_hadw.core.anchor.compatibility import ADV_ESTIMATOR
from verl_hadw.core.anchor.file_format import STATE_FILE, payload, read_state_file, write_state_file
from verl_hadw.core.anchor.resume import check_saved_options, continue_under, resumable, warn_unrecorded_checkpoint
from verl_hadw.core.errors import AnchorFileError, MissingAnchorStateError
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl_adapter.anchor_home.anchor_persistence import Persistence
from verl_hadw.verl_adapter.anchor_home.legacy_snapshots import LegacySnapshots
from verl_hadw.verl_adapter.anchor_home.resume_dir import resolve_resume_dir
from verl_hadw.verl_adapter.verl_terms import ALLOW_MISSING_STATE, CALLBACK_OVERRIDE, VERL

__all__ = ["CheckpointFiles"]

logger = logging.getLogger(__name__)


class CheckpointFiles(Persistence):
    """``trainer_config``: verl's ``trainer`` node (``resume_mode``, ``default_local_dir``, ``resume_from_path``);
    ``options``: the run's options (``RunOptions.flat``), which every file records and a resume compares."""

    handles_resume = True
    saves_into_checkpoints = True

    def __init__(self, trainer_config, options: dict):
        self.trainer_config = trainer_config
        self.options = options
        self.restored_step: int | None = None  # N of the global_step_N the anchor came from
        self.staging = staging(trainer_config, options)  # None: verl saves no checkpoints (save_freq <= 0)

    def load(self, cfg: HadwConfig, step: int | None = None) -> dict | None:
        folder = resolve_resume_dir(self.trainer_config)
        self.first_step = 1 if folder is None else step_of(folder) + 1  # verl's first step, restored or not
        if folder is None:
            return None  # fresh run: an explicit start
        path = os.path.join(folder, STATE_FILE)
        staged = self._staged(folder) if not os.path.lexists(path) else None
        if staged is not None:  # verl's save was cut off after its tracker named this folder, before on_save
            saved = self.staging.read(staged, step_of(folder), folder)
            logger.warning(f"{folder} holds no HA-DW anchor file (verl's save was cut off between its tracker file "
                           f"and on_save): restored from the anchor staged before that save, {staged}")
            state = continue_under(saved, cfg, self.options, staged, VERL,
                                   earlier=lambda: self._way_back(folder, True))
            self.restored_step = step_of(folder)
            return state
        if not os.path.lexists(path):  # a dangling or looping link is there: read below, "cannot be read"
            return self._missing(
                cfg,
                folder,
                f"resuming from {folder} but it holds no HA-DW anchor ({STATE_FILE}): that checkpoint was not "
                f"written with {CALLBACK_OVERRIDE}",
                MissingAnchorStateError,
            )
        try:
            saved, problem = read_state_file(path, step_of(folder), VERL), None
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:  # raised outside the except: one error, not a chain ending in a JSONDecodeError
            return self._missing(cfg, folder, f"cannot restore the HA-DW anchor: {path} {problem}", AnchorFileError)
        state = continue_under(saved, cfg, self.options, path, VERL, earlier=lambda: self._way_back(folder, True))
        self.restored_step = step_of(folder)
        logger.info(f"HA-DW anchor restored from {path} (step {self.restored_step})")
        return state

    def _missing(self, cfg: HadwConfig, folder: str, message: str, error: type[MissingAnchorStateError]) -> None:
        """``message`` plus the ways out: an earlier valid checkpoint, or a fresh anchor."""
        earlier = earlier_valid_checkpoint(folder)
        where = (
            f"{earlier}, the newest earlier checkpoint with a valid anchor file (trainer.resume_mode=resume_path "
            f"trainer.resume_from_path={earlier})"
            if earlier
            else f"an earlier global_step_N folder whose {STATE_FILE} is valid (none found beside {folder})"
        )
        self.missing(cfg, f"{message}. Ways out: resume from {where}; or {ALLOW_MISSING_STATE}.", error)

    def check_estimator(self) -> None:
        """For a run without an anchor (another estimator): the checkpoint it resumes from must not have been
        trained under another estimator (e.g. HA-DW, whose anchor it would drop). Its file (an anchor, or the
        options-only file such a run writes) goes through the resume rules; without one there is nothing to check."""
        folder = resolve_resume_dir(self.trainer_config)
        path = None if folder is None else os.path.join(folder, STATE_FILE)
        if path is None:
            return
        if not os.path.lexists(path):  # nothing recorded: said for DGPO (verl's own estimators are verl's business)
            if self.options.get(ADV_ESTIMATOR) == "dgpo":
                warn_unrecorded_checkpoint(folder, VERL)
            return
        try:
            saved, problem = read_state_file(path, step_of(folder), VERL), None
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:
            raise AnchorFileError(
                f"cannot tell which estimator {folder} was trained with: {path} {problem}. Ways out: resume from "
                f"another checkpoint (trainer.resume_mode=resume_path), or move {path} away if it is not this run's."
            )
        check_saved_options(saved, self.options, path, VERL, earlier=lambda: self._way_back(folder, False))

    def _way_back(self, folder: str, anchor: bool) -> str | None:
        """The newest earlier ``global_step_K`` this run continues without a refusal, with verl's overrides."""
        earlier = earlier_valid_checkpoint(folder, accepts=lambda saved: resumable(saved, self.options, anchor))
        return earlier and f"{earlier} (trainer.resume_mode=resume_path trainer.resume_from_path={earlier})"

    def _staged(self, folder: str) -> str | None:
        """The anchor staged for ``folder``'s step beside it, if there is one (``after_step``)."""
        if self.staging is None:
            return None
        path = self.staging.snapshot_path(step_of(folder), os.path.dirname(os.path.normpath(folder)))
        return path if os.path.lexists(path) else None

    def after_step(self, step: int, key: str, state: dict) -> None:
        """Stage the anchor after step ``step``'s observation, before verl's save of that step begins (when verl
        saves checkpoints)."""
        if self.staging is not None:
            self.staging.after_step(step, key, state)

    def on_checkpoint(self, step: int, key: str, state: dict | None, folder: str) -> None:
        """Write the anchor into ``folder``; ``state`` None: a run without an anchor records its options only. The
        staged files of this step and earlier ones are then no longer needed."""
        if state is None:
            write_state_file(os.path.join(folder, STATE_FILE), payload(step, key, None, self.options), VERL)
            return
        if state["open_step"] not in (None, step):
            logger.warning(f"saving anchor at verl step {step} but the anchor's last step is {state['open_step']}")
        write_state_file(os.path.join(folder, STATE_FILE), payload(step, key, state, self.options), VERL)
        if self.staging is not None:
            self.staging.remove_through(step)


def staging(trainer_config, options: dict) -> LegacySnapshots | None:
    """Where the v1 back-end stages the anchor before verl's save (the legacy back-end's snapshots), or None where
    verl saves no checkpoints or the trainer node has no ``default_local_dir``."""
    get = getattr(trainer_config, "get", None)
    local_dir = get("default_local_dir") if get else None
    save_freq = get("save_freq", -1) if get else -1
    if not isinstance(local_dir, str) or not isinstance(save_freq, int) or save_freq <= 0:
        return None
    return LegacySnapshots(
        local_dir=local_dir if os.path.isabs(local_dir) else os.path.join(os.getcwd(), local_dir),
        resume_mode=str(get("resume_mode", "auto")), resume_from_path=get("resume_from_path"), save_freq=save_freq,
        options=options, trainer="verl's v1 trainer")

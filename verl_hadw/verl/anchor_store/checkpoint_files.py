"""The v1 back-end: the anchor in every verl checkpoint folder, ``global_step_N/verl_hadw_anchor.json``, also staged
after each step (``after_step``) so that a kill before ``on_save`` loses none; and the record of which estimator
trained a checkpoint, checked when a run without an anchor (``dgpo``) resumes."""

from __future__ import annotations

import logging
import os

from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint, step_of
from verl_hadw.core.anchor.compatibility import ADV_ESTIMATOR
from verl_hadw.core.anchor.file_format import STATE_FILE, payload, read_state_file, write_state_file
from verl_hadw.core.anchor.resume import check_recorded_options, continue_under, resumable
from verl_hadw.core.errors import AnchorFileError, MissingAnchorStateError
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl.anchor_store import legacy_snapshots
from verl_hadw.verl.anchor_store.persistence import Persistence, resolve_resume_dir
from verl_hadw.verl.config.run_options import CallConfig
from verl_hadw.verl.process_state import PROCESS, trainer_run, trainer_step
from verl_hadw.verl.verl_terms import ALLOW_MISSING_STATE, CALLBACK_OVERRIDE, VERL

logger = logging.getLogger(__name__)


class CheckpointFiles(Persistence):
    """``trainer_config``: verl's ``trainer`` node; ``options``: ``RunOptions.flat``, which every file records."""

    handles_resume = True
    saves_into_checkpoints = True

    def __init__(self, trainer_config, options: dict):
        self.trainer_config, self.options = trainer_config, options
        self.restored_step: int | None = None  # N of the global_step_N the anchor came from
        save_freq = trainer_config.get("save_freq", -1) if hasattr(trainer_config, "get") else -1
        # where the anchor is staged before verl's save (the legacy back-end's snapshots); None: verl never saves
        self.staging = (legacy_snapshots.from_trainer(trainer_config, options, "verl's v1 trainer")
                        if isinstance(save_freq, int) and save_freq > 0 else None)

    def load(self, cfg: HadwConfig, step: int | None = None) -> dict | None:
        folder = resolve_resume_dir(self.trainer_config)
        self.first_step = 1 if folder is None else step_of(folder) + 1  # verl's first step, restored or not
        if folder is None:  # fresh run: an explicit start
            return None
        path = os.path.join(folder, STATE_FILE)
        staged = self._staged(folder) if not os.path.lexists(path) else None
        if staged is not None:  # verl's save was cut off after its tracker named this folder, before on_save
            saved, path = self.staging.read(staged, step_of(folder), folder), staged
            logger.warning(f"{folder} holds no HA-DW anchor file (verl's save was cut off before on_save): "
                           f"restored from the anchor staged before that save, {staged}")
        elif not os.path.lexists(path):  # a dangling or looping link is there: read below, "cannot be read"
            return self._missing(cfg, folder, f"resuming from {folder} but it holds no HA-DW anchor ({STATE_FILE}): "
                                 f"that checkpoint was not written with {CALLBACK_OVERRIDE}", MissingAnchorStateError)
        else:
            try:
                saved, problem = read_state_file(path, step_of(folder), VERL), None
            except ValueError as exc:
                problem = str(exc)
            if problem is not None:  # raised outside the except: one error, not a chain ending in a JSONDecodeError
                return self._missing(cfg, folder, f"cannot restore the HA-DW anchor: {path} {problem}", AnchorFileError)
            logger.info(f"HA-DW anchor restored from {path} (step {step_of(folder)})")
        state = continue_under(saved, cfg, self.options, path, VERL, earlier=lambda: self._way_back(folder, True))
        self.restored_step = step_of(folder)
        return state

    def _missing(self, cfg: HadwConfig, folder: str, message: str, error: type[MissingAnchorStateError]) -> None:
        """``message`` plus the ways out: an earlier valid checkpoint, or a fresh anchor."""
        earlier = earlier_valid_checkpoint(folder)
        where = (f"{earlier}, the newest earlier checkpoint with a valid anchor file (trainer.resume_mode=resume_path "
                 f"trainer.resume_from_path={earlier})" if earlier
                 else f"an earlier global_step_N folder whose {STATE_FILE} is valid (none found beside {folder})")
        self.missing(cfg, f"{message}. Ways out: resume from {where}; or {ALLOW_MISSING_STATE}.", error)

    def check_estimator(self) -> None:
        """Refuse a run without an anchor resumed from a checkpoint trained under another estimator (e.g. HA-DW)."""
        folder = resolve_resume_dir(self.trainer_config)
        if folder is not None:  # nothing recorded: said for DGPO (verl's own estimators are verl's business)
            check_recorded_options(folder, step_of(folder), self.options, VERL, lambda: self._way_back(folder, False),
                                   warn_unrecorded=self.options.get(ADV_ESTIMATOR) == "dgpo")

    def _way_back(self, folder: str, anchor: bool) -> str | None:
        """The newest earlier ``global_step_K`` this run continues without a refusal, with verl's overrides."""
        earlier = earlier_valid_checkpoint(folder, accepts=lambda saved: resumable(saved, self.options, anchor))
        return earlier and f"{earlier} (trainer.resume_mode=resume_path trainer.resume_from_path={earlier})"

    def _staged(self, folder: str) -> str | None:
        """The anchor staged for ``folder``'s step beside it, if there is one (``after_step``)."""
        path = self.staging and self.staging.snapshot_path(step_of(folder), os.path.dirname(os.path.normpath(folder)))
        return path if path and os.path.lexists(path) else None

    def after_step(self, step: int, key: str, state: dict) -> None:
        """Stage the anchor after step ``step``'s observation, before verl's save of that step."""
        if self.staging is not None:
            self.staging.after_step(step, key, state)

    def on_checkpoint(self, step: int, key: str, state: dict | None, folder: str) -> None:
        """Write the anchor (None: the options only) into ``folder``; drop the staged files up to this step."""
        if state is not None and state["open_step"] not in (None, step):
            logger.warning(f"saving anchor at verl step {step} but the anchor's last step is {state['open_step']}")
        write_state_file(os.path.join(folder, STATE_FILE), payload(step, key, state, self.options), VERL)
        if state is not None and self.staging is not None:
            self.staging.remove_through(step)


# ---------------------------------------------------------------------------- the estimator that trained a checkpoint
# Switching estimator on resume is refused. The v1 callback records and checks it itself; here, for dgpo without
# the callback: the legacy trainer and verl 0.9.0's v1 trainer write options-only snapshots, and verl >= 0.9.1's v1
# trainer without the callback checks the anchor file of the checkpoint it resumed from, when there is one.
def check_resumed_estimator(call: CallConfig) -> None:
    """At the first call of verl's ``fit()`` of an estimator without an anchor: ``check_estimator``."""
    step, fit = trainer_step(), trainer_run()
    if step is None or PROCESS.estimator_checked_run is fit:
        return
    snapshots = legacy_snapshots.from_call(call)
    if snapshots is not None:
        snapshots.check_estimator(call.run.hadw.state_key, step)
    elif step > 1 and call.trainer is not None:
        CheckpointFiles(call.trainer, call.run.flat()).check_estimator()
    PROCESS.estimator_checked_run = fit  # a refused run is checked again at its next call


def record_estimator(call: CallConfig) -> None:
    """After each call of an estimator without an anchor, without the callback: the step's options-only snapshot."""
    step = trainer_step()
    snapshots = None if step is None else legacy_snapshots.from_call(call)
    if snapshots is not None:
        snapshots.after_step(step, call.run.hadw.state_key, None)

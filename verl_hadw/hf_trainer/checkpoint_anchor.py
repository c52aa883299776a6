"""The HA-DW anchor of one HF-Trainer-based GRPO trainer, identical on every rank, and its checkpoint file
``checkpoint-N/verl_hadw_anchor.json`` (verl's format), read on resume through the core's resume rules."""

from __future__ import annotations

import copy
import logging
import os
import re
import warnings

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint
from verl_hadw.core.anchor.file_format import STATE_FILE, payload, read_json, read_state_file, write_state_file
from verl_hadw.core.anchor.machine import AnchorState, AnchorView
from verl_hadw.core.anchor.resume import check_recorded_options, continue_under, missing_anchor, resumable
from verl_hadw.core.errors import AnchorFileError, PartialCheckpointError, frozen_anchor_message
from verl_hadw.core.options import HadwConfig
from verl_hadw.core.terms import Terms

__all__ = ["TrainerAnchor", "OptionsRecord", "resumed_step", "newest_whole_checkpoint", "trainer_step"]

logger = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.json"  # transformers' TRAINER_STATE_NAME: the last file of the Trainer's save


def trainer_step(folder: str) -> int:
    """The optimizer step an HF Trainer resumes ``folder`` at; ValueError saying what is wrong with the folder."""
    path = os.path.join(folder, TRAINER_STATE)
    if not os.path.isdir(folder):  # e.g. swift's last-checkpoint link, its target removed
        target = f"it is a link to {os.readlink(folder)!r}, which" if os.path.islink(folder) else "it"
        raise ValueError(f"{target} is not a folder" if os.path.exists(folder) else f"{target} does not exist")
    if not os.path.lexists(path):  # a broken link is read below, and named as one
        raise ValueError(f"it holds no {TRAINER_STATE}")
    try:
        return int(read_json(path)["global_step"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read the step it resumes at from {path} ({exc})") from None


def whole_trainer_files(folder: str, step: int) -> bool:
    """Whether the Trainer's save of ``checkpoint-<step>`` ran to its last file, ``trainer_state.json``."""
    try:
        return trainer_step(folder) == step
    except ValueError:
        return False


def newest_whole_checkpoint(folder: str) -> str | None:
    """The newest whole ``checkpoint-K`` (Trainer files and anchor file) beside ``folder``, K below its number."""
    name = os.path.basename(os.path.realpath(folder))
    number = name[len(PREFIX_CHECKPOINT_DIR) + 1:]
    numbered = name.startswith(f"{PREFIX_CHECKPOINT_DIR}-") and number.isdigit() and os.path.isdir(folder)
    step = int(number) if numbered else 1 << 62  # a link to a removed folder: any checkpoint beside it
    return earlier_valid_checkpoint(folder, step, prefix=f"{PREFIX_CHECKPOINT_DIR}-", needs=None,
                                    accepts=lambda saved: True, whole=whole_trainer_files)


def resumed_step(folder: str, terms: Terms) -> int:
    """The optimizer step the Trainer resumes ``folder`` at; ``PartialCheckpointError`` saying what is there instead."""
    try:
        return trainer_step(folder)
    except ValueError as exc:
        problem = str(exc)
    folder_there, prefix = os.path.isdir(folder), f"{PREFIX_CHECKPOINT_DIR}-"
    run = folder_there and any(n.startswith(prefix) for n in os.listdir(folder))  # a run's output folder
    whole, where = newest_whole_checkpoint(os.path.join(folder, prefix) if run else folder), "in" if run else "beside"
    why = next(text for found, text in (  # the first true: what is there instead of a checkpoint
        (not os.path.lexists(folder), "the path is mistyped, or the checkpoint was removed since"),
        (not os.path.exists(folder), "the checkpoint it pointed to was removed (e.g. by the checkpoint limit)"),
        (run or not folder_there, f"it is {'a run folder' if run else 'a file'}, not a {terms.framework} {prefix}N"),
        (re.fullmatch(rf"{prefix}\d+", os.path.basename(os.path.normpath(folder))), f"{terms.framework} writes "
         f"{TRAINER_STATE} last, after the weights, the optimizer and the RNG states: its save was cut off (a partial "
         "checkpoint)"), (True, f"it is not a {terms.framework} checkpoint (a {prefix}N folder it saved)")) if found)
    way = f"no whole checkpoint is {where} it: {terms.new_experiment}"
    if whole:
        way = f"{terms.resume_elsewhere}: {whole} is the newest whole checkpoint {where} it"
        if folder_there and not run:
            way += f"; or move {folder} away, so that a resume from the newest checkpoint finds {whole}"
    raise PartialCheckpointError(f"cannot resume from {folder}: {problem}. {why}. Ways out: {way}.")


def way_back(checkpoint: str, step: int, options: dict, anchor: bool) -> str | None:
    """The newest earlier whole ``checkpoint-K`` beside ``checkpoint`` that a run with ``options`` can resume."""
    return earlier_valid_checkpoint(checkpoint, step, prefix=f"{PREFIX_CHECKPOINT_DIR}-", needs=None,
                                    accepts=lambda saved: resumable(saved, options, anchor), whole=whole_trainer_files)


class TrainerAnchor:
    """One trainer's anchor; ``options`` (verl's flat keys) are recorded in every file and compared on resume."""

    def __init__(self, cfg: HadwConfig, options: dict, terms: Terms):
        self.cfg, self.options, self.terms = cfg, options, terms
        self.start(None)

    def start(self, checkpoint: str | None) -> None:
        """A ``train()`` begins: a fresh anchor, or the one saved in the checkpoint folder it resumes from."""
        self.state, self._last, self.restored_from = AnchorState(config=self.cfg.anchor), (None, -1), None
        step = resumed_step(checkpoint, self.terms) if checkpoint is not None else None
        if not step:
            return
        path = os.path.join(checkpoint, STATE_FILE)
        saved = self._read(checkpoint, path, step)
        if saved is not None:
            state = continue_under(saved, self.cfg, self.options, path, self.terms,
                                   earlier=lambda: way_back(checkpoint, step, self.options, anchor=True))
            self.state, self.restored_from = AnchorState.from_dict(state, self.cfg.anchor), path
            logger.info(f"HA-DW anchor restored from {path} (step {step})")

    def _read(self, checkpoint: str, path: str, step: int) -> dict | None:
        if not os.path.lexists(path):  # a dangling or looping link is there: read below, "cannot be read"
            problem, error = f"resuming from {checkpoint} but it holds no HA-DW anchor ({STATE_FILE})", None
        else:
            try:
                return read_state_file(path, step, self.terms)
            except ValueError as exc:
                problem, error = f"cannot restore the HA-DW anchor: {path} {exc}", AnchorFileError
        earlier = earlier_valid_checkpoint(checkpoint, step, prefix=f"{PREFIX_CHECKPOINT_DIR}-", needs=None,
                                           whole=whole_trainer_files)
        where = f"{earlier}, the newest earlier checkpoint with a valid anchor file" if earlier else (
            f"an earlier {PREFIX_CHECKPOINT_DIR}-K folder whose {STATE_FILE} is valid (none found beside {checkpoint})")
        message = f"{problem}. Ways out: resume from {where}; or {self.terms.allow_missing_state}."
        missing_anchor(self.cfg, message, self.terms, *([error] if error else []))
        return None

    def _call(self, step: int) -> int:
        return self._last[1] + 1 if self._last[0] == step else 0

    def peek(self, step: int, correct: float, count: int) -> AnchorView:
        """The view ``observe(step, correct, count)`` would return, leaving the anchor as it is (checked first)."""
        return copy.deepcopy(self.state).observe(step, self._call(step), correct, count)

    def observe(self, step: int, correct: float, count: int) -> AnchorView:
        """Add one generation batch's Σ accuracy and count at optimizer step ``step``; returns the view."""
        call = self._call(step)
        view = self.state.observe(step, call, correct, count)
        self._last = (step, call)
        if view.warn:
            message = frozen_anchor_message(self.cfg.anchor.window, view.posterior, view.batch_acc, self.terms.key)
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        return view

    def preview(self, correct: float, count: int) -> AnchorView:
        """The view a training batch with these counts would get now, leaving the anchor as it is (evaluation)."""
        return copy.deepcopy(self.state).observe((self.state.open_step or 0) + 1, 0, correct, count)

    def save(self, folder: str, step: int) -> None:
        """Write the anchor into the checkpoint folder of optimizer step ``step`` (atomically)."""
        state = self.state.to_dict()
        if state["open_step"] is not None:
            # still trained at step N: filed under N, the step a resume compares; the next generation commits it
            state["open_step"] = step
        write_state_file(os.path.join(folder, STATE_FILE), payload(step, self.cfg.state_key, state, self.options),
                         self.terms)


class OptionsRecord:
    """A run without an anchor (DGPO): each checkpoint records its options (``state: null``), checked on resume."""

    def __init__(self, key: str, options: dict, terms: Terms):
        self.key, self.options, self.terms = key, options, terms

    def start(self, checkpoint: str | None) -> None:
        step = resumed_step(checkpoint, self.terms) if checkpoint is not None else None
        if step:  # else a fresh start
            check_recorded_options(checkpoint, step, self.options, self.terms,
                                   lambda: way_back(checkpoint, step, self.options, anchor=False))

    def save(self, folder: str, step: int) -> None:
        write_state_file(os.path.join(folder, STATE_FILE), payload(step, self.key, None, self.options), self.terms)

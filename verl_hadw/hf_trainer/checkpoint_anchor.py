"""The HA-DW anchor of one HF-Trainer-based GRPO trainer (TRL's, ms-swift's): the pure ``AnchorState`` on every
rank, its steps, its checkpoint file.

Both frameworks gather every process's rewards before they compute advantages, so every rank observes the same
counts in the same order and holds an identical ``AnchorState``: no actor, no communication. The anchor observes
each generation batch once (a generation's advantages are reused over ``num_iterations`` ×
``steps_per_generation`` micro-steps without calling the advantage code again). A generation's step is the
optimizer step it first trains (``state.global_step + 1``); generation batches inside one optimizer step
(``steps_per_generation < gradient_accumulation_steps``) are calls of that step and share its prior, as verl's
mini-batch calls do.

Persistence reuses verl's v1 files and rules: ``checkpoint-N/verl_hadw_anchor.json`` (``anchor.file_format``),
written by the saving process in ``AnchorCheckpointCallback.on_save``; a resume reads it through the same checks
(``read_state_file``) and the same resume rules (``resume.continue_under``: a changed meaning refuses, a changed
tuning warns), a missing or damaged file is an error unless ``hadw_allow_missing_state``. The core composes their
messages in the framework's words (the ``Terms`` each object is given: TRL's fields, swift's flags).
"""

from __future__ import annotations

import copy
import logging
import os
import warnings

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint
from verl_hadw.core.anchor.file_format import (
    STATE_FILE,
    payload,
    read_bounded,
    read_json,
    read_state_file,
    write_state_file,
)
from verl_hadw.core.anchor.machine import AnchorState, AnchorView
from verl_hadw.core.anchor.resume import (
    check_saved_options,
    continue_under,
    missing_anchor,
    resumable,
    warn_unrecorded_checkpoint,
)
from verl_hadw.core.errors import AnchorFileError, AnchorSaveError, frozen_anchor_message
from verl_hadw.core.options import HadwConfig
from verl_hadw.core.terms import Terms

__all__ = ["TrainerAnchor", "OptionsRecord", "AnchorCheckpointCallback", "checkpoint_step"]

logger = logging.getLogger(__name__)


def checkpoint_step(folder: str, framework: str) -> int | None:
    """The optimizer step ``framework`` (an HF Trainer) resumes from ``folder`` at: its ``trainer_state.json``'s
    global_step, or None without one (the Trainer then loads the weights only and counts from step 0: a new run,
    with a fresh anchor)."""
    path = os.path.join(folder, "trainer_state.json")
    if not os.path.lexists(path):  # a broken link is read below, and named as one
        if os.path.lexists(os.path.join(folder, STATE_FILE)):
            logger.warning(f"{folder} has an HA-DW anchor file but no trainer_state.json: {framework} restarts at "
                           "step 0 with its weights only, and so does the anchor (fresh)")
        return None
    try:  # bounded, regular files only: as the anchor file (a FIFO or /dev/zero would hang or never end)
        return int(read_json(read_bounded(path))["global_step"])
    except (ValueError, KeyError, TypeError) as exc:
        raise AnchorFileError(f"cannot read the step {framework} resumes {folder} at from {path} ({exc})") from None


def way_back(checkpoint: str, step: int, options: dict, anchor: bool) -> str | None:
    """The newest earlier ``checkpoint-K`` beside ``checkpoint`` whose file a run with ``options`` (``anchor``: an
    HA-DW run) continues without a refusal: the way back a refused resume names."""
    return earlier_valid_checkpoint(checkpoint, step, prefix=f"{PREFIX_CHECKPOINT_DIR}-", needs=None,
                                    accepts=lambda saved: resumable(saved, options, anchor))


class TrainerAnchor:
    """One trainer's anchor (every rank holds an equal one). ``options``: the run's options as verl's flat keys
    (``OptionFields.recorded_options``), recorded in every file and compared on resume; ``terms``: the framework's
    words."""

    def __init__(self, cfg: HadwConfig, options: dict, terms: Terms):
        self.cfg, self.options, self.terms = cfg, options, terms
        self.start(None)

    def start(self, checkpoint: str | None) -> None:
        """A ``train()`` begins: a fresh anchor, or the one saved in the checkpoint folder it resumes from."""
        self.state, self._last, self.restored_from = AnchorState(config=self.cfg.anchor), (None, -1), None
        step = checkpoint_step(checkpoint, self.terms.framework) if checkpoint is not None else None
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
        earlier = earlier_valid_checkpoint(checkpoint, step, prefix=f"{PREFIX_CHECKPOINT_DIR}-", needs=None)
        where = f"{earlier}, the newest earlier checkpoint with a valid anchor file" if earlier else (
            f"an earlier {PREFIX_CHECKPOINT_DIR}-K folder whose {STATE_FILE} is valid (none found beside {checkpoint})")
        message = f"{problem}. Ways out: resume from {where}; or {self.terms.allow_missing_state}."
        missing_anchor(self.cfg, message, self.terms, *([error] if error else []))
        return None

    def peek(self, step: int, correct: float, count: int) -> AnchorView:
        """The view ``observe(step, correct, count)`` would return, leaving the anchor as it is (checked first)."""
        call = self._last[1] + 1 if self._last[0] == step else 0
        return copy.deepcopy(self.state).observe(step, call, correct, count)

    def observe(self, step: int, correct: float, count: int) -> AnchorView:
        """Add one generation batch's Σ accuracy and count at optimizer step ``step``; returns the view."""
        call = self._last[1] + 1 if self._last[0] == step else 0
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
            # The open generation is still being trained at step N (num_iterations / steps_per_generation reuse it),
            # so the file files it under N, the step the resume check compares. Step numbers only order calls: the
            # next generation (step >= N + 1) commits it exactly as the uninterrupted run does.
            state["open_step"] = step
        write_state_file(os.path.join(folder, STATE_FILE), payload(step, self.cfg.state_key, state, self.options),
                         self.terms)


class OptionsRecord:
    """A run without an anchor (``adv_estimator="dgpo"``): each checkpoint records its options (an anchor file
    with ``state: null``), and a resume checks the checkpoint's: one trained under HA-DW (or another method) is
    refused by the resume rules, as it is in verl."""

    def __init__(self, key: str, options: dict, terms: Terms):
        self.key, self.options, self.terms = key, options, terms

    def start(self, checkpoint: str | None) -> None:
        step = checkpoint_step(checkpoint, self.terms.framework) if checkpoint is not None else None
        path = None if not step else os.path.join(checkpoint, STATE_FILE)
        if path is None:
            return  # a fresh start
        if not os.path.lexists(path):  # a checkpoint that records nothing to compare: said
            warn_unrecorded_checkpoint(checkpoint, self.terms)
            return
        try:
            saved = read_state_file(path, step, self.terms)
        except ValueError as exc:
            raise AnchorFileError(
                f"cannot tell which estimator {checkpoint} was trained with: {path} {exc}. Ways "
                f"out: resume from another checkpoint, or move {path} away if it is not this run's."
            ) from None
        check_saved_options(saved, self.options, path, self.terms,
                            earlier=lambda: way_back(checkpoint, step, self.options, anchor=False))

    def save(self, folder: str, step: int) -> None:
        write_state_file(os.path.join(folder, STATE_FILE), payload(step, self.key, None, self.options), self.terms)


class AnchorCheckpointCallback(TrainerCallback):
    """Writes the anchor (or, without one, the run's options: ``OptionsRecord``) into every ``checkpoint-N`` folder
    the Trainer saves (the process that saves, ``should_save``)."""

    def __init__(self, anchor: TrainerAnchor | OptionsRecord):
        self.anchor = anchor

    def on_save(self, args, state, control, **kwargs):
        if not args.should_save:
            return
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if not os.path.isdir(folder):  # e.g. hyperparameter_search's run-* folders
            raise AnchorSaveError(
                f"{self.anchor.terms.framework} reported a checkpoint at step {state.global_step} but {folder} does "
                "not exist: the HA-DW anchor is saved into <output_dir>/checkpoint-N only (hyperparameter_search's run "
                "folders are not supported)"
            )
        self.anchor.save(folder, state.global_step)

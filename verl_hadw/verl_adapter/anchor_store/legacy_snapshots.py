"""The snapshot back-end: the anchor across restarts of a verl trainer without a checkpoint hook.

Two trainers have none: verl's legacy trainer (``trainer.use_v1=false``), and verl 0.9.0's v1 trainer (the
hook, ``trainer.checkpoint_callback_class``, came with verl 0.9.1). Both call the estimator in their driver during
step N (``SkipManager.step == N``; once per step, or ``parameter_sync_step`` times in the v1 ``separate_async``
mode), *before* ``_save_checkpoint`` creates ``global_step_N/`` and updates ``latest_checkpointed_iteration.txt``;
nothing after the step's last call changes the anchor within step N. So the client saves the anchor after every
observation (``after_step``), atomically, to ``<default_local_dir>/verl_hadw_anchor/step_N.json`` (the payload of
the v1 callback's file). A resumed process first reaches the estimator at step S = N + 1, where the client is
built: ``load`` then restores the snapshot of the ``global_step_N`` folder verl resumed from, found the way verl
finds it (verl 0.9.0's and 0.9.1's ``_load_checkpoint`` resolve it alike, in both trainers).

The trainer keys come from the ``trainer`` node the config package read beside the ``algorithm`` node verl passes
(``config.call_config.CallConfig``); ``from_call`` reads them when the estimator builds the client.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass, field

from omegaconf import OmegaConf

from verl_hadw import verl_support
from verl_hadw.core.anchor.checkpoint_dirs import step_of
from verl_hadw.core.anchor.file_format import STATE_FILE, payload, read_state_file, write_state_file
from verl_hadw.core.anchor.resume import check_saved_options, continue_under, resumable, warn_unrecorded_checkpoint
from verl_hadw.core.errors import AnchorFileError, MissingAnchorStateError
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl_adapter.anchor_home.anchor_persistence import Persistence
from verl_hadw.verl_adapter.anchor_home.resume_dir import resolve_resume_dir
from verl_hadw.verl_adapter.config.call_config import CallConfig
from verl_hadw.verl_adapter.verl_terms import ALLOW_MISSING_STATE, RESUME_ELSEWHERE, VERL

__all__ = ["LegacySnapshots", "from_call", "from_trainer", "snapshot_trainer", "SNAPSHOT_DIR"]

logger = logging.getLogger(__name__)

SNAPSHOT_DIR = "verl_hadw_anchor"
_SNAPSHOT = re.compile(r"step_(\d+)\.json(?:\.tmp\.\d+)?")


@dataclass(frozen=True)
class LegacySnapshots(Persistence):
    """Where a trainer without a checkpoint hook checkpoints (``trainer.*``), and the anchor snapshots beside its
    checkpoints."""

    local_dir: str  # trainer.default_local_dir, made absolute against the driver's cwd as verl does
    resume_mode: str
    resume_from_path: str | None
    save_freq: int
    options: dict = field(default_factory=dict, compare=False)  # the run's (RunOptions.flat)
    trainer: str = "the legacy trainer (trainer.use_v1=false)"  # whose checkpoints these are, for the messages

    handles_resume = True

    def snapshot_path(self, step: int, local_dir: str | None = None) -> str:
        return os.path.join(local_dir or self.local_dir, SNAPSHOT_DIR, f"step_{step}.json")

    # --------------------------------------------------------------------------------------------- save
    def after_step(self, step: int, key: str, state: dict) -> None:
        """Write the anchor after step ``step``'s observation; drop snapshots of steps verl never saved."""
        if self.save_freq <= 0:  # verl never checkpoints
            return
        snapshot = payload(step, key, state, self.options)
        data_pt = os.path.join(self.local_dir, f"global_step_{step}", "data.pt")
        if os.path.exists(data_pt):  # an older run's checkpoint of this step that verl is about to overwrite
            snapshot["replaces_data_pt_mtime_ns"] = os.stat(data_pt).st_mtime_ns
        write_state_file(self.snapshot_path(step), snapshot, VERL)
        self._prune(step)

    def remove_through(self, step: int) -> None:
        """Remove the snapshots of steps <= ``step`` (the v1 back-end: their checkpoint folders hold the anchor)."""
        folder = os.path.join(self.local_dir, SNAPSHOT_DIR)
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            match = _SNAPSHOT.fullmatch(name)
            if match is not None and int(match[1]) <= step:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(folder, name))

    def _prune(self, step: int) -> None:
        # verl saves synchronously inside step k, so a step k < N without global_step_k/ was never checkpointed
        # (its max_*_ckpt_to_keep removes only global_step_k/actor: a kept folder keeps its snapshot).
        folder = os.path.join(self.local_dir, SNAPSHOT_DIR)
        for name in os.listdir(folder):
            match = _SNAPSHOT.fullmatch(name)
            if match is None or int(match[1]) >= step:
                continue
            if not os.path.isdir(os.path.join(self.local_dir, f"global_step_{match[1]}")):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(folder, name))

    # --------------------------------------------------------------------------------------------- load
    def load(self, cfg: HadwConfig, step: int | None) -> dict | None:
        """The anchor state saved at step ``step - 1`` for the checkpoint verl resumed from (None: step 1, or
        outside a trainer).

        None when there is none and ``allow_missing_state`` (with a warning: a fresh anchor); otherwise a
        missing, mismatched or stale snapshot raises ``MissingAnchorStateError``.
        """
        if step is None or step <= 1:
            return None
        folder, candidates = self._resumed_from(cfg.state_key, step)
        for path in candidates:
            if os.path.lexists(path):  # a dangling or looping link is read, and named: not a missing snapshot
                return continue_under(self.read(path, step - 1, folder), cfg, self.options, path, VERL,
                                      earlier=lambda: self._way_back(folder, True))
        key, previous = cfg.state_key, step - 1
        message = (
            f"HA-DW anchor '{key}': {self.trainer} resumed at step {step} "
            + (f"from {folder}, but found no anchor snapshot for step {previous} "
               f"(looked for {' and '.join(candidates)})"
               if folder else f"but found no checkpoint folder (trainer.resume_mode={self.resume_mode!r}, "
               f"trainer.default_local_dir={self.local_dir})")
            + f". Under {self.trainer} the estimator writes it at every step when trainer.save_freq > 0; this "
            f"checkpoint was written without it. Resume from a checkpoint that has it, or {ALLOW_MISSING_STATE}."
        )
        self.missing(cfg, message)
        return None

    def _resumed_from(self, key: str, step: int) -> tuple[str | None, list[str]]:
        """The ``global_step_{step - 1}`` folder verl resumed from (None: none), and where its anchor may be: the
        snapshot this back-end wrote beside it, or a file inside it (a copied snapshot, or the v1 callback's)."""
        previous = step - 1
        trainer = {"resume_mode": self.resume_mode, "default_local_dir": self.local_dir}
        folder = resolve_resume_dir(OmegaConf.create({**trainer, "resume_from_path": self.resume_from_path}))
        if folder is not None and step_of(folder) != previous:
            raise MissingAnchorStateError(
                f"HA-DW anchor '{key}': verl's first training step in this process is {step}, but the checkpoint "
                f"trainer.resume_mode={self.resume_mode!r} points to is {folder} (step {step_of(folder)}): "
                "latest_checkpointed_iteration.txt changed after verl loaded its checkpoint. Give each run its own "
                "trainer.default_local_dir and restart."
            )
        candidates = [] if folder is None else [
            self.snapshot_path(previous, os.path.dirname(os.path.normpath(folder))),  # written by this back-end
            os.path.join(folder, STATE_FILE),  # a copied snapshot, or a checkpoint written by the v1 callback
        ]
        return folder, candidates

    def check_estimator(self, key: str, step: int) -> None:
        """For a run without an anchor (``dgpo``) resumed at ``step``: the checkpoint verl resumed from must not have
        been trained under another estimator (HA-DW, whose anchor it would drop). Its snapshot (an anchor, or the
        options-only one such a run writes) goes through the resume rules; without one there is nothing to check."""
        if step <= 1:
            return
        folder, candidates = self._resumed_from(key, step)
        for path in candidates:
            if os.path.lexists(path):
                check_saved_options(self.read(path, step - 1, folder), self.options, path, VERL,
                                    earlier=lambda: self._way_back(folder, False))
                return
        if folder is not None:  # nothing recorded: said
            warn_unrecorded_checkpoint(folder, VERL)

    def _way_back(self, folder: str, anchor: bool) -> str | None:
        """After a refused resume: the newest earlier ``global_step_K`` beside ``folder`` (one verl can resume: it has
        ``actor/``) whose snapshot this run continues without a refusal, with verl's overrides (``anchor``: this run
        keeps an HA-DW anchor)."""
        parent = os.path.dirname(os.path.normpath(folder))
        steps = (int(m[1]) for n in os.listdir(parent) if (m := re.fullmatch(r"global_step_(\d+)", n)))
        for k in sorted((k for k in steps if k < step_of(folder)), reverse=True):
            candidate = os.path.join(parent, f"global_step_{k}")
            if not os.path.isdir(os.path.join(candidate, "actor")):
                continue
            for path in (self.snapshot_path(k, parent), os.path.join(candidate, STATE_FILE)):
                try:
                    saved = read_state_file(path, k)
                except (ValueError, OSError):
                    continue
                if resumable(saved, self.options, anchor):
                    return f"{candidate} (trainer.resume_mode=resume_path trainer.resume_from_path={candidate})"
        return None

    @staticmethod
    def read(path: str, previous: int, folder: str) -> dict:
        """The checked payload of the snapshot ``path`` of step ``previous`` for the checkpoint ``folder``."""
        try:  # the v1 callback's checks: readable, complete, valid fields, the step verl resumes from
            saved = read_state_file(path, previous, VERL)
        except ValueError as exc:
            raise AnchorFileError(
                f"HA-DW anchor file {path} {exc} ({folder}). Ways out: {RESUME_ELSEWHERE}, or {ALLOW_MISSING_STATE}."
            ) from exc
        replaced = saved.get("replaces_data_pt_mtime_ns")
        data_pt = os.path.join(folder, "data.pt")
        if replaced is not None and os.path.exists(data_pt) and os.stat(data_pt).st_mtime_ns == replaced:
            raise MissingAnchorStateError(
                f"{path} was written by a later run that stopped before verl re-saved {folder}: that folder still "
                f"holds an older run's checkpoint, whose anchor was overwritten. Ways out: {RESUME_ELSEWHERE}, or "
                f"delete {path} and {ALLOW_MISSING_STATE}."
            )
        logger.info(f"HA-DW anchor restored from {path} (step {previous})")
        return saved


def snapshot_trainer(trainer) -> str | None:
    """Which trainer of ``trainer`` (verl's ``trainer`` node) saves the anchor by snapshots, in words (None: the
    v1 trainer of a verl with the checkpoint hook, where the callback saves it)."""
    if trainer.get("use_v1", True) is False:
        return "the legacy trainer (trainer.use_v1=false)"
    if not verl_support.has_checkpoint_callback():
        return f"verl {verl_support.installed_verl()}'s v1 trainer (no checkpoint callback before verl 0.9.1)"
    return None


def from_trainer(trainer, options: dict) -> LegacySnapshots | None:
    """The snapshot back-end of the trainer whose ``trainer`` node this is, recording ``options`` (the run's flat
    options, ``RunOptions.flat``), or None: no trainer node (a plain dict or a detached node, as in unit use), the v1
    trainer of a verl with the checkpoint hook (verl >= 0.9.1: the callback's files), or no ``default_local_dir``."""
    if trainer is None:
        return None
    who = snapshot_trainer(trainer)
    if who is None:
        return None
    local_dir = trainer.get("default_local_dir")
    if not isinstance(local_dir, str):
        return None
    return LegacySnapshots(
        local_dir=local_dir if os.path.isabs(local_dir) else os.path.join(os.getcwd(), local_dir),
        resume_mode=str(trainer.get("resume_mode", "auto")),
        resume_from_path=trainer.get("resume_from_path"),
        save_freq=int(trainer.get("save_freq", -1)),
        options=options,
        trainer=who,
    )


def from_call(call: CallConfig) -> LegacySnapshots | None:
    """``from_trainer`` of an estimator call's read (its trainer node and options)."""
    return from_trainer(call.trainer, call.run.flat())

"""The snapshot back-end, for verl trainers without a checkpoint hook (the legacy trainer, and verl 0.9.0's v1): the
anchor is written after every observation to ``<default_local_dir>/verl_hadw_anchor/step_N.json``, and a resumed
run's first call restores the snapshot of the ``global_step_N`` verl resumed from."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass, field

from omegaconf import OmegaConf

import verl_hadw.verl.support as support
from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint, step_of
from verl_hadw.core.anchor.file_format import STATE_FILE, payload, read_state_file, write_state_file
from verl_hadw.core.anchor.resume import check_saved_options, continue_under, resumable, warn_unrecorded_checkpoint
from verl_hadw.core.errors import AnchorFileError, MissingAnchorStateError
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl.anchor_store.persistence import Persistence, resolve_resume_dir
from verl_hadw.verl.config.run_options import CallConfig
from verl_hadw.verl.verl_terms import ALLOW_MISSING_STATE, RESUME_ELSEWHERE, VERL

logger = logging.getLogger(__name__)

SNAPSHOT_DIR = "verl_hadw_anchor"
_SNAPSHOT = re.compile(r"step_(\d+)\.json(?:\.tmp\.\d+)?")


@dataclass(frozen=True)
class LegacySnapshots(Persistence):
    """Where a trainer without a checkpoint hook checkpoints (``trainer.*``), and the anchor's snapshots beside."""

    local_dir: str  # trainer.default_local_dir, made absolute against the driver's cwd as verl does
    resume_mode: str
    resume_from_path: str | None
    save_freq: int
    options: dict = field(default_factory=dict, compare=False)  # the run's (RunOptions.flat)
    trainer: str = "the legacy trainer (trainer.use_v1=false)"  # whose checkpoints these are, for the messages

    handles_resume = True

    def snapshot_path(self, step: int, local_dir: str | None = None) -> str:
        return os.path.join(local_dir or self.local_dir, SNAPSHOT_DIR, f"step_{step}.json")

    def after_step(self, step: int, key: str, state: dict) -> None:
        """Write the anchor after step ``step``'s observation; drop snapshots of steps verl never saved."""
        if self.save_freq <= 0:  # verl never checkpoints
            return
        snapshot = payload(step, key, state, self.options)
        data_pt = os.path.join(self.local_dir, f"global_step_{step}", "data.pt")
        if os.path.exists(data_pt):  # an older run's checkpoint of this step that verl is about to overwrite
            snapshot["replaces_data_pt_mtime_ns"] = os.stat(data_pt).st_mtime_ns
        write_state_file(self.snapshot_path(step), snapshot, VERL)
        # verl internals (checked on verl 0.9.0, 0.9.1): it saves synchronously inside step k, so a step k < N without
        # global_step_k/ was never checkpointed (max_*_ckpt_to_keep removes only global_step_k/actor: a kept folder
        # keeps its snapshot); global_step_k/data.pt is the trainer's own file
        self._remove(lambda k: k < step and not os.path.isdir(os.path.join(self.local_dir, f"global_step_{k}")))

    def remove_through(self, step: int) -> None:
        """Remove the snapshots of steps <= ``step`` (the v1 back-end: their checkpoint folders hold the anchor)."""
        self._remove(lambda k: k <= step)

    def _remove(self, drop) -> None:
        folder = os.path.join(self.local_dir, SNAPSHOT_DIR)
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if (match := _SNAPSHOT.fullmatch(name)) is not None and drop(int(match[1])):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(folder, name))

    def load(self, cfg: HadwConfig, step: int | None) -> dict | None:
        """The anchor saved at step ``step - 1`` for the checkpoint verl resumed from (None: a fresh anchor)."""
        if step is None or step <= 1:
            return None
        folder, candidates, path = self._resumed_from(cfg.state_key, step)
        if path is not None:
            return continue_under(self.read(path, step - 1, folder), cfg, self.options, path, VERL,
                                  earlier=lambda: self._way_back(folder, True))
        found = (f"from {folder}, but found no anchor snapshot for step {step - 1} (looked for "
                 f"{' and '.join(candidates)})" if folder else "but found no checkpoint folder (trainer.resume_mode="
                 f"{self.resume_mode!r}, trainer.default_local_dir={self.local_dir})")
        return self.missing(cfg, f"HA-DW anchor '{cfg.state_key}': {self.trainer} resumed at step {step} {found}. "
                                 f"Resume from a checkpoint that has it, or {ALLOW_MISSING_STATE}.")

    def _resumed_from(self, key: str, step: int) -> tuple[str | None, list[str], str | None]:
        """The ``global_step_{step - 1}`` folder verl resumed from (None: none), where its anchor may be, and where it
        is (None: nowhere; a dangling or looping link is there, to be read and named: not a missing snapshot)."""
        previous = step - 1
        trainer = {"resume_mode": self.resume_mode, "default_local_dir": self.local_dir}
        folder = resolve_resume_dir(OmegaConf.create({**trainer, "resume_from_path": self.resume_from_path}))
        if folder is not None and step_of(folder) != previous:
            raise MissingAnchorStateError(f"HA-DW anchor '{key}': verl's first training step is {step}, but the "
                                          f"checkpoint to resume from is now {folder} (step {step_of(folder)}): its "
                                          "tracker file changed after verl loaded its checkpoint. Give each run its "
                                          "own trainer.default_local_dir and restart.")
        candidates = [] if folder is None else [
            self.snapshot_path(previous, os.path.dirname(os.path.normpath(folder))),  # written by this back-end
            os.path.join(folder, STATE_FILE)]  # a copied snapshot, or a checkpoint written by the v1 callback
        return folder, candidates, next((path for path in candidates if os.path.lexists(path)), None)

    def check_estimator(self, key: str, step: int) -> None:
        """``CheckpointFiles.check_estimator`` for a run resumed at ``step``, through its snapshot."""
        if step <= 1:
            return
        folder, _, path = self._resumed_from(key, step)
        if path is not None:
            check_saved_options(self.read(path, step - 1, folder), self.options, path, VERL,
                                earlier=lambda: self._way_back(folder, False))
        elif folder is not None:  # nothing recorded: said
            warn_unrecorded_checkpoint(folder, VERL)

    def _way_back(self, folder: str, anchor: bool) -> str | None:
        """The newest earlier ``global_step_K`` (with ``actor/``) whose snapshot this run continues, as overrides."""
        earlier = earlier_valid_checkpoint(
            folder, accepts=lambda saved: resumable(saved, self.options, anchor),
            files=lambda candidate, k: [self.snapshot_path(k, os.path.dirname(candidate)),
                                        os.path.join(candidate, STATE_FILE)])
        return earlier and f"{earlier} (trainer.resume_mode=resume_path trainer.resume_from_path={earlier})"

    @staticmethod
    def read(path: str, previous: int, folder: str) -> dict:
        """The checked payload of the snapshot ``path`` of step ``previous`` for the checkpoint ``folder``."""
        try:  # the v1 callback's checks: readable, complete, valid fields, the step verl resumes from
            saved = read_state_file(path, previous, VERL)
        except ValueError as exc:
            raise AnchorFileError(f"HA-DW anchor file {path} {exc} ({folder}). Ways out: {RESUME_ELSEWHERE}, or "
                                  f"{ALLOW_MISSING_STATE}.") from exc
        replaced = saved.get("replaces_data_pt_mtime_ns")
        data_pt = os.path.join(folder, "data.pt")
        if replaced is not None and os.path.exists(data_pt) and os.stat(data_pt).st_mtime_ns == replaced:
            raise MissingAnchorStateError(f"{path} was written by a later run that stopped before verl re-saved "
                                          f"{folder}, so it is not that checkpoint's anchor. Ways out: "
                                          f"{RESUME_ELSEWHERE}, or delete {path} and {ALLOW_MISSING_STATE}.")
        logger.info(f"HA-DW anchor restored from {path} (step {previous})")
        return saved


def from_trainer(trainer, options: dict, who: str) -> LegacySnapshots | None:
    """The snapshot back-end of verl's ``trainer`` node (None: no ``default_local_dir``); ``who``: the trainer."""
    local_dir = trainer.get("default_local_dir") if hasattr(trainer, "get") else None
    if not isinstance(local_dir, str):
        return None
    return LegacySnapshots(
        local_dir=os.path.join(os.getcwd(), local_dir),  # as is when absolute
        resume_mode=str(trainer.get("resume_mode", "auto")), resume_from_path=trainer.get("resume_from_path"),
        save_freq=int(trainer.get("save_freq", -1)), options=options, trainer=who)


def from_call(call: CallConfig) -> LegacySnapshots | None:
    """The snapshot back-end of a call's trainer; None without one, or where the checkpoint callback saves."""
    legacy = call.trainer is not None and call.trainer.get("use_v1", True) is False
    if call.trainer is None or not (legacy or not support.has_checkpoint_callback()):
        return None
    who = ("the legacy trainer (trainer.use_v1=false)" if legacy else
           f"verl {support.installed_verl()}'s v1 trainer (no checkpoint callback before verl 0.9.1)")
    return from_trainer(call.trainer, call.run.flat(), who)

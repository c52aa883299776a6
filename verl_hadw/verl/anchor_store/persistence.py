"""How the anchor survives a restart: the ``Persistence`` interface of the two back-ends (``checkpoint_files`` for
verl's v1 checkpoint callback, ``legacy_snapshots`` where verl has no checkpoint hook), and ``resolve_resume_dir``,
the ``global_step_N`` folder verl resumes from, found as verl finds it."""

from __future__ import annotations

import os
import re

from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint, step_of
from verl_hadw.core.anchor.resume import missing_anchor
from verl_hadw.core.errors import ConfigError, MissingAnchorStateError, PartialCheckpointError
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl.verl_terms import VERL

__all__ = ["Persistence", "resolve_resume_dir", "check_step_folder"]


class Persistence:
    """The interface, and the back-end that keeps nothing (unit use, notebooks)."""

    handles_resume = False  # ``load`` restores, refuses or warns about a resumed run itself
    saves_into_checkpoints = False  # the anchor goes into every verl checkpoint (the v1 callback's back-end)
    # the trainer step the run's first estimator call must have, once ``load`` knows it (1 fresh, N + 1 resumed
    # from step N; None: unknown): tells a call of another run of the same state_key
    first_step: int | None = None

    def load(self, cfg: HadwConfig, step: int | None) -> dict | None:
        """The state to continue from (None: a fresh anchor); ``step``: the client's first trainer step, if known."""
        return None

    def after_step(self, step: int, key: str, state: dict) -> None:
        """Called after every observation of trainer step ``step`` with the anchor's state."""

    def on_checkpoint(self, step: int, key: str, state: dict, folder: str) -> None:
        """verl saved the checkpoint ``folder`` of step ``step``."""

    @staticmethod
    def missing(cfg: HadwConfig, message: str, error: type[MissingAnchorStateError] = MissingAnchorStateError) -> None:
        """No usable saved anchor: raise ``error``, or with ``allow_missing_state`` warn (fresh anchor)."""
        missing_anchor(cfg, message, VERL, error)


TRACKER = "latest_checkpointed_iteration.txt"  # verl internal: get_checkpoint_tracker_filename (verl 0.9.0, 0.9.1)


def resolve_resume_dir(trainer_config) -> str | None:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` will resume from, or None (fresh start)."""
    # verl internals: find_latest_ckpt_path, the trainers' private _load_checkpoint rules (checked on verl 0.9.0, 0.9.1)
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
    mode = trainer_config.get("resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "auto":
        folder = os.path.join(os.getcwd(), trainer_config.default_local_dir)  # as is when absolute
        try:
            return find_latest_ckpt_path(folder)
        except ValueError:  # verl opens the tracker with "w", then writes: a kill in between leaves it empty
            raise PartialCheckpointError(_cut_tracker(folder)) from None
    if mode == "resume_path":
        path = trainer_config.get("resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:
            raise ConfigError(f"trainer.resume_from_path must name a global_step_N folder, got {path!r}")
        return check_step_folder(os.path.join(os.getcwd(), path), path)
    raise ConfigError(f"trainer.resume_mode={mode!r} is not valid; choose one of: auto, disable, resume_path")


def _cut_tracker(local_dir: str) -> str:
    """The refusal of a tracker file that holds no step, naming the newest whole checkpoint beside it."""
    tracker = os.path.join(local_dir, TRACKER)
    with open(tracker, "rb") as f:
        held = f.read(40)
    whole = earlier_valid_checkpoint(os.path.join(local_dir, "global_step_"), step=1 << 62, accepts=lambda saved: True)
    way = (f"write {step_of(whole)} into it (the newest whole checkpoint, {whole}), or resume from that folder "
           f"(trainer.resume_mode=resume_path trainer.resume_from_path={whole})" if whole else
           "no whole checkpoint with an anchor file is beside it: start anew (trainer.resume_mode=disable, or another "
           "trainer.default_local_dir)")
    return (f"verl's tracker file {tracker} holds {held!r}, not a step: verl's save was cut off while it wrote the "
            f"file. Ways out: {way}.")


def check_step_folder(folder: str, given: str) -> str:
    """``folder`` if it is an existing ``.../global_step_N`` folder, else a ``ConfigError`` naming the one to use."""
    if not folder.split("global_step_")[-1].isdigit():
        inside = [m for m in re.finditer(r"global_step_\d+", folder) if folder[m.end() : m.end() + 1] in ("/", os.sep)]
        fix = f"set trainer.resume_from_path={folder[: inside[-1].end()]}" if inside else "name the folder itself"
        raise ConfigError(f"trainer.resume_from_path={given!r} does not end in a global_step_N folder (verl reads N "
                          f"from the path's end): {fix}.")
    if not os.path.isdir(folder):
        raise ConfigError(f"trainer.resume_from_path={given!r}: no such checkpoint folder ({folder} does not exist).")
    return folder

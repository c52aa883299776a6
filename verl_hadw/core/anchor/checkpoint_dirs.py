"""Checkpoint folders named ``<prefix>N`` (verl's ``global_step_N``, the HF Trainer's ``checkpoint-N``: TRL,
ms-swift): their step, and the newest earlier one whose anchor file is valid (the way out every "cannot restore"
message offers).

Which folder a run resumes from is each framework's rule: ``verl_adapter.anchor_home.resume_dir``, the HF Trainer's.
"""

from __future__ import annotations

import os
from typing import Callable

from verl_hadw.core.anchor.file_format import STATE_FILE, read_state_file

__all__ = ["step_of", "earlier_valid_checkpoint"]


def step_of(folder: str, prefix: str = "global_step_") -> int:
    """N of a ``<prefix>N`` folder."""
    return int(os.path.basename(os.path.normpath(folder)).split(prefix)[-1])


def earlier_valid_checkpoint(folder: str, step: int | None = None, prefix: str = "global_step_",
                             needs: str | None = "actor", accepts: Callable[[dict], bool] | None = None,
                             whole: Callable[[str, int], bool] | None = None) -> str | None:
    """The newest other ``<prefix>K`` (K < N) beside ``folder`` whose anchor file is valid and that holds ``needs``
    (what its trainer resumes from: verl's ``actor/``; None: nothing more), or None. N is ``step``, else read from
    ``folder``'s name. verl's folders are ``global_step_K``; the HF Trainer's ``checkpoint-K``
    (``verl_hadw.hf_trainer``).
    ``accepts``: what the checked payload must satisfy (default: it holds an anchor; after a refused resume:
    ``resume.resumable`` under the run's options). ``whole(candidate, K)``: whether the framework's own files of
    ``<prefix>K`` are whole (its save was not cut off: ``hf_trainer.checkpoint_anchor``); None: not asked."""
    parent = os.path.dirname(os.path.normpath(folder))
    step = step_of(folder) if step is None else step
    try:
        names = os.listdir(parent)
    except OSError:
        return None
    numbers = (n[len(prefix):] for n in names if n.startswith(prefix))
    for k in sorted((int(k) for k in numbers if k.isdigit()), reverse=True):
        candidate = os.path.join(parent, f"{prefix}{k}")
        if k >= step or (needs is not None and not os.path.isdir(os.path.join(candidate, needs))):
            continue
        if whole is not None and not whole(candidate, k):
            continue
        try:
            saved = read_state_file(os.path.join(candidate, STATE_FILE), k)
        except ValueError:
            continue
        if accepts(saved) if accepts is not None else saved["state"] is not None:  # options-only: no anchor
            return candidate
    return None

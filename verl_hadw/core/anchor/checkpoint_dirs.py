"""Checkpoint folders ``<prefix>N`` (verl's ``global_step_N``, the HF Trainer's ``checkpoint-N``): their step, and the
newest earlier one whose anchor file is valid."""

from __future__ import annotations

import os
from typing import Callable

from verl_hadw.core.anchor.file_format import STATE_FILE, read_state_file


def step_of(folder: str, prefix: str = "global_step_") -> int:
    """N of a ``<prefix>N`` folder."""
    return int(os.path.basename(os.path.normpath(folder)).split(prefix)[-1])


def earlier_valid_checkpoint(folder: str, step: int | None = None, prefix: str = "global_step_",
                             needs: str | None = "actor", accepts: Callable[[dict], bool] | None = None,
                             whole: Callable[[str, int], bool] | None = None,
                             files: Callable[[str, int], list[str]] | None = None) -> str | None:
    """The newest ``<prefix>K`` beside ``folder`` with K < N (``step``, else ``folder``'s) whose anchor file is valid,
    or None. ``needs``: what the trainer resumes from inside it (verl's ``actor/``; None: nothing); ``accepts``: what
    the checked payload must satisfy (default: it holds an anchor); ``whole(candidate, K)``: whether the framework's
    files are whole (None: not asked); ``files(candidate, K)``: its anchor files, any one will do (default: its own)."""
    parent = os.path.dirname(os.path.normpath(folder))
    step = step_of(folder) if step is None else step
    try:
        names = os.listdir(parent)
    except OSError:
        return None
    numbers = (n[len(prefix):] for n in names if n.startswith(prefix))
    for k in sorted((int(k) for k in numbers if k.isdigit()), reverse=True):
        candidate = os.path.join(parent, f"{prefix}{k}")
        if k >= step or (needs is not None and not os.path.isdir(os.path.join(candidate, needs))) or \
                (whole is not None and not whole(candidate, k)):
            continue
        for path in files(candidate, k) if files is not None else [os.path.join(candidate, STATE_FILE)]:
            try:
                saved = read_state_file(path, k)
            except ValueError:
                continue
            if accepts(saved) if accepts is not None else saved["state"] is not None:  # options-only: no anchor
                return candidate
    return None

"""A saved anchor continued under a resumed run's options: the resume rules applied (``compatibility``), the state
made to fit. Every back-end of every adapter resumes through ``continue_under``."""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from typing import Callable

from verl_hadw.core.anchor.compatibility import check_resume, refuses
from verl_hadw.core.anchor.file_format import PAYLOAD_KEYS, STATE_FILE, read_state_file
from verl_hadw.core.errors import AnchorFileError, MissingAnchorStateError
from verl_hadw.core.options import HadwConfig
from verl_hadw.core.terms import Terms

logger = logging.getLogger(__name__)


def missing_anchor(cfg: HadwConfig, message: str, terms: Terms,
                   error: type[MissingAnchorStateError] = MissingAnchorStateError) -> None:
    """No usable saved anchor: raise ``error``, or with ``allow_missing_state`` warn (a fresh anchor)."""
    if not cfg.allow_missing_state:
        raise error(message)
    logger.warning(f"{message} {terms.fresh_anchor}")


def continue_under(saved: dict, cfg: HadwConfig, options: dict, path: str, terms: Terms,
                   earlier: Callable[[], str | None] | None = None) -> dict:
    """The anchor state of the checked payload ``saved`` (from ``path``), to continue under this run's config
    ``cfg`` and flat ``options``: a changed meaning refuses (``check_saved_options``); changed tuning keeps the
    history (C⁺ and y_t, valid under any tuning) under this run's config. ``earlier``: as in ``check_resume``."""
    check_saved_options(saved, options, path, terms, earlier)
    state = dict(saved["state"])
    current = cfg.anchor
    keep = current.window + 1  # what AnchorState keeps; a larger window fills up as steps commit
    state.update(config=dataclasses.asdict(current), posteriors=state["posteriors"][-keep:],
                 accuracies=state["accuracies"][-keep:])
    return state


def check_saved_options(saved: dict, options: dict, path: str, terms: Terms,
                        earlier: Callable[[], str | None] | None = None) -> None:
    """Apply the resume rules to the checked payload ``saved`` of ``path`` against this run's flat ``options``:
    ``ResumeConflictError`` for a changed meaning (the estimator included), a warning for changed tuning."""
    check_resume(saved["options"], options, path, terms, sorted(saved.keys() - set(PAYLOAD_KEYS)), earlier)


def check_recorded_options(checkpoint: str, step: int, options: dict, terms: Terms,
                           earlier: Callable[[], str | None] | None = None, warn_unrecorded: bool = True) -> None:
    """A run without an anchor (DGPO) resumed from ``checkpoint`` at ``step``: ``check_saved_options`` on the options
    its anchor file records; ``AnchorFileError`` where it is invalid; without one, a warning (``warn_unrecorded``)."""
    path = os.path.join(checkpoint, STATE_FILE)
    if not os.path.lexists(path):  # a checkpoint that records nothing to compare: said
        if warn_unrecorded:
            warn_unrecorded_checkpoint(checkpoint, terms)
        return
    try:
        saved = read_state_file(path, step, terms)
    except ValueError as exc:
        raise AnchorFileError(f"cannot tell which estimator {checkpoint} was trained with: {path} {exc}. Ways out: "
                              f"{terms.resume_elsewhere}, or move {path} away if it is not this run's.") from None
    check_saved_options(saved, options, path, terms, earlier)


def warn_unrecorded_checkpoint(checkpoint: str, terms: Terms) -> str:
    """Warn that DGPO resumes from ``checkpoint``, which records no method (no anchor file); returns the warning."""
    message = (
        f"resuming DGPO from {checkpoint}, which holds no HA-DW anchor file (every HA-DW and DGPO checkpoint of "
        "verl-hadw holds one): which method trained it is unknown, so DGPO continues from it. If HA-DW trained it "
        f"(its anchor lost), resume it under HA-DW from a checkpoint that has its anchor; if it is another "
        f"experiment's, {terms.resume_elsewhere}.")
    logger.warning(message)
    warnings.warn(message, UserWarning, stacklevel=3)
    return message


def resumable(saved: dict, options: dict, anchor: bool) -> bool:
    """Whether a run with ``options`` (``anchor``: one with an HA-DW anchor) continues ``saved`` without a refusal."""
    return (saved["state"] is not None) == anchor and not refuses(saved["options"], options)

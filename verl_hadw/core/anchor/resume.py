"""How a saved anchor continues under a resumed run's options: the resume rules applied, the state made to fit.

Every back-end of every adapter resumes through here (verl's checkpoint files and legacy snapshots, TRL's
checkpoint folders), so all apply the same rules (``compatibility``). A back-end never changes the anchor's
maths: it hands a checked payload (``file_format.read_state_file``) to ``continue_under`` and gets the state to
continue from. Messages name options and ways out in the adapter's ``Terms``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings
from typing import Callable

from verl_hadw.core.anchor.compatibility import ADV_ESTIMATOR, STATE_KEY, anchor_options, check_resume
from verl_hadw.core.anchor.file_format import PAYLOAD_KEYS
from verl_hadw.core.errors import MissingAnchorStateError, ResumeConflictError
from verl_hadw.core.options import HadwConfig
from verl_hadw.core.terms import Terms

__all__ = ["continue_under", "check_saved_options", "missing_anchor", "resumable", "warn_unrecorded_checkpoint"]

logger = logging.getLogger(__name__)
_SILENT = Terms("", str, lambda k, v: "", "", "", "", "", "")  # a candidate's check composes no message anyone reads


@contextlib.contextmanager
def _quiet():
    """The resume rules' tuning warnings muted while candidates are weighed."""
    rules = logging.getLogger("verl_hadw.core.anchor.compatibility")
    level = rules.level
    rules.setLevel(logging.ERROR)
    try:
        yield
    finally:
        rules.setLevel(level)


def missing_anchor(cfg: HadwConfig, message: str, terms: Terms,
                   error: type[MissingAnchorStateError] = MissingAnchorStateError) -> None:
    """No usable saved anchor: raise ``error``, or with ``allow_missing_state`` warn (a fresh anchor)."""
    if not cfg.allow_missing_state:
        raise error(message)
    logger.warning(f"{message} {terms.fresh_anchor}")


def continue_under(saved: dict, cfg: HadwConfig, options: dict, path: str, terms: Terms,
                   earlier: Callable[[], str | None] | None = None) -> dict:
    """The state of the checked payload ``saved`` (from ``path``), made to continue under this run's config
    ``cfg`` and options ``options`` (``compatibility.flat_options``), in ``terms``.

    Both back-ends resume through here, so both apply the same rules (``compatibility``): an option that changes
    the meaning of the saved anchor or the method being trained refuses the resume (``ResumeConflictError``);
    any other change (e.g. ``eta`` raised after a freeze warning, ``window`` changed) keeps the anchor's
    history and continues under this run's config, with one warning naming each changed key (old -> new); keys
    this version does not know (a newer version's options or top-level keys) are ignored with that warning.
    The history (C⁺ and y_t of past steps) is data about the run, valid under any tuning; the freeze warning
    itself tells users to change ``eta``/``eta_min``/``sigma_source``, so refusing those would block the advice.
    A smaller window trims the kept history to ``window + 1`` values (only those are ever read); a larger one
    keeps what was saved and fills up as steps commit. ``earlier``: a refusal's way back (``check_resume``).
    """
    check_saved_options(saved, options, path, terms, earlier)
    state = dict(saved["state"])
    current = cfg.anchor
    keep = current.window + 1  # what AnchorState keeps: m values for σ_t, one more for the freeze check
    state.update(
        config=dataclasses.asdict(current),
        posteriors=state["posteriors"][-keep:],
        accuracies=state["accuracies"][-keep:],
    )
    return state


def check_saved_options(saved: dict, options: dict, path: str, terms: Terms,
                        earlier: Callable[[], str | None] | None = None) -> None:
    """Apply the resume rules (``compatibility``) to the checked payload ``saved`` of ``path`` against this run's
    ``options``: a changed meaning (the estimator included) raises ``ResumeConflictError``, tuning warns.

    A file with an anchor state was written by HA-DW, whether or not it records ``algorithm.adv_estimator`` (files
    of older versions do not); an options-only file (``state: null``) records the estimator that wrote it.
    """
    state = saved["state"]
    recorded_all = state is None or state["schema_version"] != 1
    if recorded_all:
        recorded = dict(saved["options"])
    else:  # schema 1 recorded the anchor options and the state key only
        recorded = {**anchor_options(state["config"]), STATE_KEY: saved["state_key"]}
    if state is not None:
        recorded.setdefault(ADV_ESTIMATOR, "hadw")
    check_resume(recorded, recorded_all, options, path, terms, sorted(saved.keys() - set(PAYLOAD_KEYS)), earlier)


def warn_unrecorded_checkpoint(checkpoint: str, terms: Terms) -> str:
    """DGPO resumes from ``checkpoint``, which records no method (no anchor file, nor the options-only file every
    DGPO checkpoint holds): which method trained it is unknown, so it is said, not refused (HA-DW, which needs the
    anchor, refuses the same checkpoint). Returns the warning."""
    message = (
        f"resuming DGPO from {checkpoint}, which holds no HA-DW anchor file (every HA-DW and DGPO checkpoint of "
        "verl-hadw holds one): which method trained it is unknown, so DGPO continues from it. If HA-DW trained it "
        f"(its anchor lost), resume it under HA-DW from a checkpoint that has its anchor; if it is another "
        f"experiment's, {terms.resume_elsewhere}."
    )
    logger.warning(message)
    warnings.warn(message, UserWarning, stacklevel=3)
    return message


def resumable(saved: dict, options: dict, anchor: bool) -> bool:
    """Whether a run with ``options`` (``anchor``: one that keeps an HA-DW anchor) continues the checked payload
    ``saved`` without a refusal: what the search for an earlier checkpoint after a refusal asks of each candidate."""
    if (saved["state"] is not None) != anchor:
        return False
    try:
        with warnings.catch_warnings(), _quiet():
            warnings.simplefilter("ignore")
            check_saved_options(saved, options, "", _SILENT)
    except ResumeConflictError:
        return False
    return True

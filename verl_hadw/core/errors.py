"""Every error the plugin raises, and each remedy its messages offer, written once.

A message names what went wrong and the way out; the ways out that recur (start a fresh anchor, resume from
another checkpoint) are each framework's words (``terms.Terms``), passed in by its adapter, so every message of one
framework says them alike. Pure Python: no verl, torch or Ray import.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "MissingAnchorStateError",
    "AnchorFileError",
    "AnchorSaveError",
    "AnchorStepError",
    "PartialCheckpointError",
    "ResumeConflictError",
    "RewardValueError",
    "AnchorActorError",
    "MissingExtraError",
    "UnusedOptionsWarning",
    "frozen_anchor_message",
]

# ------------------------------------------------------------------------------------------ messages
def frozen_anchor_message(window: int, posterior: float, batch_acc: float, key, anchor: str = "") -> str:
    """The warning when the anchor stopped following the batch accuracy (``AnchorView.warn``), with its remedies
    under the framework's option names (``key``: ``Terms.key``)."""
    name = f" {anchor!r}" if anchor else ""
    return (
        f"HA-DW anchor{name} is frozen: it moved < 1e-3 over {window} steps while the batch accuracy is > 0.05 away "
        f"from it (anchor {posterior:.4f}, accuracy {batch_acc:.4f}). The literal Eq. 10 sigma shrinks with the "
        f"anchor's own history; raise {key('hadw.anchor.eta')}, set {key('hadw.anchor.sigma_source')}=accuracy or "
        f"{key('hadw.anchor.eta_min')} > 0."
    )


# ------------------------------------------------------------------------------------------ error classes
class ConfigError(ValueError):
    """A bad option value (``algorithm.hadw.*`` in verl, ``hadw_*`` in TRL, or a framework setting); the message
    names the key and what is valid."""


class MissingAnchorStateError(RuntimeError):
    """A resumed run reached HA-DW without the anchor it had before the restart."""


class AnchorFileError(MissingAnchorStateError):
    """A resume found ``verl_hadw_anchor.json`` but cannot use it: unreadable, corrupt, truncated, of an unknown
    schema, with missing or out-of-range fields, or saved at another step. The message names the file, the
    problem and the ways out."""


class AnchorSaveError(RuntimeError):
    """The anchor file could not be written (disk full, read-only, ...); no partial file is left."""


class PartialCheckpointError(RuntimeError):
    """A resume names a checkpoint its framework cannot resume from whole: its save was cut off (a kill, a full disk)
    before the framework's last file. Refused before anything loads from it; the message names the folder, what is
    missing and the newest whole checkpoint beside it."""


class AnchorStepError(RuntimeError):
    """A call arrived for a step older than the anchor's open step (e.g. a resume that lost its state)."""


class ResumeConflictError(ConfigError):
    """A resume changes an option that changes the meaning of the saved anchor or the method being trained
    (``anchor.compatibility``); the message names each key, old -> new, and the ways out."""


class RewardValueError(TypeError):
    """A reward function returned something that is not a number (a string, a list...); the message names the
    function, the value and the completion."""


class AnchorActorError(RuntimeError):
    """The anchor's Ray actor name is held by an actor that is not a verl-hadw anchor; the message names it."""


class MissingExtraError(SystemExit):
    """A CLI subcommand needs a pip extra that is not installed (the message names it)."""


class UnusedOptionsWarning(UserWarning):
    """Options are set for an estimator this run does not use (they have no effect)."""

"""Every error the package raises, and the frozen-anchor warning; remedies in each framework's words (``Terms``)."""

from __future__ import annotations


def frozen_anchor_message(window: int, posterior: float, batch_acc: float, key, anchor: str = "") -> str:
    """The warning for an anchor that stopped following the batch accuracy; ``key``: ``Terms.key``."""
    name = f" {anchor!r}" if anchor else ""
    return (
        f"HA-DW anchor{name} is frozen: it moved < 1e-3 over {window} steps while the batch accuracy is > 0.05 away "
        f"from it (anchor {posterior:.4f}, accuracy {batch_acc:.4f}). The anchor's speed follows how much it moved "
        f"lately, so an anchor that stops can stay stopped; raise {key('hadw.anchor.eta')}, set "
        f"{key('hadw.anchor.sigma_source')}=accuracy or {key('hadw.anchor.eta_min')} > 0.")


class ConfigError(ValueError):
    """A bad option value; the message names the key and what is valid."""


class MissingAnchorStateError(RuntimeError):
    """A resumed run reached HA-DW without the anchor it had before the restart."""


class AnchorFileError(MissingAnchorStateError):
    """A resume found the anchor file but cannot use it (unreadable, corrupt, another schema or step)."""


class AnchorSaveError(RuntimeError):
    """The anchor file could not be written (disk full, read-only, ...); no partial file is left."""


class PartialCheckpointError(RuntimeError):
    """A resume names a checkpoint whose save was cut off before the framework's last file."""


class AnchorStepError(RuntimeError):
    """A call arrived for a step older than the anchor's open step."""


class ResumeConflictError(ConfigError):
    """A resume changes an option that changes the meaning of the saved anchor or the method being trained."""


class RewardValueError(TypeError):
    """A reward function returned something that is not a number."""


class AnchorActorError(RuntimeError):
    """The anchor's Ray actor name is held by an actor that is not a verl-hadw anchor."""


class UnusedOptionsWarning(UserWarning):
    """Options are set for an estimator this run does not use (they have no effect)."""

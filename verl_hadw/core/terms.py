"""How a framework names the options and the ways out, for the messages the core composes.

The core's messages (the option parser, the resume rules, the anchor file's checks and writes, a missing anchor)
name options and remedies. Each adapter passes its own ``Terms`` in: verl's say ``algorithm.hadw.lambda_scale``
and ``trainer.resume_mode``; TRL's ``hadw_lambda_scale`` and ``output_dir``. No adapter rewrites another's words.
Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Terms", "ALGORITHM_PREFIX", "flat_path", "yaml_value"]

#: The prefix of the flat option keys an anchor file records (``algorithm.hadw.anchor.eta``): the file format's
#: names, read by every adapter, so they never change with the framework.
ALGORITHM_PREFIX = "algorithm."


def flat_path(flat_key: str) -> str:
    """The option path of a flat file key: ``"algorithm.hadw.anchor.eta"`` -> ``"hadw.anchor.eta"``."""
    return flat_key.removeprefix(ALGORITHM_PREFIX)


def yaml_value(value: Any) -> str:
    """A value as an override spells it: ``null``, ``true``, ``false``, else ``str``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@dataclass(frozen=True)
class Terms:
    """One framework's words.

    ``key`` names an option path: ``"hadw.anchor.eta"``, ``"dgpo.temperature"``, ``"hadw"`` (a section),
    ``"adv_estimator"`` and ``"norm_adv_by_std_in_grpo"`` (the two options the framework itself owns).
    ``setting(path, value)`` is what a user types to set it back.
    """

    framework: str  # "verl resumes from step 4"
    key: Callable[[str], str]
    setting: Callable[[str, Any], str]
    allow_missing_state: str  # the way out "continue with a fresh anchor", as an instruction
    fresh_anchor: str  # appended to the warning when a run continues with a fresh anchor
    resume_elsewhere: str  # the way out "resume from another checkpoint"
    new_experiment: str  # how to train a run as a new experiment instead of resuming
    anchor_tuning: str  # "another <the anchor's options>" in the resume warning

    def flat(self, flat_key: str) -> str:
        """The framework's name of a flat file key (``algorithm.hadw.anchor.eta``)."""
        return self.key(flat_path(flat_key))

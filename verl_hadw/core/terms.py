"""How a framework names its options and remedies, for the core's messages (verl: ``algorithm.hadw.lambda_scale``,
``trainer.resume_mode``; TRL: ``hadw_lambda_scale``, ``output_dir``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: The prefix of the flat keys an anchor file records (``algorithm.hadw.anchor.eta``), under every framework.
ALGORITHM_PREFIX = "algorithm."


def yaml_value(value: Any) -> str:
    """A value as an override spells it: ``null``, ``true``, ``false``, else ``str``."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Terms:
    """One framework's words: ``key`` names an option path (``"hadw.anchor.eta"``, ``"hadw"``, ``"adv_estimator"``),
    ``setting(path, value)`` is what a user types to set it."""

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
        return self.key(flat_key.removeprefix(ALGORITHM_PREFIX))

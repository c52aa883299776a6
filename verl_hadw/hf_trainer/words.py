"""An HF-Trainer-based framework's words, bound one way for every adapter: ``Spelling`` (how its users write a setting:
a config field, TRL, or a command-line flag, ms-swift) and ``hf_terms`` (the core's ``Terms`` in that spelling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl_hadw.core.option_fields import field_name
from verl_hadw.core.terms import Terms

__all__ = ["Spelling", "hf_terms"]

_NORM = "norm_adv_by_std_in_grpo"  # verl's option the framework's scale_rewards ("group" / "none") stands for


@dataclass(frozen=True)
class Spelling:
    """How a framework's users write one of its settings: ``name=value`` in a Python config (TRL), or ``--name value``
    on a command line (ms-swift)."""

    flags: bool

    def name(self, setting: str) -> str:
        """``loss_type`` or ``--loss_type``."""
        return f"--{setting}" if self.flags else setting

    def arg(self, setting: str, value: Any) -> str:
        """A setting as typed: ``loss_type='dapo'``, ``--loss_type dapo``; ``--reward_weights 1.0 0.5``."""
        if not self.flags:
            return f"{setting}={value!r}"
        if isinstance(value, (list, tuple)):
            return f"--{setting} {' '.join(str(v) for v in value)}"
        return f"--{setting} {str(value).lower() if isinstance(value, bool) else value}"


def hf_terms(framework: str, spelling: Spelling, resume_from: str, new_experiment: str) -> Terms:
    """The core's ``Terms`` for an HF-Trainer-based framework: option paths as its fields or flags (``hadw.anchor.eta``
    -> ``hadw_anchor_eta`` / ``--hadw_anchor_eta``), verl's ``norm_adv_by_std_in_grpo`` as its ``scale_rewards``.
    ``resume_from``: how a run resumes from a folder; ``new_experiment``: how it starts anew instead."""

    def key(option: str) -> str:
        if option == _NORM:
            return "--scale_rewards" if spelling.flags else "scale_rewards=='group'"
        return spelling.name(field_name(option))

    def setting(option: str, value: Any) -> str:
        if option == _NORM:
            return spelling.arg("scale_rewards", "group" if value else "none")
        if isinstance(value, str) and not spelling.flags:  # an option's text as the user reads it back: unquoted
            return f"{key(option)}={value}"
        return spelling.arg(field_name(option), value)

    fresh = setting("hadw.allow_missing_state", True)
    return Terms(
        framework=framework,
        key=key,
        setting=setting,
        allow_missing_state=f"{'add' if spelling.flags else 'set'} {fresh} to continue with a fresh anchor",
        fresh_anchor=f"({fresh}: continuing with a fresh anchor)",
        resume_elsewhere=f"resume from another checkpoint ({resume_from})",
        new_experiment=new_experiment,
        anchor_tuning=f"other {spelling.name('hadw_anchor_*')} values",
    )

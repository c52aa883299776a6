"""ms-swift's words for the core's messages: command-line flags (``--hadw_lambda_scale``), ``--output_dir``,
``--resume_from_checkpoint``."""

from __future__ import annotations

from typing import Any

from verl_hadw.core.option_fields import field_name
from verl_hadw.core.terms import Terms

__all__ = ["SWIFT", "swift_flag"]

# the two options verl owns, under the flags swift users set
_SWIFT_NAMES = {"norm_adv_by_std_in_grpo": "--scale_rewards", "adv_estimator": "--adv_estimator"}


def swift_flag(option: str) -> str:
    """The flag of an option path: ``"hadw.anchor.eta"`` -> ``--hadw_anchor_eta``."""
    return _SWIFT_NAMES.get(option, "--" + field_name(option))


def _setting(option: str, value: Any) -> str:
    if option == "norm_adv_by_std_in_grpo":  # swift's scale_rewards stands for it
        return f"--scale_rewards {'group' if value else 'none'}"
    if isinstance(value, list):  # --reward_weights 1.0 0.5
        return f"{swift_flag(option)} {' '.join(str(v) for v in value)}"
    return f"{swift_flag(option)} {str(value).lower() if isinstance(value, bool) else value}"


SWIFT = Terms(
    framework="ms-swift",
    key=swift_flag,
    setting=_setting,
    allow_missing_state="add --hadw_allow_missing_state true to continue with a fresh anchor",
    fresh_anchor="(--hadw_allow_missing_state true: continuing with a fresh anchor)",
    resume_elsewhere="resume from another checkpoint (--resume_from_checkpoint <its folder>)",
    new_experiment="another --output_dir, or no --resume_from_checkpoint (or --resume_only_model true "
                   "--ignore_data_skip true: the weights only, a new run)",
    anchor_tuning="other --hadw_anchor_* values",
)

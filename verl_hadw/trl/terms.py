"""TRL's words for the core's messages: ``HadwGRPOConfig`` field names, ``output_dir``, ``resume_from_checkpoint``."""

from __future__ import annotations

from typing import Any

from verl_hadw.core.terms import Terms

__all__ = ["TRL", "trl_key"]

# the two options verl owns, under the names TRL users set
_TRL_NAMES = {"norm_adv_by_std_in_grpo": "scale_rewards=='group'", "adv_estimator": "adv_estimator"}


def trl_key(option: str) -> str:
    """The TRL field of an option path: ``"hadw.anchor.eta"`` -> ``hadw_anchor_eta``."""
    return _TRL_NAMES.get(option, option.replace(".", "_"))


def _setting(option: str, value: Any) -> str:
    if option == "norm_adv_by_std_in_grpo":  # TRL's scale_rewards stands for it
        return f"scale_rewards={'group' if value else 'none'!r}"
    return f"{trl_key(option)}={value if isinstance(value, str) else repr(value)}"


TRL = Terms(
    framework="TRL",
    key=trl_key,
    setting=_setting,
    allow_missing_state="set hadw_allow_missing_state=True to continue with a fresh anchor",
    fresh_anchor="(hadw_allow_missing_state=True: continuing with a fresh anchor)",
    resume_elsewhere="resume from another checkpoint (train(resume_from_checkpoint=<its folder>))",
    new_experiment="another output_dir, or train() without resume_from_checkpoint",
    anchor_tuning="other hadw_anchor_* values",
)

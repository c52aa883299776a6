"""verl's words for the core's messages: ``algorithm.hadw.*`` keys, Hydra overrides, ``trainer.*`` ways out."""

from __future__ import annotations

from typing import Any

from verl_hadw.core.terms import ALGORITHM_PREFIX, Terms, yaml_value

#: The path every shipped YAML (and users' own) names; the class lives in ``checkpoint_callback``.
CALLBACK_CLASS = "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"
CALLBACK_OVERRIDE = f"trainer.checkpoint_callback_class={CALLBACK_CLASS}"
ALLOW_MISSING_STATE = "set +algorithm.hadw.allow_missing_state=true to continue with a fresh anchor"
RESUME_ELSEWHERE = "resume from another checkpoint (trainer.resume_mode=resume_path)"


def verl_key(option: str) -> str:
    """verl's name of an option path (``"hadw.anchor.eta"`` -> ``algorithm.hadw.anchor.eta``)."""
    return ALGORITHM_PREFIX + option


def _setting(option: str, value: Any) -> str:
    verls = option in ("adv_estimator", "norm_adv_by_std_in_grpo")  # keys of verl's config: Hydra refuses "+" on them
    return f"{'' if verls else '+'}{verl_key(option)}={yaml_value(value)}"


VERL = Terms(framework="verl", key=verl_key, setting=_setting, allow_missing_state=ALLOW_MISSING_STATE,
             fresh_anchor="(allow_missing_state=true: continuing with a fresh anchor)",
             resume_elsewhere=RESUME_ELSEWHERE, anchor_tuning="another algorithm.hadw.anchor config",
             new_experiment="another trainer.default_local_dir, or trainer.resume_mode=disable")

"""``HadwSwiftArguments``: the HA-DW / DGPO flags of ``verl-hadw-swift rlhf`` (``--adv_estimator``, ``--hadw_*``,
``--dgpo_*``), one field each, with the core's defaults and docs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from verl_hadw.hf_trainer.option_fields import OptionFields, hf_terms

__all__ = ["HadwSwiftArguments"]

SWIFT = hf_terms("ms-swift", flags=True, resume_from="--resume_from_checkpoint <its folder>",
                 new_experiment="another --output_dir, or no --resume_from_checkpoint (or --resume_only_model true "
                                "--ignore_data_skip true: the weights only, a new run)")


@dataclass
class HadwSwiftArguments(OptionFields):
    """The HA-DW / DGPO options of one swift run, one flag per field; each ``--hadw_*`` / ``--dgpo_*`` flag is verl's
    ``algorithm.hadw.*`` / ``algorithm.dgpo.*`` option, its dots made underscores (``--help`` lists them)."""

    terms = SWIFT  # the core's messages name swift's flags
    scale_rewards = "group"  # swift's --scale_rewards, set from swift's arguments (not a flag of ours)

    adv_estimator: Literal["hadw", "dgpo"] = field(default="hadw", metadata={
        "help": "hadw (HA-DW; --hadw_base dgpo: HA-DW over DGPO) | dgpo. verl: algorithm.adv_estimator."})
    accuracy_reward_index: int | None = field(default=None, metadata={
        "help": "which of --reward_funcs is the accuracy; unset: the combined reward, binary or thresholded."})
    hadw_lambda_scale: float = field(
        default=1.3, metadata={"help": "λ_scale of Eq. 16; the paper's best (Table 7). Valid: > 0.0."})
    hadw_state_key: str = field(
        default="default", metadata={"help": "one anchor per key; give each experiment its own."})
    hadw_success_threshold: float | None = field(
        default=None, metadata={"help": "required when rewards are not binary: accuracy = score > threshold."})
    hadw_base: Literal["grpo", "dgpo"] = field(
        default="grpo", metadata={"help": "base advantage: grpo | dgpo (HA-DW over the DGPO advantage)."})
    hadw_difficulty_from: Literal["accuracy", "reward"] = field(default="accuracy", metadata={
        "help": "accuracy: y_t and p̂ are accuracies (paper) | reward: raw mean reward (released code)."})
    hadw_normalize_phi: bool = field(
        default=False, metadata={"help": "rescale Φ to mean 1 over the call's valid responses."})
    hadw_allow_missing_state: bool = field(
        default=False, metadata={"help": "resume without an anchor file: start a fresh anchor (with a warning)."})
    hadw_log_metrics: bool = field(
        default=True, metadata={"help": "merge hadw/* and dgpo/* into verl's log call (both estimators)."})
    hadw_epsilon: float = field(default=1e-06, metadata={"help": "added to the GRPO std. Valid: > 0.0."})
    hadw_anchor_mode: Literal["kalman", "moving_average", "fixed"] = field(
        default="kalman", metadata={"help": "kalman (Eqs. 8-12) | moving_average (App. F) | fixed (Table 2)."})
    hadw_anchor_eta: float = field(
        default=16.0, metadata={"help": "η of Eq. 11, chosen by measurement (docs/choices.md). Valid: >= 0.0."})
    hadw_anchor_window: int = field(default=10, metadata={"help": "m of Eqs. 9-10 (h of App. F). Valid: >= 1."})
    hadw_anchor_sigma_source: Literal["anchor", "accuracy"] = field(
        default="anchor", metadata={"help": "anchor: Eq. 10 literally | accuracy: σ of the last m batch accuracies."})
    hadw_anchor_sigma_warmup: float = field(
        default=1.0, metadata={"help": "σ_t while fewer than 2 past values exist (paper silent). Valid: >= 0.0."})
    hadw_anchor_eta_min: float = field(default=0.05, metadata={
        "help": "floor of η_t = clamp(η·σ_t, eta_min, 1); 0 = literal Eq. 11, which can freeze. Valid: [0, 1]."})
    hadw_anchor_init: float | str | None = field(default="first_batch", metadata={
        "help": "C⁻ of step 1: the first call's accuracy, or a number in [0, 1]. Valid: 'first_batch' or [0, 1]."})
    hadw_anchor_include_current: bool = field(
        default=False, metadata={"help": "moving_average: include y_t in the anchor (the authors' released code)."})
    hadw_anchor_fixed_value: float = field(
        default=0.5, metadata={"help": "fixed mode's constant anchor. Valid: [0.0, 1.0]."})
    dgpo_dgae: bool = field(
        default=True, metadata={"help": "MAD normalisation, Eqs. 4-5 (false: GRPO std normalisation)."})
    dgpo_dqw: bool = field(default=True, metadata={"help": "difficulty-aware question weights, Eq. 6."})
    dgpo_temperature: float = field(default=2.0, metadata={"help": "T of Eq. 6. Valid: > 0.0."})
    dgpo_valid_token_norm: bool = field(
        default=True, metadata={"help": "valid-token loss averaging, folded into the advantages."})
    dgpo_success_threshold: float | None = field(
        default=None, metadata={"help": "for DQW's accuracy when rewards are not binary."})
    dgpo_epsilon: float = field(default=1e-06, metadata={"help": "added to the MAD / std. Valid: > 0.0."})


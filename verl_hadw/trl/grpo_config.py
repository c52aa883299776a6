"""``HadwGRPOConfig``: TRL's ``GRPOConfig`` plus HA-DW's and DGPO's fields, one per option of
``verl_hadw.core.options`` (verl's ``algorithm.hadw.anchor.eta`` is ``hadw_anchor_eta``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trl import GRPOConfig

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import (
    ADAPTER_FIELDS,
    KEYWORDS,
    OptionFields,
    closest_field,
    declared_fields,
    hf_terms,
)
from verl_hadw.trl.checks import check_settings, check_trl_version

__all__ = ["HadwGRPOConfig"]

TRL = hf_terms("TRL", KEYWORDS, resume_from="train(resume_from_checkpoint=<its folder>)",
               new_experiment="another output_dir, or train() without resume_from_checkpoint")


class _CheckedKeywords:
    """Before the dataclass ``__init__`` runs: a TRL outside ``TRL_RANGE``, or an unknown keyword ("did you mean"),
    is a ``ConfigError``. A base class, so that tools read the dataclass ``__init__``'s signature."""

    def __new__(cls, *args, **kwargs):
        check_trl_version(cls.__name__)  # first: another TRL's fields and checks would fail naming nothing
        names = {f.name for f in dataclasses.fields(cls)}
        for key in kwargs:
            if key not in names:
                hint = closest_field(key, names)
                raise ConfigError(
                    f"Unknown {cls.__name__} field {key!r}.{f' Did you mean {hint!r}?' if hint else ''} The "
                    f"HA-DW / DGPO fields are: {', '.join([*ADAPTER_FIELDS, *declared_fields()])}.")
        return super().__new__(cls)


@dataclass
class HadwGRPOConfig(_CheckedKeywords, OptionFields, GRPOConfig):
    r"""
    Configuration class for the [`HadwGRPOTrainer`]: [`GRPOConfig`] with HA-DW's or DGPO's advantage.

    Invalid values, and TRL settings under which the method would not be the one named, raise `ConfigError` at
    construction. TRL's `scale_rewards` stands for verl's `algorithm.norm_adv_by_std_in_grpo` (`"group"`: true,
    `"none"`: false). Each `hadw_*` / `dgpo_*` field is verl's `algorithm.hadw.*` / `algorithm.dgpo.*` option, its
    dots made underscores.

    Parameters:
        > Parameters that choose the estimator

        adv_estimator (`Literal["hadw", "dgpo"]`, defaults to `"hadw"`):
            `hadw` (HA-DW; over DGPO with `hadw_base="dgpo"`) or `dgpo`. verl's `algorithm.adv_estimator`.
        accuracy_reward_index (`int | None`, defaults to `None`):
            Which of `reward_funcs` is the 0/1 accuracy. `None`: the combined reward, binary or thresholded by
            `hadw_success_threshold` / `dgpo_success_threshold`.

        > Parameters of HA-DW

        hadw_lambda_scale (`float`, defaults to `1.3`):
            scale of every difficulty weight on the advantage; 1.3 is the paper's best (λ_scale, Eq. 16, Table 7).
        hadw_state_key (`str`, defaults to `"default"`):
            the name the anchor is saved and restored under; give each experiment its own.
        hadw_success_threshold (`float | None`, defaults to `None`):
            required when rewards are not binary: a score above it counts as correct.
        hadw_base (`Literal["grpo", "dgpo"]`, defaults to `"grpo"`):
            the advantage HA-DW reweights: grpo | dgpo (DGPO's advantage).
        hadw_difficulty_from (`Literal["accuracy", "reward"]`, defaults to `"accuracy"`):
            what difficulty is read from: accuracy, the share of correct responses (paper) | reward, the mean reward
            (released code).
        hadw_normalize_phi (`bool`, defaults to `False`):
            rescale the difficulty weights to mean 1 over each call's valid responses (Φ, Eq. 16).
        hadw_allow_missing_state (`bool`, defaults to `False`):
            resume without an anchor file: start a fresh anchor (with a warning).
        hadw_log_metrics (`bool`, defaults to `True`):
            add hadw/* and dgpo/* to the trainer's logged metrics (both estimators).
        hadw_epsilon (`float`, defaults to `1e-06`):
            added to GRPO's standard deviation, so that it never divides by zero.

        > Parameters of HA-DW's anchor

        hadw_anchor_mode (`Literal["kalman", "moving_average", "fixed"]`, defaults to `"kalman"`):
            how the anchor follows accuracy: kalman (Eqs. 8-12) | moving_average (App. F) | fixed (Table 2).
        hadw_anchor_eta (`float`, defaults to `16.0`):
            how fast the anchor follows accuracy; 16 by measurement, see docs/choices.md (η, Eq. 11).
        hadw_anchor_window (`int`, defaults to `10`):
            how many past steps the anchor's spread or average reads (m, Eqs. 9-10; h, App. F).
        hadw_anchor_sigma_source (`Literal["anchor", "accuracy"]`, defaults to `"anchor"`):
            the spread that sets the anchor's speed: anchor, of its past values (paper) | accuracy, of past accuracies
            (σ_t, Eq. 10).
        hadw_anchor_sigma_warmup (`float`, defaults to `1.0`):
            the spread used until two past values exist; the paper gives none (σ_t, Eq. 10).
        hadw_anchor_eta_min (`float`, defaults to `0.05`):
            the anchor's slowest speed; 0 follows the paper and can freeze the anchor (floor of η_t, Eq. 11).
        hadw_anchor_init (`float | str | None`, defaults to `"first_batch"`):
            the starting anchor: first_batch, the first call's accuracy, or a number in [0, 1] (C⁻ of step 1).
        hadw_anchor_include_current (`bool`, defaults to `False`):
            moving_average: count the current step's accuracy in the anchor, as the released code does.
        hadw_anchor_fixed_value (`float`, defaults to `0.5`):
            the constant anchor of mode fixed.

        > Parameters of DGPO

        dgpo_dgae (`bool`, defaults to `True`):
            divide the advantage by the group's mean absolute deviation; false: by its standard deviation, as GRPO
            (Eqs. 4-5).
        dgpo_dqw (`bool`, defaults to `True`):
            weight each question by its difficulty, harder ones more (Eq. 6).
        dgpo_temperature (`float`, defaults to `2.0`):
            how sharply the question weights favour hard questions; lower is sharper (T, Eq. 6).
        dgpo_valid_token_norm (`bool`, defaults to `True`):
            average the loss over the tokens of groups whose scores differ, folded into the advantages (Eq. 3).
        dgpo_success_threshold (`float | None`, defaults to `None`):
            when rewards are not binary: a score above it counts as correct for the question weights.
        dgpo_epsilon (`float`, defaults to `1e-06`):
            added to the mean absolute deviation or standard deviation, so that it never divides by zero.
    """

    terms = TRL  # the core's messages name TRL's fields

    def __post_init__(self):
        super().__post_init__()
        self.check_hadw()

    def check_hadw(self) -> None:
        """Check HA-DW's and DGPO's fields and the TRL settings they constrain; ``HadwGRPOTrainer`` runs it again."""
        self.check_adapter_fields()
        check_settings(self)

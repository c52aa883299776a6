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
            λ_scale of Eq. 16; the paper's best (Table 7).
        hadw_state_key (`str`, defaults to `"default"`):
            one anchor per key; give each experiment its own.
        hadw_success_threshold (`float | None`, defaults to `None`):
            required when rewards are not binary: accuracy = score > threshold.
        hadw_base (`Literal["grpo", "dgpo"]`, defaults to `"grpo"`):
            base advantage: grpo | dgpo (HA-DW over the DGPO advantage).
        hadw_difficulty_from (`Literal["accuracy", "reward"]`, defaults to `"accuracy"`):
            accuracy: y_t and p̂ are accuracies (paper) | reward: raw mean reward (released code).
        hadw_normalize_phi (`bool`, defaults to `False`):
            rescale Φ to mean 1 over the call's valid responses.
        hadw_allow_missing_state (`bool`, defaults to `False`):
            resume without an anchor file: start a fresh anchor (with a warning).
        hadw_log_metrics (`bool`, defaults to `True`):
            merge hadw/* and dgpo/* into verl's log call (both estimators).
        hadw_epsilon (`float`, defaults to `1e-06`):
            added to the GRPO std.

        > Parameters of HA-DW's anchor

        hadw_anchor_mode (`Literal["kalman", "moving_average", "fixed"]`, defaults to `"kalman"`):
            kalman (Eqs. 8-12) | moving_average (App. F) | fixed (Table 2).
        hadw_anchor_eta (`float`, defaults to `16.0`):
            η of Eq. 11, chosen by measurement (docs/choices.md).
        hadw_anchor_window (`int`, defaults to `10`):
            m of Eqs. 9-10 (h of App. F).
        hadw_anchor_sigma_source (`Literal["anchor", "accuracy"]`, defaults to `"anchor"`):
            anchor: Eq. 10 literally | accuracy: σ of the last m batch accuracies.
        hadw_anchor_sigma_warmup (`float`, defaults to `1.0`):
            σ_t while fewer than 2 past values exist (paper silent).
        hadw_anchor_eta_min (`float`, defaults to `0.05`):
            floor of η_t = clamp(η·σ_t, eta_min, 1); 0 = literal Eq. 11, which can freeze.
        hadw_anchor_init (`float | str | None`, defaults to `"first_batch"`):
            C⁻ of step 1: the first call's accuracy, or a number in [0, 1].
        hadw_anchor_include_current (`bool`, defaults to `False`):
            moving_average: include y_t in the anchor (the authors' released code).
        hadw_anchor_fixed_value (`float`, defaults to `0.5`):
            fixed mode's constant anchor.

        > Parameters of DGPO

        dgpo_dgae (`bool`, defaults to `True`):
            MAD normalisation, Eqs. 4-5 (false: GRPO std normalisation).
        dgpo_dqw (`bool`, defaults to `True`):
            difficulty-aware question weights, Eq. 6.
        dgpo_temperature (`float`, defaults to `2.0`):
            T of Eq. 6.
        dgpo_valid_token_norm (`bool`, defaults to `True`):
            valid-token loss averaging, folded into the advantages.
        dgpo_success_threshold (`float | None`, defaults to `None`):
            for DQW's accuracy when rewards are not binary.
        dgpo_epsilon (`float`, defaults to `1e-06`):
            added to the MAD / std.
    """

    terms = TRL  # the core's messages name TRL's fields

    def __post_init__(self):
        super().__post_init__()
        self.check_hadw()

    def check_hadw(self) -> None:
        """Check HA-DW's and DGPO's fields and the TRL settings they constrain; ``HadwGRPOTrainer`` runs it again."""
        self.check_adapter_fields()
        check_settings(self)

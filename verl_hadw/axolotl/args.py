"""``HadwArgs``: the plugin's keys of an Axolotl YAML, declared as Axolotl's plugins declare theirs (``KDArgs`` in
axolotl/integrations/kd/args.py): each ``hadw_*`` or ``dgpo_*``, one per ``OptionFields`` field, with its type, default
and help (tests/axolotl/test_axolotl_args.py holds them equal). It imports no Axolotl: the test reads it without one."""

from __future__ import annotations

import dataclasses
from typing import Literal, get_args, get_type_hints

from pydantic import BaseModel, Field, field_validator, model_validator

from verl_hadw.hf_trainer.option_fields import ADAPTER_FIELDS, OptionFields

HELP = {f.name: f.metadata["help"] for f in dataclasses.fields(OptionFields)}  # the option field -> its help
NUMBERS = [f"hadw_{n}" if n in ADAPTER_FIELDS else n for n, t in get_type_hints(OptionFields).items()
           if {int, float} & {t, *get_args(t)}]  # the keys whose values are numbers: hadw_lambda_scale, ...


class HadwArgs(BaseModel):
    """HA-DW's and DGPO's keys, mixed into Axolotl's config model (``HadwPlugin.get_input_args``), checked there."""

    hadw_adv_estimator: Literal["hadw", "dgpo"] = Field("hadw", description=HELP["adv_estimator"])
    hadw_accuracy_reward_index: int | None = Field(None, description=HELP["accuracy_reward_index"])
    hadw_lambda_scale: float = Field(1.3, description=HELP["hadw_lambda_scale"])
    hadw_state_key: str = Field("default", description=HELP["hadw_state_key"])
    hadw_success_threshold: float | None = Field(None, description=HELP["hadw_success_threshold"])
    hadw_base: Literal["grpo", "dgpo"] = Field("grpo", description=HELP["hadw_base"])
    hadw_difficulty_from: Literal["accuracy", "reward"] = Field("accuracy", description=HELP["hadw_difficulty_from"])
    hadw_normalize_phi: bool = Field(False, description=HELP["hadw_normalize_phi"])
    hadw_allow_missing_state: bool = Field(False, description=HELP["hadw_allow_missing_state"])
    hadw_log_metrics: bool = Field(True, description=HELP["hadw_log_metrics"])
    hadw_epsilon: float = Field(1e-06, description=HELP["hadw_epsilon"])
    hadw_anchor_mode: Literal["kalman", "moving_average", "fixed"] = Field(
        "kalman", description=HELP["hadw_anchor_mode"])
    hadw_anchor_eta: float = Field(16.0, description=HELP["hadw_anchor_eta"])
    hadw_anchor_window: int = Field(10, description=HELP["hadw_anchor_window"])
    hadw_anchor_sigma_source: Literal["anchor", "accuracy"] = Field(
        "anchor", description=HELP["hadw_anchor_sigma_source"])
    hadw_anchor_sigma_warmup: float = Field(1.0, description=HELP["hadw_anchor_sigma_warmup"])
    hadw_anchor_eta_min: float = Field(0.05, description=HELP["hadw_anchor_eta_min"])
    hadw_anchor_init: float | str | None = Field("first_batch", description=HELP["hadw_anchor_init"])
    hadw_anchor_include_current: bool = Field(False, description=HELP["hadw_anchor_include_current"])
    hadw_anchor_fixed_value: float = Field(0.5, description=HELP["hadw_anchor_fixed_value"])
    dgpo_dgae: bool = Field(True, description=HELP["dgpo_dgae"])
    dgpo_dqw: bool = Field(True, description=HELP["dgpo_dqw"])
    dgpo_temperature: float = Field(2.0, description=HELP["dgpo_temperature"])
    dgpo_valid_token_norm: bool = Field(True, description=HELP["dgpo_valid_token_norm"])
    dgpo_success_threshold: float | None = Field(None, description=HELP["dgpo_success_threshold"])
    dgpo_epsilon: float = Field(1e-06, description=HELP["dgpo_epsilon"])

    @field_validator(*NUMBERS, mode="before")
    def not_a_boolean(cls, value, info):
        """A number is never a boolean: ``hadw_lambda_scale: true`` is no 1.0, ``hadw_accuracy_reward_index: true``."""
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name}: {str(value).lower()} is a boolean, not a number. Write a number.")
        return value

    @model_validator(mode="after")
    def check_hadw(self):
        """Axolotl's whole config, once its own fields are valid: the options and the settings they constrain."""
        from verl_hadw.axolotl.checks import check_config  # here, not above: the package's import needs Axolotl
        from verl_hadw.axolotl.grpo_config import HadwTrainingArgs, option_values

        options = HadwTrainingArgs(**option_values(self))
        check_config(self, options)
        self.hadw_anchor_init = options.hadw_anchor_init  # "0.5", 5e-1 (a string to PyYAML): the number checked, 0.5
        return self

"""The HA-DW / DGPO keys of an Axolotl YAML (``adv_estimator``, ``hadw_*``, ``dgpo_*``): ``HadwAxolotlArgs``, one
pydantic field per ``OptionFields`` field (the core's declarations), which Axolotl's own validation checks beside its
keys; ``HadwTrainingArgs``, the same fields on the GRPO trainer's ``args``."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

from pydantic import BaseModel, Field, create_model, model_validator

from verl_hadw.axolotl.checks import TRL_KEYS, check_config
from verl_hadw.hf_trainer.option_fields import YAML, OptionFields, hf_terms

__all__ = ["AXOLOTL", "HadwTrainingArgs", "HadwAxolotlArgs", "option_values"]

AXOLOTL = hf_terms("Axolotl", YAML, resume_from="resume_from_checkpoint: <its folder>",
                   new_experiment="another output_dir, or no resume_from_checkpoint",
                   names=TRL_KEYS)


@dataclass
class HadwTrainingArgs(OptionFields):
    """The options on Axolotl's GRPO training arguments (``get_training_args_mixin``), set from the YAML's keys."""

    terms = AXOLOTL  # the core's messages name the YAML's keys


def option_values(config) -> dict:
    """The option keys' values of a validated Axolotl config (or of its pydantic model)."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(OptionFields)}


class _Checked(BaseModel):
    @model_validator(mode="after")
    def check_hadw(self):
        """Axolotl's whole config, once its own fields are valid: the options and the settings they constrain."""
        check_config(self, HadwTrainingArgs(**option_values(self)))
        return self


_HINTS = typing.get_type_hints(OptionFields)
HadwAxolotlArgs = create_model(  # the plugin's get_input_args: Axolotl mixes it into its config model
    "HadwAxolotlArgs", __base__=_Checked, __module__=__name__,
    **{f.name: (_HINTS[f.name], Field(default=f.default, json_schema_extra={"description": f.metadata["help"]}))
       for f in dataclasses.fields(OptionFields)})

"""``HadwPlugin``: Axolotl's plugin for HA-DW and DGPO. Listed under ``plugins:``, it adds the option keys to
Axolotl's config model (checked there), puts them on the GRPO trainer's arguments, and trains through
``HadwAxolotlGRPOTrainer``."""

from __future__ import annotations

import dataclasses

from axolotl.integrations.base import BasePlugin

from verl_hadw.axolotl.checks import TRAINER_PATH
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import ADAPTER_FIELDS, OptionFields, closest_field, declared_fields

__all__ = ["HadwPlugin"]

OPTION_KEYS = [f.name for f in dataclasses.fields(OptionFields)]


def check_keys(cfg: dict) -> None:
    """Raise ``ConfigError`` for a key of the YAML that is none of Axolotl's but looks like one of ours (Axolotl
    drops a key it does not know without a word)."""
    from axolotl.utils.schemas.config import AxolotlInputConfig

    known = set(AxolotlInputConfig.model_fields) | set(OPTION_KEYS)
    for key in cfg:
        hint = closest_field(key, OPTION_KEYS) if key not in known else None
        if hint or (key not in known and key.startswith(("hadw_", "dgpo_"))):
            raise ConfigError(
                f"Unknown key {key!r}.{f' Did you mean {hint!r}?' if hint else ''} The HA-DW / DGPO keys are: "
                f"{', '.join([*ADAPTER_FIELDS, *declared_fields()])}.")


class HadwPlugin(BasePlugin):
    """HA-DW's or DGPO's advantage in Axolotl's GRPO (``rl: grpo``), chosen by ``adv_estimator``."""

    def register(self, cfg: dict):
        check_keys(cfg)
        self._set_trainer = cfg.get("rl") == "grpo" and not cfg.get("trainer_cls")
        if self._set_trainer:
            cfg["trainer_cls"] = TRAINER_PATH

    def on_config_validation_error(self, cfg: dict):
        if getattr(self, "_set_trainer", False) and cfg.get("trainer_cls") == TRAINER_PATH:
            del cfg["trainer_cls"]

    def get_input_args(self) -> str:
        return "verl_hadw.axolotl.grpo_config.HadwAxolotlArgs"

    def get_training_args_mixin(self) -> str:
        return "verl_hadw.axolotl.grpo_config.HadwTrainingArgs"

    def get_training_args(self, cfg) -> dict:
        return {key: cfg[key] for key in OPTION_KEYS}

"""``HadwPlugin``: Axolotl's plugin for HA-DW and DGPO. Listed under ``plugins:``, it adds its keys (``HadwArgs``) to
Axolotl's config model, puts the options on the GRPO trainer's arguments, and trains through the plugin's trainer."""

from __future__ import annotations

from axolotl.integrations.base import BasePlugin

from verl_hadw.axolotl.checks import TRAINER_PATH
from verl_hadw.axolotl.grpo_config import KEYS, option_values
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import closest_field

__all__ = ["HadwPlugin"]

OPTION_KEYS = list(KEYS.values())  # the YAML's keys of the plugin


def check_keys(cfg: dict) -> None:
    """Raise ``ConfigError`` for a key of the YAML that is none of Axolotl's but looks like one of ours (Axolotl
    drops a key it does not know without a word): a misspelling, or a key without its prefix (``adv_estimator``)."""
    # internal: Axolotl's config schema, AxolotlInputConfig.model_fields (checked on Axolotl 0.19.0 with TRL 1.9.0)
    from axolotl.utils.schemas.config import AxolotlInputConfig

    known = set(AxolotlInputConfig.model_fields) | set(OPTION_KEYS)
    for key in [k for k in cfg if k not in known]:
        meant = closest_field(key, OPTION_KEYS)  # one of OPTION_KEYS, or a field of OptionFields (adv_estimator)
        hint = KEYS.get(key) or KEYS.get(meant, meant)
        if hint or key.startswith(("hadw_", "dgpo_")):
            raise ConfigError(f"Unknown key {key!r}.{f' Did you mean {hint!r}?' if hint else ''} The HA-DW / DGPO keys "
                              f"are: {', '.join(OPTION_KEYS)}.")


class HadwPlugin(BasePlugin):
    """HA-DW's or DGPO's advantage in Axolotl's GRPO (``rl: grpo``), chosen by ``hadw_adv_estimator``."""

    def register(self, cfg: dict):
        check_keys(cfg)
        self._set_trainer = cfg.get("rl") == "grpo" and not cfg.get("trainer_cls")
        if self._set_trainer:
            # trainer_cls, not the get_trainer_cls hook: Axolotl builds a hook's trainer without the model, the reward
            # functions and GRPO's arguments (core/builders/rl.py); trainer_cls swaps the class and keeps them
            cfg["trainer_cls"] = TRAINER_PATH

    def on_config_validation_error(self, cfg: dict):
        if getattr(self, "_set_trainer", False) and cfg.get("trainer_cls") == TRAINER_PATH:
            del cfg["trainer_cls"]

    def get_input_args(self) -> str:
        return "verl_hadw.axolotl.args.HadwArgs"

    def get_training_args_mixin(self) -> str:
        return "verl_hadw.axolotl.grpo_config.HadwTrainingArgs"

    def get_training_args(self, cfg) -> dict:
        return option_values(cfg)

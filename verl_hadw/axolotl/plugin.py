"""``HadwPlugin``: Axolotl's plugin for HA-DW and DGPO. Listed under ``plugins:``, it adds its keys (``HadwArgs``) to
Axolotl's config model, puts the options on the GRPO trainer's arguments, and trains through the plugin's trainer."""

from __future__ import annotations

import sys

import click
from axolotl.integrations.base import BasePlugin, PluginManager

from verl_hadw.axolotl.checks import TRAINER_PATH
from verl_hadw.axolotl.grpo_config import KEYS, option_values
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import YAML, closest_field, spelled

OPTION_KEYS = list(KEYS.values())  # the YAML's keys of the plugin
FLAT = {**KEYS, **{key: key for key in OPTION_KEYS}}  # a key or an option field -> the YAML's key


def unread(cfg: dict, path: tuple = ()):
    """(where, value) of each setting of the YAML in a section, or at the top level and not in lower case."""
    for key, value in cfg.items():
        if isinstance(value, dict):
            yield from unread(value, (*path, str(key)))
        elif path or str(key) != str(key).lower():
            yield ".".join((*path, str(key))), value


def check_keys(cfg: dict, ctx: click.Context | None = None) -> None:
    """Raise ``ConfigError`` for a value of ours that ``unread`` finds, or a key Axolotl would drop without a word that
    looks like ours (a misspelling, ``adv_estimator``) or is TRL's (``temperature``: ``trl.temperature``)."""
    # internal: Axolotl's config schema, AxolotlInputConfig.model_fields (checked on Axolotl 0.19.0 with TRL 1.9.0)
    from axolotl.utils.schemas.config import AxolotlInputConfig
    from axolotl.utils.schemas.trl import TRLConfig

    # the flags axolotl train hands to the launcher, never to the config: accelerate refuses them, python drops them
    flags = [*(ctx.args if ctx else []), "--"]
    flags = [(f.split("=")[0], f.partition("=")[2] or ("" if a[:2] == "--" else a)) for f, a in zip(flags, flags[1:])]
    for where, value in [*(f for f in flags if f[0][:2] == "--"), *unread(cfg)]:  # trl.adv_estimator, hadw.anchor.eta
        path = where.lstrip("-").replace("-", "_").lower().split(".")
        names = ["_".join(path[i:]) for i in range(len(path))]  # trl.hadw_lambda_scale, hadw.anchor.eta: ours
        ours = next((n for n in names if n.startswith(("hadw_", "dgpo_"))), None)  # or misspelt: hadw_lamda_scale
        exact = next((FLAT[n] for n in names if n in FLAT), None)
        if flat := exact or FLAT.get(closest_field(ours or "", OPTION_KEYS)):
            raise ConfigError(f"{where} is not read: write {spelled(YAML, flat, value)} at the top level of the YAML.")
        if ours:
            raise ConfigError(f"{where} is not read, and no key of ours is like it: {', '.join(OPTION_KEYS)}.")
    known = set(AxolotlInputConfig.model_fields) | set(OPTION_KEYS)
    for key in [k for k in cfg if k not in known]:
        if (trl := str(key).lower()) in TRLConfig.model_fields:  # TRL's: temperature is sampling's, epsilon the clip's
            raise ConfigError(f"Unknown key {key!r}: TRL's {trl} sits under trl:; write trl: {{{trl}: {cfg[key]}}}.")
        hint = FLAT.get(closest_field(key, OPTION_KEYS))  # closest: one of OPTION_KEYS, or an OptionFields field
        if hint or key.startswith(("hadw_", "dgpo_")):
            raise ConfigError(f"Unknown key {key!r}.{f' Did you mean {hint!r}?' if hint else ''} The HA-DW / DGPO keys "
                              f"are: {', '.join(OPTION_KEYS)}.")


class HadwPlugin(BasePlugin):
    """HA-DW's or DGPO's advantage in Axolotl's GRPO (``rl: grpo``), chosen by ``hadw_adv_estimator``."""

    def register(self, cfg: dict):
        twice = [n for n, p in PluginManager.get_instance().plugins.items() if isinstance(p, HadwPlugin)]
        if len(twice := [n for n in twice if n in cfg.get("plugins", [])]) > 1:  # else HadwArgs: a duplicate base
            raise ConfigError(f"plugins: lists HadwPlugin twice ({', '.join(twice)}): list it once.")
        check_keys(cfg, click.get_current_context(silent=True))
        self._set_trainer = cfg.get("rl") == "grpo" and not cfg.get("trainer_cls")
        if self._set_trainer:
            # trainer_cls, not the get_trainer_cls hook: Axolotl builds a hook's trainer without the model, the reward
            # functions and GRPO's arguments (core/builders/rl.py); trainer_cls swaps the class and keeps them
            cfg["trainer_cls"] = TRAINER_PATH

    def on_config_validation_error(self, cfg: dict):
        if getattr(self, "_set_trainer", False) and cfg.get("trainer_cls") == TRAINER_PATH:
            del cfg["trainer_cls"]
        errors = getattr(sys.exc_info()[1], "errors", list)()  # Axolotl calls this as it handles the ValidationError
        error = errors[0].get("ctx", {}).get("error") if len(errors) == 1 else None
        if isinstance(error, ConfigError) or (error and str(errors[0]["loc"]).startswith(("('hadw_", "('dgpo_"))):
            raise ConfigError(str(error)) from None  # ours alone: its message the traceback's last line, as register's

    def get_input_args(self) -> str:
        return "verl_hadw.axolotl.args.HadwArgs"

    def get_training_args_mixin(self) -> str:
        return "verl_hadw.axolotl.grpo_config.HadwTrainingArgs"

    def get_training_args(self, cfg) -> dict:
        return option_values(cfg)

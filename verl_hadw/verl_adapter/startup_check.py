"""The plugin's start-up check as a Hydra job callback: in the ``python -m verl.trainer.main_ppo`` process, before Ray.

verl 0.9.0 has no checkpoint callbacks, so nothing of the plugin's sees the config before the first estimator call,
which comes after the cluster has started and rolled out the first batch. Hydra's callbacks are Hydra's public API
(``hydra.callbacks``), and verl's ``main_ppo`` runs under ``@hydra.main``, which calls ``on_job_start(config)`` with
the composed config before ``main_ppo``'s own code runs: no verl code is patched. Every shipped YAML names it:

    hydra:
      callbacks:
        verl_hadw:
          _target_: verl_hadw.verl_adapter.startup_check.StartupCheck

(on the command line: ``+hydra.callbacks.verl_hadw._target_=verl_hadw.verl_adapter.startup_check.StartupCheck``;
``~hydra.callbacks.verl_hadw`` removes it). It runs the checkpoint callback's checks (``validation``). Hydra turns
an ``Exception`` raised by a callback into a warning and goes on, so a ``ConfigError`` found here ends the process
as ``SystemExit`` carrying its message (exit code 1); anything else it raises stays Hydra's warning, and the first
estimator call checks the config again. It runs on verl 0.9.1 too: the checkpoint callback checks the same config
in verl's driver, but that driver is a Ray actor, so a bad config found here stops before Ray and TransferQueue
start (about 25 core-seconds and half a minute sooner on 2 cores). Where the callback will run, its warnings
(options no estimator reads) are left to it, said once, in verl's driver.
"""

from __future__ import annotations

import warnings
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from verl_hadw import verl_support
from verl_hadw.core.errors import ConfigError
from verl_hadw.verl_adapter.config import checks as config_check
from verl_hadw.verl_adapter.validation import validated_options

__all__ = ["StartupCheck", "TARGET"]

TARGET = "verl_hadw.verl_adapter.startup_check.StartupCheck"


def callback_will_check(config: Any) -> bool:
    """Whether verl builds the plugin's checkpoint callback for ``config`` (which then runs the same checks)."""
    trainer = config.get("trainer") if hasattr(config, "get") else None
    if trainer is None or not verl_support.has_checkpoint_callback() or trainer.get("use_v1", True) is False:
        return False
    return config_check.is_our_callback(trainer.get("checkpoint_callback_class", None))


class StartupCheck(Callback):
    """``on_job_start``: the start-up check of the composed config, before Ray (errors only where the checkpoint
    callback runs: it says the warnings)."""

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        if not hasattr(config, "get") or config.get("algorithm") is None:
            return
        root = OmegaConf.masked_copy(config, [key for key in config if key != "hydra"])  # verl's config alone
        callback_checks = callback_will_check(config)
        try:
            with warnings.catch_warnings():
                if callback_checks:  # the callback says them, once
                    warnings.simplefilter("ignore")
                validated_options(root)
        except ConfigError as exc:  # Hydra would only warn: stop main_ppo here, before Ray starts
            raise SystemExit(f"verl-hadw start-up check (hydra.callbacks.verl_hadw): ConfigError: {exc}") from exc
        if not callback_checks:
            config_check.warn_ignored_callback(root.algorithm, root.get("trainer"), at_start=True)

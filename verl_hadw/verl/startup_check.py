"""The start-up check of a verl config (``validated_options``), and ``StartupCheck``, the Hydra job callback that
runs it in ``main_ppo``'s process before Ray starts (every shipped YAML names it); the checkpoint callback runs the
same check in verl's driver."""

from __future__ import annotations

import warnings
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

import verl_hadw.verl.support as support
from verl_hadw.core.errors import ConfigError
from verl_hadw.verl.config import checks as config_check
from verl_hadw.verl.config.run_options import RunOptions, parse_run, plain_algorithm

__all__ = ["StartupCheck", "TARGET", "validate_config", "validated_options"]

TARGET = "verl_hadw.verl.startup_check.StartupCheck"


def validate_config(config) -> str:
    """``validated_options(config).estimator``: the checked ``algorithm.adv_estimator``."""
    return validated_options(config).estimator


def validated_options(config, by_callback: bool = False) -> RunOptions:
    """The run's ``RunOptions``, after checking verl's full ``config``: one ``ConfigError`` lists every problem.
    ``by_callback``: called by the checkpoint callback, which saves the anchor (no unsaved-anchor warning)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import verl_hadw.verl.estimators  # noqa: F401  (registers even where the entry point was disabled)
    algorithm, trainer = plain_algorithm(config.algorithm), config.get("trainer")
    problems: list[str] = []

    def attempt(check):
        try:
            return check()
        except ConfigError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))

    def registered(estimator: str) -> None:
        try:
            get_adv_estimator_fn(estimator)
        except ValueError as exc:
            raise ConfigError(f"algorithm.adv_estimator={estimator!r} is not a registered estimator ({exc})") from exc

    run = attempt(lambda: parse_run(algorithm))
    attempt(lambda: config_check.check_algorithm(algorithm, config))
    attempt(lambda: config_check.check_filter_groups(config, run))
    attempt(lambda: config_check.check_dgpo_options_under_gdpo(algorithm))
    attempt(lambda: registered(run.estimator if run is not None else algorithm.get("adv_estimator", "gae")))
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        listed = "\n".join(f"  {i}. {problem}" for i, problem in enumerate(problems, start=1))
        raise ConfigError(f"{len(problems)} problems in the config:\n{listed}")
    if not by_callback:
        config_check.warn_once(config_check.unsaved_anchor(algorithm, trainer))
    return run


def callback_will_check(config: Any) -> bool:
    """Whether verl builds the plugin's checkpoint callback for ``config`` (which then runs the same checks)."""
    trainer = config.get("trainer") if hasattr(config, "get") else None
    return (trainer is not None and support.has_checkpoint_callback() and trainer.get("use_v1", True) is not False
            and config_check.is_our_callback(trainer.get("checkpoint_callback_class", None)))


class StartupCheck(Callback):
    """Checks the composed config in ``on_job_start``; a ``ConfigError`` ends the process (``SystemExit``), since
    Hydra turns a callback's exception into a warning. Warnings are left to the checkpoint callback where it runs."""

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
        except ConfigError as exc:  # stop main_ppo here, before Ray starts
            raise SystemExit(f"verl-hadw start-up check (hydra.callbacks.verl_hadw): ConfigError: {exc}") from exc
        if not callback_checks:
            config_check.warn_once(config_check.ignored_callback(root.algorithm, root.get("trainer"), at_start=True))

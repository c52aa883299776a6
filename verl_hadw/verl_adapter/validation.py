"""The plugin's start-up check of a verl config: both option nodes, their section names, a registered estimator.

verl hides plugin import errors and looks the estimator up only at the first training step; the checkpoint
callback (and ``verl-hadw configs --validate``) call this before anything starts, so a typo stops the run at
once with a message naming the key.
"""

from __future__ import annotations

from verl_hadw.core.errors import ConfigError
from verl_hadw.verl_adapter.config import checks as config_check
from verl_hadw.verl_adapter.config.call_config import plain_algorithm
from verl_hadw.verl_adapter.config.dynamic_sampling import check_filter_groups
from verl_hadw.verl_adapter.config.gdpo_slip import check_gdpo_slip
from verl_hadw.verl_adapter.config.run_options import RunOptions, parse_run

__all__ = ["validate_config", "validated_options"]


def validate_config(config) -> str:
    """Parse both option nodes and check the estimator is registered; returns ``algorithm.adv_estimator``."""
    return validated_options(config).estimator


def validated_options(config, by_callback: bool = False) -> RunOptions:
    """``validate_config``, returning the parsed options (the checkpoint callback keeps them).

    Every check runs, and one ``ConfigError`` lists every problem found (a typo and a refused combination are
    reported together, so a user fixes both before the next start instead of one per start)."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import verl_hadw.verl_adapter.estimators  # noqa: F401  (registers even where the entry point was disabled or failed)

    algorithm, trainer = plain_algorithm(config.algorithm), config.get("trainer")  # the one read of the config
    problems: list[str] = []

    def attempt(check):
        try:
            return check()
        except ConfigError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
            return None

    def registered(estimator: str) -> None:
        try:
            get_adv_estimator_fn(estimator)
        except ValueError as exc:
            raise ConfigError(f"algorithm.adv_estimator={estimator!r} is not a registered estimator ({exc})") from exc

    run = attempt(lambda: parse_run(algorithm))
    attempt(lambda: config_check.check_algorithm(algorithm, config))  # near-miss sections raise; unused options warn
    attempt(lambda: check_filter_groups(config, run))  # HA-DW with DAPO's dynamic sampling: refused
    attempt(lambda: check_gdpo_slip(algorithm))  # verl's gdpo with algorithm.dgpo.* set: did you mean dgpo?
    attempt(lambda: registered(run.estimator if run is not None else algorithm.get("adv_estimator", "gae")))
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        listed = "\n".join(f"  {i}. {problem}" for i, problem in enumerate(problems, start=1))
        raise ConfigError(f"{len(problems)} problems in the config:\n{listed}")
    if not by_callback:  # the callback saves the anchor, whether the config names it or code built it
        config_check.warn_unsaved_anchor(algorithm, trainer)  # HA-DW checkpoints without the callback: not saved
    return run

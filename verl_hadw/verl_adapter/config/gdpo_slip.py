"""verl's own ``gdpo`` estimator is one letter from ``dgpo``: the slip is refused, saying what each one is.

``algorithm.adv_estimator=gdpo`` is GDPO (Group reward-Decoupled Normalization Policy Optimization, arXiv
2601.05242), verl's estimator for rewards of several dimensions. It never reads ``algorithm.dgpo``; without
``algorithm.gdpo_reward_keys`` verl stops it at its first advantage with an assertion that does not name the slip.
``check_gdpo_slip`` refuses ``gdpo`` with ``algorithm.dgpo.*`` set: the start-up check runs it (the checkpoint
callback), and ``guard_verl_gdpo`` puts it in front of verl's registered ``gdpo`` function, so a run without the
callback stops at its first advantage, before any update. ``gdpo`` without ``algorithm.dgpo.*`` is verl's GDPO,
unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

from verl_hadw.core.errors import ConfigError
from verl_hadw.verl_adapter.config.checks import section_of, set_keys

__all__ = ["GDPO", "check_gdpo_slip", "guard_verl_gdpo"]

GDPO = (
    "GDPO (Group reward-Decoupled Normalization Policy Optimization, arXiv 2601.05242): verl's estimator for rewards "
    "of several dimensions, each normalised within its group, which needs algorithm.gdpo_reward_keys"
)


def check_gdpo_slip(algorithm: Any) -> None:
    """Raise ``ConfigError`` for ``adv_estimator=gdpo`` with any ``algorithm.dgpo.*`` option set."""
    if not hasattr(algorithm, "get") or algorithm.get("adv_estimator") != "gdpo":
        return
    dgpo = set_keys(section_of(algorithm, "dgpo"), "algorithm.dgpo")
    if not dgpo:
        return
    raise ConfigError(
        f"algorithm.adv_estimator=gdpo with {', '.join(dgpo)} set: did you mean algorithm.adv_estimator=dgpo "
        "(DGPO, MathForge's difficulty-aware group policy optimization, which reads algorithm.dgpo)? gdpo is "
        f"{GDPO}; it never reads algorithm.dgpo. Set algorithm.adv_estimator=dgpo, or remove the algorithm.dgpo "
        "options to train GDPO."
    )


def guard_verl_gdpo() -> None:
    """Put ``check_gdpo_slip`` in front of verl's registered ``gdpo`` (idempotent; nothing without one). verl calls
    an estimator with its ``algorithm`` node as ``config``; the wrapper passes every argument on unchanged."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    verl_gdpo = ADV_ESTIMATOR_REGISTRY.get("gdpo")
    if verl_gdpo is None or getattr(verl_gdpo, "verl_hadw_guard", False):
        return

    @functools.wraps(verl_gdpo)
    def gdpo(*args, **kwargs):
        check_gdpo_slip(kwargs.get("config"))
        return verl_gdpo(*args, **kwargs)

    gdpo.verl_hadw_guard = True
    ADV_ESTIMATOR_REGISTRY["gdpo"] = gdpo

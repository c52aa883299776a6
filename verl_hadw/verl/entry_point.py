"""The ``verl.plugins`` entry point: registers the ``hadw`` and ``dgpo`` estimators when verl's ``core_algos`` loads.

verl imports this module in every process that imports verl; registering waits for ``core_algos`` (a wrapt
post-import hook), so processes that never compute an advantage pay nothing. No Ray call, no file I/O.
"""

import functools
import logging

import wrapt

ESTIMATORS = ("hadw", "dgpo")
CORE_ALGOS = "verl.trainer.ppo.core_algos"

__all__ = ["CORE_ALGOS", "ESTIMATORS", "register", "guard_verl_gdpo"]


def register(_core_algos=None) -> None:
    """Register ``hadw`` and ``dgpo`` and guard verl's ``gdpo`` (idempotent). A failure is logged, not raised, so
    that verl's own estimators keep working."""
    try:
        from verl_hadw.verl import estimators  # noqa: F401  (its decorators register hadw and dgpo)

        guard_verl_gdpo()
    except Exception as error:  # noqa: BLE001
        logging.getLogger(__name__).warning(
            f"verl-hadw could not register {' and '.join(ESTIMATORS)} in verl: {error!r}. Run verl-hadw doctor.")


def guard_verl_gdpo() -> None:
    """Wrap verl's registered ``gdpo`` so that it first refuses ``algorithm.dgpo.*`` options (did you mean dgpo?),
    for runs without the start-up check. The wrapper names this module, and ``__wrapped__`` is verl's function."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from verl_hadw.verl.config.checks import check_dgpo_options_under_gdpo

    verl_gdpo = ADV_ESTIMATOR_REGISTRY.get("gdpo")
    if verl_gdpo is None or getattr(verl_gdpo, "verl_hadw_guard", False):
        return

    def gdpo(*args, **kwargs):
        check_dgpo_options_under_gdpo(kwargs.get("config"))
        return verl_gdpo(*args, **kwargs)

    functools.update_wrapper(gdpo, verl_gdpo, assigned=("__name__", "__doc__"))  # its module and qualname: ours
    gdpo.verl_hadw_guard = True
    ADV_ESTIMATOR_REGISTRY["gdpo"] = gdpo


wrapt.register_post_import_hook(register, CORE_ALGOS)

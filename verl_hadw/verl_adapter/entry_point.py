"""Entry-point target of the ``verl.plugins`` group: registers ``hadw`` and ``dgpo`` in verl.

verl imports this module at the end of ``import verl`` in every process: the ``python -m`` process, the TaskRunner
actor, the workers, and also the rollout server, the reward workers and the request router, which never compute an
advantage. So it registers when verl's ``core_algos`` (the estimator registry) is imported, not before: a
post-import hook (wrapt's; at once if ``core_algos`` is already loaded). A process that never imports
``core_algos`` does not pay for it (about 1.3 s of CPU: it pulls in verl's worker configs and transformers).
Registering imports the estimators, whose decorators register them, and puts the gdpo/dgpo slip check in front of
verl's own ``gdpo`` (``gdpo_slip``). It changes nothing else in verl: the metrics hook waits for the first
hadw/dgpo call (``metrics.enable``). No Ray call, no file I/O.
"""

import logging

import wrapt

ESTIMATORS = ("hadw", "dgpo")
CORE_ALGOS = "verl.trainer.ppo.core_algos"

__all__ = ["CORE_ALGOS", "ESTIMATORS", "register"]


def register(_core_algos=None) -> None:
    """Register ``hadw`` and ``dgpo`` and guard verl's ``gdpo`` (idempotent). A failure is logged, not raised: it
    must not break verl's own estimators, as verl's plugin loader does not let a plugin break ``import verl``."""
    try:
        from verl_hadw.verl_adapter import estimators  # noqa: F401  (its decorators register hadw and dgpo)
        from verl_hadw.verl_adapter.config.gdpo_slip import guard_verl_gdpo

        guard_verl_gdpo()
    except Exception as error:  # noqa: BLE001
        logging.getLogger(__name__).warning(
            f"verl-hadw could not register {' and '.join(ESTIMATORS)} in verl: {error!r} "
            "(verl-hadw doctor says more)")


wrapt.register_post_import_hook(register, CORE_ALGOS)

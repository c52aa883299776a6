"""The ``verl.plugins`` entry point: registers the ``hadw`` and ``dgpo`` estimators when verl's ``core_algos`` loads.
verl imports this module in every process that imports verl; registering waits for ``core_algos`` (a wrapt
post-import hook), so processes that never compute an advantage pay nothing. No Ray call, no file I/O. It adds two
names to verl's registry and touches nothing of verl's own (its ``gdpo`` included)."""

import logging

import wrapt

ESTIMATORS = ("hadw", "dgpo")


def register(_core_algos=None) -> None:
    """Register ``hadw`` and ``dgpo`` (idempotent); a failure is logged, not raised: verl's own estimators work on."""
    try:
        from verl_hadw.verl import estimators  # noqa: F401  (its decorators register hadw and dgpo)
    except Exception as error:  # noqa: BLE001
        logging.getLogger(__name__).warning(
            f"verl-hadw could not register {' and '.join(ESTIMATORS)} in verl: {error!r}. Run verl-hadw doctor.")


wrapt.register_post_import_hook(register, "verl.trainer.ppo.core_algos")

"""Entry-point target of the ``verl.plugins`` group: registers ``hadw`` and ``dgpo`` in verl.

verl imports this module at the end of ``import verl`` in every process (the ``python -m`` process, the
TaskRunner actor, the workers). It must stay light and idempotent: it imports the estimators (whose
decorators register them) and wraps ``Tracking.log`` for metrics. No Ray call, no file I/O.
"""

from verl_hadw import estimators, metrics

ESTIMATORS = ("hadw", "dgpo")

metrics.install_tracking_hook()

__all__ = ["ESTIMATORS", "estimators"]

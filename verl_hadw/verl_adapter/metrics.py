"""Per-step HA-DW / DGPO metrics, and the hook that merges them into verl's own per-step log call.

verl gives estimators no metrics channel. The estimators record into this process's ``core.metric_values``
buffer (several calls of one step are combined); ``install_tracking_hook`` wraps ``verl.utils.tracking.Tracking.log`` so
that step N's values join the ``logger.log(data, step=N)`` call both trainers make after the step, and so
reach every backend (console, wandb, tensorboard, ...).

verl is left untouched until it is used: the hook is installed by the first ``hadw``/``dgpo`` call (``enable``) or
by the checkpoint callback, never by ``import verl``, so a plain GRPO run with the package installed sees
verl's own ``Tracking.log``.
"""

from __future__ import annotations

import os

import torch

from verl_hadw.core.anchor.machine import AnchorView
from verl_hadw.verl_adapter.process_state import PROCESS

__all__ = [
    "record_hadw",
    "record_dgpo",
    "pop",
    "enable",
    "install_tracking_hook",
    "uninstall_tracking_hook",
]

def record_hadw(view: AnchorView, phi: torch.Tensor, lambda_scale: float, recoveries: int = 0,
                summary: tuple[float, ...] | None = None) -> None:
    """One HA-DW call (``MetricBuffer.record_hadw``), into this process's buffer."""
    PROCESS.pending_metrics.record_hadw(view, phi, lambda_scale, recoveries, summary)


def record_dgpo(step: int, counts: dict[str, float]) -> None:
    """One DGPO call's counts (``MetricBuffer.record_dgpo``), into this process's buffer."""
    PROCESS.pending_metrics.record_dgpo(step, counts)


def pop(step: int) -> dict[str, float]:
    """The metrics of ``step``, removed from the buffer (empty if nothing was recorded)."""
    return PROCESS.pending_metrics.pop(step)


# ---------------------------------------------------------------------------------- Tracking.log hook
def _hook_enabled() -> bool:
    return os.environ.get("VERL_HADW_LOG_METRICS", "1").lower() not in ("0", "false", "no")


def enable(log_metrics: bool) -> bool:
    """The one place that decides whether metrics reach verl, for both estimators and the callback: install the
    hook once, unless switched off.

    ``log_metrics``: the run's parsed ``algorithm.hadw.log_metrics``; false removes the hook and keeps it out for
    the process (also for ``dgpo``), as does ``VERL_HADW_LOG_METRICS=0``.
    """
    if not log_metrics:
        PROCESS.metrics_opted_out = True
        uninstall_tracking_hook()
        return False
    return False if PROCESS.metrics_opted_out else install_tracking_hook()


def install_tracking_hook() -> bool:
    """Wrap ``Tracking.log`` once so each step's log call carries that step's hadw/* and dgpo/* metrics.

    Idempotent; ``VERL_HADW_LOG_METRICS=0`` (or ``algorithm.hadw.log_metrics=false`` via the checkpoint
    callback) leaves verl untouched. Returns whether the hook is installed.
    """
    if not _hook_enabled():
        return False
    from verl.utils.tracking import Tracking

    original = Tracking.log
    if getattr(original, "_verl_hadw_hook", False):  # cheap: every estimator call passes here
        return True

    def log(self, data, step, *args, **kwargs):
        extra = pop(step) if isinstance(step, int) else {}
        if extra:
            data = {**data, **{k: v for k, v in extra.items() if k not in data}}
        return original(self, data, step, *args, **kwargs)

    log._verl_hadw_hook = True
    log._verl_hadw_original = original
    Tracking.log = log
    return True


def uninstall_tracking_hook() -> None:
    from verl.utils.tracking import Tracking

    original = getattr(Tracking.log, "_verl_hadw_original", None)
    if original is not None:
        Tracking.log = original

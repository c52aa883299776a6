"""Per-step hadw/* and dgpo/* metrics, merged into verl's own per-step ``Tracking.log`` call by a hook that the first
hadw/dgpo call or the checkpoint callback installs (never ``import verl``)."""

from __future__ import annotations

import functools
import os

from verl.utils.tracking import Tracking  # loaded with verl's core_algos, before this module

from verl_hadw.verl.process_state import PROCESS


def pop(step: int) -> dict[str, float]:
    """The metrics of ``step``, removed from the buffer (empty if nothing was recorded)."""
    return PROCESS.pending_metrics.pop(step)


def enable(log_metrics: bool) -> bool:
    """Install the hook once (returns whether it is); ``log_metrics=false`` removes it for the rest of the process."""
    if not log_metrics:
        PROCESS.metrics_opted_out = True
        uninstall_tracking_hook()
        return False
    return False if PROCESS.metrics_opted_out else install_tracking_hook()


def install_tracking_hook() -> bool:
    """Wrap ``Tracking.log`` (idempotent) so each step's log call carries that step's metrics; returns whether it is
    (``VERL_HADW_LOG_METRICS=0``: not). The wrapper names this module; ``__wrapped__`` is verl's."""
    if os.environ.get("VERL_HADW_LOG_METRICS", "1").lower() in ("0", "false", "no"):
        return False
    original = Tracking.log  # verl internal: the Tracking.log method, hooked (checked on verl 0.9.0, 0.9.1)
    if getattr(original, "_verl_hadw_hook", False):  # cheap: every estimator call passes here
        return True

    def log(self, data, step, *args, **kwargs):
        if extra := (pop(step) if isinstance(step, int) else {}):
            data = {**data, **{k: v for k, v in extra.items() if k not in data}}
        return original(self, data, step, *args, **kwargs)

    functools.update_wrapper(log, original, assigned=("__name__", "__doc__"))
    log._verl_hadw_hook = True
    Tracking.log = log
    return True


def uninstall_tracking_hook() -> None:
    if getattr(Tracking.log, "_verl_hadw_hook", False):
        Tracking.log = Tracking.log.__wrapped__

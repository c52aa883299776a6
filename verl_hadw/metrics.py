"""Per-step HA-DW / DGPO metrics, and the hook that merges them into verl's own per-step log call.

verl gives estimators no metrics channel. The estimators record into a small per-step buffer here (several
calls of one step are combined); ``install_tracking_hook`` wraps ``verl.utils.tracking.Tracking.log`` so
that step N's values join the ``logger.log(data, step=N)`` call both trainers make after the step, and so
reach every backend (console, wandb, tensorboard, ...). The buffer only keeps the last ``MAX_STEPS`` steps.

verl is left untouched until it is used: the hook is installed by the first ``hadw``/``dgpo`` call (``enable``) or
by the checkpoint callback, never by ``import verl``, so a plain GRPO run with the package installed sees
verl's own ``Tracking.log``.
"""

from __future__ import annotations

import math
import os

import torch

from verl_hadw import options
from verl_hadw.anchor.machine import AnchorView
from verl_hadw.process_state import PROCESS

__all__ = [
    "record_hadw",
    "record_dgpo",
    "peek",
    "pop",
    "enable",
    "install_tracking_hook",
    "uninstall_tracking_hook",
]

MAX_STEPS = 64
_SUM, _MIN, _MAX, _LAST = "sum", "min", "max", "last"


def _record(step: int, values: dict[str, tuple[str, float]]) -> None:
    pending = PROCESS.pending_metrics  # step -> {name: (how, value)}, oldest first
    acc = pending.setdefault(step, {})
    for name, (how, value) in values.items():
        if name not in acc or how == _LAST:
            acc[name] = (how, value)
            continue
        old = acc[name][1]
        combine = {_SUM: lambda a, b: a + b, _MIN: min, _MAX: max}[how]
        acc[name] = (how, combine(old, value) if not math.isnan(old) else value)
    while len(pending) > MAX_STEPS:
        pending.popitem(last=False)


def record_hadw(view: AnchorView, phi: torch.Tensor, lambda_scale: float, recoveries: int = 0) -> None:
    """One HA-DW call: the anchor view (last call wins), Φ over its valid responses, and how often the
    anchor actor had to be rebuilt from the driver's mirror."""
    phi = phi.double()
    total, sumsq, low, high, amplified = torch.stack(
        [phi.sum(), (phi * phi).sum(), phi.min(), phi.max(), (phi > lambda_scale).sum().double()]
    ).tolist()  # one sync instead of five
    _record(
        view.step,
        {
            "hadw/anchor_prior": (_LAST, view.prior),
            "hadw/anchor_posterior": (_LAST, view.posterior),
            "hadw/batch_acc": (_LAST, view.batch_acc),
            "hadw/eta_t": (_LAST, view.eta_t),
            "hadw/sigma_t": (_LAST, view.sigma_t),
            "hadw/actor_recoveries": (_LAST, float(recoveries)),
            "_phi_n": (_SUM, float(phi.numel())),
            "_phi_sum": (_SUM, total),
            "_phi_sumsq": (_SUM, sumsq),
            "_phi_amplified": (_SUM, amplified),  # Φ > λ: D = +1, the advantage is amplified
            "hadw/phi_min": (_MIN, low),
            "hadw/phi_max": (_MAX, high),
        },
    )


def record_dgpo(step: int, counts: dict[str, float]) -> None:
    """One DGPO call's group and token counts (see ``estimators.dgpo_advantage``)."""
    _record(
        step,
        {
            "dgpo/valid_groups": (_SUM, counts["valid_groups"]),
            "dgpo/zero_var_groups": (_SUM, counts["groups"] - counts["valid_groups"]),
            "_tokens_all": (_SUM, counts["tokens_all"]),
            "_tokens_valid": (_SUM, counts["tokens_valid"]),
            "dgpo/weight_min": (_MIN, counts["weight_min"]),
            "dgpo/weight_max": (_MAX, counts["weight_max"]),
        },
    )


def _finalize(acc: dict[str, tuple[str, float]]) -> dict[str, float]:
    out = {name: value for name, (_, value) in acc.items() if not name.startswith("_")}
    if "_phi_n" in acc:
        n = acc["_phi_n"][1]
        mean = acc["_phi_sum"][1] / n
        out["hadw/phi_mean"] = mean
        out["hadw/phi_std"] = math.sqrt(max(acc["_phi_sumsq"][1] / n - mean * mean, 0.0))
        out["hadw/frac_amplified"] = acc["_phi_amplified"][1] / n
    if "_tokens_all" in acc:
        out["dgpo/valid_token_ratio"] = acc["_tokens_valid"][1] / acc["_tokens_all"][1]
    return out


def peek(step: int) -> dict[str, float]:
    """The metrics recorded so far for ``step`` (left in the buffer)."""
    return _finalize(PROCESS.pending_metrics.get(step, {}))


def pop(step: int) -> dict[str, float]:
    """The metrics of ``step``, removed from the buffer (empty if nothing was recorded)."""
    return _finalize(PROCESS.pending_metrics.pop(step, {}))


# ---------------------------------------------------------------------------------- Tracking.log hook
def _hook_enabled() -> bool:
    return os.environ.get("VERL_HADW_LOG_METRICS", "1").lower() not in ("0", "false", "no")


def enable(algorithm) -> bool:
    """The one place that decides whether metrics reach verl, for both estimators and the callback: install the
    hook once, unless switched off.

    ``algorithm``: verl's ``algorithm`` node; ``algorithm.hadw.log_metrics=false`` removes the hook and keeps
    it out for the process (also for ``dgpo``), as does ``VERL_HADW_LOG_METRICS=0``.
    """
    if not options.log_metrics(algorithm):
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

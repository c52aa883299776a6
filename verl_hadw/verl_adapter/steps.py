"""The one place that decides which training step an estimator call belongs to.

verl's trainers (v1 and legacy) set ``verl.utils.skip.SkipManager.step`` in the driver process before the step
computes advantages; the estimators read it here. Outside a trainer (unit use, notebooks) every call is a step
of its own: the caller's previous step + 1.
"""

from __future__ import annotations

from verl_hadw.verl_adapter.process_state import PROCESS

__all__ = ["trainer_step", "trainer_run", "resolve_step", "stateless_step"]


def trainer_step() -> int | None:
    """verl's current global step, or None outside a trainer (SkipManager.step is -1 until set)."""
    try:
        from verl.utils.skip.skip_manager import SkipManager
    except ImportError:  # pragma: no cover - older verl
        return None
    step = getattr(SkipManager, "step", -1)
    return step if isinstance(step, int) and step > 0 else None


def trainer_run() -> object | None:
    """A token of verl's current ``fit()``, compared by identity: both trainers call ``SkipManager.init`` at the
    start of ``fit()``, which replaces ``SkipManager.skip_instances`` with a new dict (None: no verl)."""
    try:
        from verl.utils.skip.skip_manager import SkipManager
    except ImportError:  # pragma: no cover - older verl
        return None
    return getattr(SkipManager, "skip_instances", None)


def resolve_step(previous: int | None) -> int:
    """The trainer's step, or ``previous + 1`` outside a trainer (``previous``: the caller's last step)."""
    step = trainer_step()
    return step if step is not None else (previous or 0) + 1


def stateless_step() -> int:
    """The step of an estimator without state of its own (dgpo files its metrics under it)."""
    PROCESS.last_stateless_step = resolve_step(PROCESS.last_stateless_step)
    return PROCESS.last_stateless_step

"""Driver-side access to the anchor: which training step a call belongs to, and where the state lives.

The estimator runs in verl's driver (the TaskRunner actor). It learns the step from
``verl.utils.skip.SkipManager.step`` (set by both trainers in the same process); outside a trainer (unit
use, notebooks) every call is its own step. The state itself is an ``AnchorState`` kept in this process,
one per ``algorithm.hadw.state_key``.
"""

from __future__ import annotations

import logging
import warnings

from verl_hadw.anchor import AnchorState, AnchorView
from verl_hadw.config import AnchorConfig, HadwConfig

__all__ = ["observe", "trainer_step", "current_step_for_metrics", "get_client", "reset", "AnchorClient"]

logger = logging.getLogger(__name__)

_CLIENTS: dict[str, "AnchorClient"] = {}
_metrics_step = 0


def trainer_step() -> int | None:
    """verl's current global step, or None outside a trainer (SkipManager.step is -1 until set)."""
    try:
        from verl.utils.skip.skip_manager import SkipManager
    except ImportError:  # pragma: no cover - older verl
        return None
    step = getattr(SkipManager, "step", -1)
    return step if isinstance(step, int) and step > 0 else None


def current_step_for_metrics() -> int:
    """The step a stateless estimator (dgpo) files its metrics under."""
    global _metrics_step
    step = trainer_step()
    _metrics_step = step if step is not None else _metrics_step + 1
    return _metrics_step


class AnchorClient:
    """One experiment's anchor: assigns (step, call) ids and applies observations to the state."""

    def __init__(self, key: str, config: AnchorConfig, state: AnchorState | None = None):
        self.key = key
        self.config = config
        self.state = state if state is not None else AnchorState(config=config)
        self._step: int | None = None
        self._call = 0

    def next_ids(self) -> tuple[int, int]:
        """(step, call) of the next estimator call; calls of one step are numbered 0, 1, ..."""
        step = trainer_step()
        if step is None:  # no trainer: each call is a step of its own
            step = (self.state.open_step or 0) + 1
        self._call = self._call + 1 if step == self._step else 0
        self._step = step
        return step, self._call

    def observe(self, correct: float, count: int) -> AnchorView:
        step, call = self.next_ids()
        view = self.state.observe(step, call, correct, count)
        self._warn_if_frozen(view)
        return view

    def _warn_if_frozen(self, view: AnchorView) -> None:
        if not view.frozen or self.state.warned_frozen:
            return
        self.state.mark_warned()
        message = (
            f"HA-DW anchor '{self.key}' is frozen: it moved < 1e-3 over {self.config.window} steps while the batch "
            f"accuracy is > 0.05 away from it (anchor {view.posterior:.4f}, accuracy {view.batch_acc:.4f}). The literal "
            "Eq. 10 sigma shrinks with the anchor's own history; raise algorithm.hadw.anchor.eta, set "
            "anchor.sigma_source=accuracy or anchor.eta_min > 0."
        )
        logger.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def get_client(cfg: HadwConfig) -> AnchorClient:
    """The client for ``cfg.state_key``, created on first use; a key's anchor config may not change."""
    client = _CLIENTS.get(cfg.state_key)
    if client is None:
        client = _CLIENTS[cfg.state_key] = AnchorClient(cfg.state_key, cfg.anchor)
    elif client.config != cfg.anchor:
        raise ValueError(
            f"anchor state_key '{cfg.state_key}' is already in use with a different anchor config "
            f"({client.config} vs {cfg.anchor}); give each experiment its own algorithm.hadw.state_key"
        )
    return client


def observe(cfg: HadwConfig, correct: float, count: int) -> AnchorView:
    """Record one estimator call (Σ accuracy, number of valid responses) and return the step's anchor view."""
    return get_client(cfg).observe(correct, count)


def reset(key: str | None = None) -> None:
    """Forget one anchor (or all, and the dgpo step counter) in this process: for tests and notebooks."""
    global _metrics_step
    if key is None:
        _CLIENTS.clear()
        _metrics_step = 0
    else:
        _CLIENTS.pop(key, None)

"""Driver-side access to the anchor: which training step a call belongs to, and where the state lives.

The estimator runs in verl's driver (the TaskRunner actor); ``steps`` says which training step a call belongs
to. Each ``algorithm.hadw.state_key`` has one client here and one store (``anchor_store``): a named Ray actor
when Ray is up, else this process.
"""

from __future__ import annotations

import logging
import warnings

from verl_hadw import steps
from verl_hadw.anchor.machine import AnchorView
from verl_hadw.anchor.stores import make_store
from verl_hadw.options import AnchorConfig, HadwConfig

__all__ = [
    "observe",
    "restore",
    "state_dict",
    "get_client",
    "reset",
    "AnchorClient",
    "MissingAnchorStateError",
]

logger = logging.getLogger(__name__)

_CLIENTS: dict[str, "AnchorClient"] = {}


class MissingAnchorStateError(RuntimeError):
    """A resumed run reached HA-DW without the anchor it had before the restart."""


class AnchorClient:
    """One experiment's anchor: assigns (step, call) ids and sends observations to its store."""

    def __init__(self, cfg: HadwConfig, state: dict | None = None):
        self.key = cfg.state_key
        self.config: AnchorConfig = cfg.anchor
        self.allow_missing_state = cfg.allow_missing_state
        self.restored = state is not None
        self.store = make_store(self.key, self.config, state)
        self._step: int | None = None
        self._call = 0
        self.legacy = None  # legacy_resume.LegacyCheckpoint with trainer.use_v1=false: saves and restores the anchor

    @property
    def recoveries(self) -> int:
        return self.store.recoveries

    def next_ids(self) -> tuple[int, int]:
        """(step, call) of the next estimator call; calls of one step are numbered 0, 1, ..."""
        step = steps.trainer_step()
        if step is None:  # no trainer: each call is a step of its own
            step = steps.resolve_step(self._step if self._step is not None else self.store.state_dict()["open_step"])
        elif self._step is None and not self.restored and step > 1:
            self._check_fresh_start(step)
        self._call = self._call + 1 if step == self._step else 0
        self._step = step
        return step, self._call

    def _check_fresh_start(self, step: int) -> None:
        """First call of a process at step > 1: a resumed run whose anchor was not restored."""
        message = (
            f"HA-DW anchor '{self.key}' starts at training step {step} with no restored state: this run resumed "
            "from a checkpoint but the anchor was not loaded. With the v1 trainer set "
            "trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback (it saves and restores "
            "the anchor); the legacy trainer (trainer.use_v1=false) restores it from "
            "<trainer.default_local_dir>/verl_hadw_anchor/step_N.json, written at every step when "
            "trainer.save_freq > 0. To continue with a fresh anchor instead, set "
            "+algorithm.hadw.allow_missing_state=true."
        )
        if not self.allow_missing_state:
            raise MissingAnchorStateError(message)
        logger.warning(f"{message} (allow_missing_state=true: continuing with a fresh anchor)")

    def observe(self, correct: float, count: int) -> AnchorView:
        step, call = self.next_ids()
        view = self.store.observe(step, call, correct, count)
        if self.legacy is not None:
            self.legacy.save(step, self.key, self.store.last_state())
        if view.warn:
            message = (
                f"HA-DW anchor '{self.key}' is frozen: it moved < 1e-3 over {self.config.window} steps while the "
                f"batch accuracy is > 0.05 away from it (anchor {view.posterior:.4f}, accuracy {view.batch_acc:.4f}). "
                "The literal Eq. 10 sigma shrinks with the anchor's own history; raise algorithm.hadw.anchor.eta, "
                "set anchor.sigma_source=accuracy or anchor.eta_min > 0."
            )
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        return view


def get_client(cfg: HadwConfig, legacy=None) -> AnchorClient:
    """The client for ``cfg.state_key``, created on first use (with ``legacy``); its anchor config may not change."""
    client = _CLIENTS.get(cfg.state_key)
    if client is None:
        step = steps.trainer_step()  # a resumed legacy run's first call: the anchor saved with verl's checkpoint
        state = legacy.load(step, cfg.state_key, cfg.allow_missing_state) if legacy and (step or 0) > 1 else None
        client = _CLIENTS[cfg.state_key] = AnchorClient(cfg, state)
        client.legacy = legacy
    elif client.config != cfg.anchor:
        raise ValueError(
            f"anchor state_key '{cfg.state_key}' is already in use with a different anchor config "
            f"({client.config} vs {cfg.anchor}); give each experiment its own algorithm.hadw.state_key"
        )
    return client


def observe(cfg: HadwConfig, correct: float, count: int) -> AnchorView:
    """Record one estimator call (Σ accuracy, number of valid responses) and return the step's anchor view."""
    return get_client(cfg).observe(correct, count)


def restore(cfg: HadwConfig, state: dict | None) -> AnchorClient:
    """Install ``state`` (from a checkpoint; None: an explicit fresh start) as ``cfg.state_key``'s anchor."""
    client = _CLIENTS[cfg.state_key] = AnchorClient(cfg, state)
    client.restored = True
    return client


def state_dict(cfg: HadwConfig) -> dict:
    """The current state of ``cfg.state_key``'s anchor (from the actor, or its mirror if it had to recover)."""
    return get_client(cfg).store.state_dict()


def reset(key: str | None = None) -> None:
    """Forget one anchor (or all, and the stateless step counter) in this process: for tests and notebooks."""
    if key is None:
        _CLIENTS.clear()
        steps.reset()
    else:
        _CLIENTS.pop(key, None)

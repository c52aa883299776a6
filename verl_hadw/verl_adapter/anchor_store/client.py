"""Driver-side access to the anchor: (step, call) ids, the store, and the persistence back-end.

The estimator runs in verl's driver (the TaskRunner actor) and tells the client the trainer's step of each
call (None outside a trainer) and the trainer's run. Each ``algorithm.hadw.state_key`` has one client here and
one store (``stores``: a named Ray actor when Ray is up, else this process), kept in ``process_state.PROCESS``.
A client gets its persistence back-end (``persistence``) when it is built, and restores from it then; its store
starts from exactly that state (None: a fresh anchor), whatever an earlier run of this process left in Ray.

**A run** is what one client serves. A new one starts, with a new client, when

- verl's checkpoint callback is built (a new v1 trainer: ``open_client``), or
- without the callback, at the estimator's first call of a new verl ``fit()`` (both trainers call
  ``SkipManager.init`` at its start: the ``run`` token the estimator passes changes), or at a trainer step lower
  than the client's last one (a restarted loop that did not go through ``fit()``).

So a fresh run never sees another run's anchor, with or without Ray, and a resumed one restores its own (the
legacy back-end reads the snapshot of the step verl resumed from). Outside a trainer (no step, no run) a
client lives until ``process_state.reset`` (or ``forget``).
"""

from __future__ import annotations

import logging
import warnings
from typing import Callable

from verl_hadw import verl_support
from verl_hadw.core.anchor.machine import AnchorState, AnchorView
from verl_hadw.core.errors import ConfigError, MissingAnchorStateError, frozen_anchor_message
from verl_hadw.core.options import AnchorConfig, HadwConfig
from verl_hadw.verl_adapter.anchor_home.anchor_persistence import Persistence
from verl_hadw.verl_adapter.anchor_home.anchor_stores import make_store
from verl_hadw.verl_adapter.process_state import PROCESS
from verl_hadw.verl_adapter.verl_terms import ALLOW_MISSING_STATE, CALLBACK_OVERRIDE, VERL

__all__ = [
    "AnchorClient",
    "open_client",
    "get_client",
    "state_dict",
    "forget",
    "MissingAnchorStateError",
]

logger = logging.getLogger(__name__)

class AnchorClient:
    """One experiment's anchor: assigns (step, call) ids, sends observations to its store, and hands its state
    to its persistence back-end."""

    def __init__(self, cfg: HadwConfig, persistence: Persistence | None = None, first_step: int | None = None):
        self.key = cfg.state_key
        self.config: AnchorConfig = cfg.anchor
        self.allow_missing_state = cfg.allow_missing_state
        self.persistence = persistence if persistence is not None else Persistence()
        state = self.persistence.load(cfg, first_step)
        # a back-end that handles resumes has restored, refused or warned already; without one, the first
        # trainer step tells whether a resumed run lost its anchor
        self.restored = state is not None or self.persistence.handles_resume
        self.store = make_store(self.key, self.config, state)
        self._step: int | None = None
        self._call = 0
        self.run: object | None = None  # the trainer run of its first trainer call (see the module docstring)
        self.owner: object | None = None  # the algorithm node of its run's calls (``open_client``)

    @property
    def recoveries(self) -> int:
        return self.store.recoveries

    def next_ids(self, trainer_step: int | None, commit: bool = True) -> tuple[int, int]:
        """(step, call) of the next estimator call; calls of one step are numbered 0, 1, ...

        ``trainer_step``: verl's step, or None outside a trainer, where each call is a step of its own.
        ``commit=False`` only computes them (a preview): nothing changes, nothing is logged.
        """
        step = trainer_step
        if step is None:
            previous = self._step if self._step is not None else self.store.last_state()["open_step"]
            step = (previous or 0) + 1
        elif self._step is None and not self.restored and step > 1:
            self._check_fresh_start(step, warn=commit)
        call = self._call + 1 if step == self._step else 0
        if commit:
            self._step, self._call = step, call
        return step, call

    def begins_new_run(self, trainer_step: int | None, run: object | None) -> bool:
        """Whether a call at ``trainer_step`` of the trainer run ``run`` belongs to a new run, not this client's."""
        if trainer_step is None or self.run is None:
            return False
        return (run is not None and run is not self.run) or (self._step is not None and trainer_step < self._step)

    def _check_fresh_start(self, step: int, warn: bool = True) -> None:
        """First call of a process at step > 1: a resumed run whose anchor was not restored."""
        snapshots = ("<trainer.default_local_dir>/verl_hadw_anchor/step_N.json, written at every step when "
                     "trainer.save_freq > 0 and the estimator gets verl's full config")
        if verl_support.has_checkpoint_callback():
            ways = (f"With the v1 trainer set {CALLBACK_OVERRIDE} (it saves and restores the anchor); the legacy "
                    f"trainer (trainer.use_v1=false) restores it from {snapshots}.")
        else:  # verl 0.9.0: no callback can be loaded; snapshots serve both trainers
            ways = (f"On verl {verl_support.installed_verl()} (no checkpoint callbacks before verl 0.9.1) both "
                    f"trainers restore it from {snapshots}.")
        message = (
            f"HA-DW anchor '{self.key}' starts at training step {step} with no restored state: this run resumed "
            f"from a checkpoint but the anchor was not loaded. {ways} To go on instead, {ALLOW_MISSING_STATE}."
        )
        if not self.allow_missing_state:
            raise MissingAnchorStateError(message)
        if warn:
            logger.warning(f"{message} {VERL.fresh_anchor}")

    def _after(self, step: int, call: int, correct: float, count: int) -> tuple[AnchorView, AnchorState]:
        """The view and the state a call would leave, computed on a copy of the store's last state."""
        state = AnchorState.from_dict(self.store.last_state(), self.config)
        return state.observe(step, call, correct, count), state

    def preview(self, correct: float, count: int, trainer_step: int | None = None) -> AnchorView:
        """The view ``observe`` would return for this call, leaving the anchor exactly as it is (the estimators'
        checks run on it before anything moves)."""
        return self._after(*self.next_ids(trainer_step, commit=False), correct, count)[0]

    def observe(self, correct: float, count: int, trainer_step: int | None = None) -> AnchorView:
        """Add one estimator call's counts (Σ accuracy, valid responses) and return the step's anchor view.

        What can fail goes first (the step check, the snapshot the legacy back-end writes of the state after this
        call), so a call that raises leaves the anchor as it was.
        """
        ids = self._step, self._call
        step, call = self.next_ids(trainer_step)
        try:
            if trainer_step is not None:
                self.persistence.after_step(step, self.key, self._after(step, call, correct, count)[1].to_dict())
            view = self.store.observe(step, call, correct, count)
        except BaseException:
            self._step, self._call = ids  # the next call gets the ids this one would have had
            raise
        if view.warn:
            message = frozen_anchor_message(self.config.window, view.posterior, view.batch_acc, VERL.key, self.key)
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        return view

    def state_dict(self) -> dict:
        """The current state (from the actor, or its mirror if it had to recover)."""
        return self.store.state_dict()


def open_client(cfg: HadwConfig, persistence: Persistence, first_step: int | None = None,
                owner: object | None = None) -> AnchorClient:
    """Build ``cfg.state_key``'s client with ``persistence`` (restoring from it), for the run whose estimator calls
    pass ``owner`` (verl's ``algorithm`` node, compared by identity). An earlier client of the key is retired: a
    later call of its run is refused (``check_one_run``), never served from the new run's anchor."""
    earlier = PROCESS.anchors.get(cfg.state_key)
    if earlier is not None and earlier._step is not None:
        PROCESS.retired_anchors.setdefault(cfg.state_key, []).append((earlier.owner, earlier._step))
    client = PROCESS.anchors[cfg.state_key] = AnchorClient(cfg, persistence, first_step)
    client.owner = owner
    return client


def check_one_run(client: AnchorClient, trainer_step: int | None, caller: object | None) -> None:
    """Refuse a call that belongs to a run whose client was retired for another run of the same ``state_key``.

    Such a call is told by its config (``caller`` is the ``algorithm`` node of a retired run, not the current one's)
    or, when both runs share one config object, by its step: the new client has not been called yet, expects
    another first step (1 fresh, N + 1 restored from step N) and the call continues a retired run's last step.
    """
    retired = PROCESS.retired_anchors.get(client.key, ())
    if not retired:
        return
    by_config = caller is not None and caller is not client.owner and any(o is caller for o, _ in retired)
    expected = client.persistence.first_step
    by_step = (
        trainer_step is not None and client._step is None and expected is not None and trainer_step != expected
        and any(last == trainer_step - 1 for _, last in retired)
    )
    if by_config or by_step:
        last = max((last for o, last in retired if not by_config or o is caller), default=None)
        raise ConfigError(
            f"algorithm.hadw.state_key={client.key!r} is used by two runs in this process: a later run (a new "
            f"HadwCheckpointCallback, or a new fit()) took its anchor over after this run's step {last}, and this "
            f"call (step {trainer_step}) would continue on that run's anchor. Give each run its own "
            "algorithm.hadw.state_key (e.g. +algorithm.hadw.state_key=<experiment name>), or finish one run before "
            "the next one starts."
        )


def get_client(
    cfg: HadwConfig,
    persistence: Callable[[], Persistence | None] | None = None,
    trainer_step: int | None = None,
    run: object | None = None,
    caller: object | None = None,
) -> AnchorClient:
    """The client for ``cfg.state_key`` in the trainer run ``run`` (a token, compared by identity), for a call with
    the ``algorithm`` node ``caller``.

    Built on first use, and again when the call begins a new run (``AnchorClient.begins_new_run``), with the
    back-end ``persistence()`` returns (read only then) at ``trainer_step``. Within a run its anchor config may
    not change; a call of a run whose client another run replaced is refused (``check_one_run``).
    """
    client = PROCESS.anchors.get(cfg.state_key)
    if client is not None:
        check_one_run(client, trainer_step, caller)
    if client is not None and client.begins_new_run(trainer_step, run):
        logger.info(
            f"HA-DW anchor '{cfg.state_key}': a new training run in this process (step {trainer_step} after "
            f"{client._step}{', a new fit()' if run is not client.run else ''}): it gets its own anchor"
        )
        client = None
    if client is None:
        client = open_client(cfg, persistence() if persistence else None, trainer_step, caller)
    elif client.config != cfg.anchor:
        raise ConfigError(
            f"anchor state_key '{cfg.state_key}' is already in use with a different anchor config "
            f"({client.config} vs {cfg.anchor}); give each experiment its own algorithm.hadw.state_key"
        )
    if trainer_step is not None and client.run is None:
        client.run = run if run is not None else _NO_RUN
    return client


_NO_RUN = object()  # a trainer call without a run token (unit use): the run is then told by its steps alone


def state_dict(cfg: HadwConfig) -> dict:
    """The current state of ``cfg.state_key``'s anchor (from the actor, or its mirror if it had to recover)."""
    return get_client(cfg).state_dict()


def forget(key: str) -> None:
    """Forget the anchor of ``key`` in this process (``process_state.reset`` forgets everything)."""
    PROCESS.anchors.pop(key, None)
    PROCESS.retired_anchors.pop(key, None)

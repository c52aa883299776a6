"""The driver's client of an HA-DW anchor, one per ``algorithm.hadw.state_key``: it numbers each call, sends it to
its store and hands the state to its persistence back-end. A new run gets a new client, restored from its back-end."""

from __future__ import annotations

import logging
import warnings
from typing import Callable

import verl_hadw.verl.support as support
from verl_hadw.core.anchor.machine import AnchorState, AnchorView
from verl_hadw.core.errors import ConfigError, MissingAnchorStateError, frozen_anchor_message
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl.anchor_store.persistence import Persistence
from verl_hadw.verl.anchor_store.stores import make_store
from verl_hadw.verl.process_state import PROCESS
from verl_hadw.verl.verl_terms import ALLOW_MISSING_STATE, CALLBACK_OVERRIDE, VERL

__all__ = ["AnchorClient", "open_client", "get_client", "state_dict", "forget"]

logger = logging.getLogger(__name__)


class AnchorClient:
    """One experiment's anchor: (step, call) ids, observations sent to its store, its state to its persistence."""

    def __init__(self, cfg: HadwConfig, persistence: Persistence | None = None, first_step: int | None = None):
        self.key, self.config, self.allow_missing_state = cfg.state_key, cfg.anchor, cfg.allow_missing_state
        self.persistence = persistence if persistence is not None else Persistence()
        state = self.persistence.load(cfg, first_step)
        # a back-end that handles resumes has restored, refused or warned; else the first trainer step tells
        self.restored = state is not None or self.persistence.handles_resume
        self.store = make_store(self.key, self.config, state)
        self._step, self._call = None, 0  # (step, call) of its last call; step None: none yet
        self.run: object | None = None  # the trainer run (fit() token) of its first trainer call
        self.owner: object | None = None  # the algorithm node of its run's calls (``open_client``)

    @property
    def recoveries(self) -> int:
        return self.store.recoveries

    def next_ids(self, trainer_step: int | None, commit: bool = True) -> tuple[int, int]:
        """(step, call) of the next estimator call at verl's ``trainer_step`` (None outside a trainer: each call is
        a step of its own); ``commit=False`` only computes them, changing nothing."""
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

    def _check_fresh_start(self, step: int, warn: bool = True) -> None:
        """First call of a process at step > 1: a resumed run whose anchor was not restored."""
        how = "trainer.save_freq > 0 (the anchor's per-step snapshots)"
        if support.has_checkpoint_callback():
            how = f"{CALLBACK_OVERRIDE} (v1 trainer) or {how} (legacy trainer)"
        message = (f"HA-DW anchor '{self.key}' starts at training step {step} with no restored state: this run "
                   f"resumed from a checkpoint saved without its anchor. Next time set {how}; to go on now, "
                   f"{ALLOW_MISSING_STATE}.")
        if not self.allow_missing_state:
            raise MissingAnchorStateError(message)
        if warn:
            logger.warning(f"{message} {VERL.fresh_anchor}")

    def _after(self, step: int, call: int, correct: float, count: int) -> tuple[AnchorView, AnchorState]:
        """The view and the state a call would leave (on a copy of the store's last state)."""
        state = AnchorState.from_dict(self.store.last_state(), self.config)
        return state.observe(step, call, correct, count), state

    def preview(self, correct: float, count: int, trainer_step: int | None = None) -> AnchorView:
        """The view ``observe`` would return for this call, leaving the anchor as it is."""
        return self._after(*self.next_ids(trainer_step, commit=False), correct, count)[0]

    def observe(self, correct: float, count: int, trainer_step: int | None = None) -> AnchorView:
        """Add one call's Σ accuracy over ``count`` valid responses; a call that raises leaves the anchor as it was."""
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
        return self.store.state_dict()  # from the actor, or its mirror if it had to recover


def open_client(cfg: HadwConfig, persistence: Persistence, first_step: int | None = None,
                owner: object | None = None) -> AnchorClient:
    """Build ``cfg.state_key``'s client, restored from ``persistence``, for the run whose calls pass ``owner`` (verl's
    ``algorithm`` node, by identity). An earlier client of the key is retired: a later call of its run is refused."""
    earlier = PROCESS.anchors.get(cfg.state_key)
    if earlier is not None and earlier._step is not None:
        PROCESS.retired_anchors.setdefault(cfg.state_key, []).append((earlier.owner, earlier._step))
    client = PROCESS.anchors[cfg.state_key] = AnchorClient(cfg, persistence, first_step)
    client.owner = owner
    return client


def check_one_run(client: AnchorClient, trainer_step: int | None, caller: object | None) -> None:
    """Refuse a call of a run whose client was retired for another run of the same ``state_key``: told by its
    ``algorithm`` node (``caller``), or, where both runs share one, by a step continuing a retired run's last step."""
    retired = PROCESS.retired_anchors.get(client.key, ())
    if not retired:
        return
    by_config = caller is not None and caller is not client.owner and any(o is caller for o, _ in retired)
    expected = client.persistence.first_step
    by_step = (trainer_step is not None and client._step is None and expected is not None and trainer_step != expected
               and any(last == trainer_step - 1 for _, last in retired))
    if by_config or by_step:
        last = max((last for o, last in retired if not by_config or o is caller), default=None)
        raise ConfigError(f"algorithm.hadw.state_key={client.key!r} is used by two runs in this process: a later run "
                          f"took its anchor over after this run's step {last}, so this call (step {trainer_step}) is "
                          "refused. Give each run its own +algorithm.hadw.state_key, or finish one run before the next "
                          "one starts.")


def get_client(cfg: HadwConfig, persistence: Callable[[], Persistence | None] | None = None,
               trainer_step: int | None = None, run: object | None = None, caller: object | None = None):
    """The ``AnchorClient`` for ``cfg.state_key``, built on first use and again when a call begins a new run
    (``run``: a token of verl's ``fit()``; ``caller``: the ``algorithm`` node verl passed), with ``persistence()``."""
    client = PROCESS.anchors.get(cfg.state_key)
    if client is not None:
        check_one_run(client, trainer_step, caller)
        back = client._step is not None and trainer_step is not None and trainer_step < client._step
        other = run is not None and run is not client.run  # by identity: verl's fit() tokens are dicts
        if trainer_step is not None and client.run is not None and (back or other):
            logger.info(f"HA-DW anchor '{cfg.state_key}': a new training run in this process (step {trainer_step} "
                        f"after {client._step}{', a new fit()' if run is not client.run else ''}): it gets its own "
                        "anchor")
            client = None
    if client is None:
        client = open_client(cfg, persistence() if persistence else None, trainer_step, caller)
    elif client.config != cfg.anchor:
        raise ConfigError(f"anchor state_key '{cfg.state_key}' is already in use with a different anchor config "
                          f"({client.config} vs {cfg.anchor}); give each experiment its own algorithm.hadw.state_key")
    if trainer_step is not None and client.run is None:
        client.run = run if run is not None else _NO_RUN
    return client


_NO_RUN = object()  # a trainer call without a run token (unit use): the run is then told by its steps alone


def state_dict(cfg: HadwConfig) -> dict:
    """The current state of ``cfg.state_key``'s anchor."""
    return get_client(cfg).state_dict()


def forget(key: str) -> None:
    """Forget the anchor of ``key`` in this process."""
    PROCESS.anchors.pop(key, None)
    PROCESS.retired_anchors.pop(key, None)

"""Where an anchor's state lives: in this process (``LocalStore``) or in a named Ray actor (``RayStore``, created
lazily, ``num_cpus=0``, named after the Ray job id and the ``state_key``). Both run the same ``AnchorState``."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

import ray  # verl imports it: nothing to pay here
from ray.exceptions import RayActorError

from verl_hadw.core.anchor.machine import AnchorState, AnchorView
from verl_hadw.core.errors import AnchorActorError
from verl_hadw.core.options import AnchorConfig

logger = logging.getLogger(__name__)


def _state(config: AnchorConfig, state: dict | None) -> AnchorState:
    return AnchorState.from_dict(state, config) if state else AnchorState(config=config)


class LocalStore:
    """The anchor in this process (no Ray: unit use, notebooks)."""

    recoveries = 0

    def __init__(self, config: AnchorConfig, state: dict | None = None):
        self.state = _state(config, state)

    def observe(self, step: int, call: int, correct: float, count: int) -> AnchorView:
        return self.state.observe(step, call, correct, count)

    def state_dict(self) -> dict:
        return self.state.to_dict()

    last_state = state_dict  # the state after the last call (what a snapshot saves)


class AnchorService:
    """The Ray actor's body: one ``AnchorState`` behind a dict-only interface."""

    def __init__(self, config: dict, state: dict | None = None):
        self.verl_hadw_reset(config, state)

    def verl_hadw_reset(self, config: dict, state: dict | None) -> dict:
        """Start over from exactly ``state`` (None: fresh); the name marks the actor as ours."""
        self.config = AnchorConfig(**config)
        self.state = _state(self.config, state)
        return self.state.to_dict()

    def observe(self, step: int, call: int, correct: float, count: int) -> tuple[dict, dict]:
        """(view, state) after adding one call: the driver keeps the state as its mirror."""
        return asdict(self.state.observe(step, call, correct, count)), self.state.to_dict()

    def state_dict(self) -> dict:
        return self.state.to_dict()


def actor_name(key: str) -> str:
    return f"verl_hadw:anchor:{ray.get_runtime_context().get_job_id()}:{key}"


def wait_until_released(name: str, timeout: float = 60.0) -> None:
    """Return once no live actor holds ``name`` (``ray.kill`` returns before the actor is gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name)
        except ValueError:
            return
        time.sleep(0.1)
    raise AnchorActorError(f"the Ray actor '{name}' still holds its name {timeout:.0f} s after it was killed")


def _ray_session() -> tuple[str, str] | None:
    """(job id, node id) of this process's Ray connection (a restarted cluster may reuse the job id), or None."""
    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return context.get_job_id(), context.get_node_id()


class RayStore:
    """The anchor in a named Ray actor, with the driver's mirror of its last state: a dead actor or a Ray restart
    rebuilds it from the mirror, a Ray shutdown continues it here (one recovery each; the trajectory is unchanged)."""

    def __init__(self, key: str, config: AnchorConfig, state: dict | None = None):
        self.key, self.config, self.recoveries = key, config, 0
        self.local: AnchorService | None = None  # the anchor in this process, once Ray was shut down under it
        self.session, self.name = _ray_session(), actor_name(key)
        self.actor, self.mirror = self._create(state)

    def _create(self, state: dict | None, attempts: int = 3):
        """(actor, its state), set to exactly ``state``; an actor Ray is still destroying is waited for."""
        remote = ray.remote(num_cpus=0)(AnchorService)
        for attempt in range(attempts):
            actor = remote.options(name=self.name, get_if_exists=True).remote(asdict(self.config), state)
            try:
                reset = actor.verl_hadw_reset  # an existing actor of this name keeps its state unless told otherwise
            except AttributeError:
                raise AnchorActorError(
                    f"the Ray actor '{self.name}' (namespace {ray.get_runtime_context().namespace!r}) holds the name "
                    f"of algorithm.hadw.state_key={self.key!r}'s anchor but is not a verl-hadw anchor. Give this "
                    f"experiment another algorithm.hadw.state_key, or end that actor (ray.kill(ray.get_actor("
                    f"{self.name!r}))).") from None
            try:
                return actor, ray.get(reset.remote(asdict(self.config), state))
            except RayActorError:
                if attempt == attempts - 1:
                    raise
                logger.info(f"HA-DW anchor actor '{self.name}' was being destroyed: creating it again")
                wait_until_released(self.name)

    def _recover(self, why: str) -> None:
        """Rebuild the anchor from the mirror, where this process can reach it now."""
        self.recoveries += 1
        logger.warning(f"HA-DW anchor actor '{self.name}' {why}: rebuilding it from the driver's mirror")
        session = _ray_session()
        if session is None:  # Ray is gone: the same state machine continues in this process
            self.local = AnchorService(asdict(self.config), self.mirror)
            return
        if session == self.session:  # a crashed actor keeps its name until killed: free it
            ray.kill(self.actor, no_restart=True)
            wait_until_released(self.name)
        self.session, self.name = session, actor_name(self.key)
        self.actor, self.mirror = self._create(self.mirror)

    def _call(self, method: str, *args):
        """``method`` of the anchor's ``AnchorService``: the actor's, or this process's once Ray is gone."""
        if self.local is None:
            session = _ray_session()
            if session is None:
                self._recover("is out of reach: Ray was shut down")
            elif session != self.session:
                self._recover("belongs to a Ray session that has ended (Ray was restarted)")
        if self.local is None:
            try:
                return ray.get(getattr(self.actor, method).remote(*args))
            except RayActorError:  # killed or its node lost: rebuild from the mirror and retry once
                self._recover("died")
        if self.local is not None:
            return getattr(self.local, method)(*args)
        return ray.get(getattr(self.actor, method).remote(*args))

    def observe(self, step: int, call: int, correct: float, count: int) -> AnchorView:
        view, self.mirror = self._call("observe", step, call, correct, count)
        return AnchorView(**view)

    def state_dict(self) -> dict:
        self.mirror = self._call("state_dict")
        return self.mirror

    def last_state(self) -> dict:
        return self.mirror  # the state the actor returned with the last call: no round trip


def make_store(key: str, config: AnchorConfig, state: dict | None = None) -> LocalStore | RayStore:
    """A Ray actor when this process is connected to Ray (which ships with verl), else the in-process anchor."""
    return RayStore(key, config, state) if ray.is_initialized() else LocalStore(config, state)

"""Where an anchor's state lives: in this process (``LocalStore``) or in a named Ray actor (``RayStore``).

Both stores have one interface: ``observe(step, call, correct, count) -> AnchorView``, ``state_dict()``,
``last_state()`` (the state after the last call, without a round trip) and ``recoveries``. The in-process store
calls ``AnchorState`` directly; only the Ray store exchanges plain dicts (what crosses the process boundary),
and both run the same ``AnchorState``, so their trajectories are identical. A store is built for each new
client with exactly the client's restored state (None: fresh), whatever an earlier run left under the name.

The Ray actor is created lazily by the process that computes advantages (verl's TaskRunner actor), with
``get_if_exists``, ``num_cpus=0`` and no ``detached`` lifetime (it dies with the job). Its name carries the Ray
job id and the ``state_key``, so two experiments never share an anchor, even on one long-lived cluster. Ray is
imported only when an actor is needed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

from verl_hadw.core.anchor.machine import AnchorState, AnchorView
from verl_hadw.core.errors import AnchorActorError
from verl_hadw.core.options import AnchorConfig

__all__ = ["AnchorService", "LocalStore", "RayStore", "actor_name", "make_store", "wait_until_released"]

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

    def last_state(self) -> dict:
        """The state after the last call (what a snapshot saves)."""
        return self.state.to_dict()


class AnchorService:
    """The Ray actor's body: one ``AnchorState`` behind a dict-only interface."""

    def __init__(self, config: dict, state: dict | None = None):
        self.config = AnchorConfig(**config)
        self.state = _state(self.config, state)

    def verl_hadw_reset(self, config: dict, state: dict | None) -> dict:
        """Start over from exactly ``state`` under ``config`` (None: a fresh anchor); returns the state. The
        name marks the actor as ours: another class under the anchor's name has no such method."""
        self.config = AnchorConfig(**config)
        self.state = _state(self.config, state)
        return self.state.to_dict()

    def observe(self, step: int, call: int, correct: float, count: int) -> tuple[dict, dict]:
        """(view, state) after adding one call: the driver keeps the state as its mirror."""
        view = self.state.observe(step, call, correct, count)
        return asdict(view), self.state.to_dict()

    def state_dict(self) -> dict:
        return self.state.to_dict()


def actor_name(key: str) -> str:
    import ray

    return f"verl_hadw:anchor:{ray.get_runtime_context().get_job_id()}:{key}"


def wait_until_released(name: str, timeout: float = 60.0) -> None:
    """Return once no live actor holds ``name``: ``ray.kill`` returns before the actor is gone, and until then
    ``get_if_exists`` hands the dying actor back."""
    import ray

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name)
        except ValueError:
            return
        time.sleep(0.1)
    raise AnchorActorError(f"the Ray actor '{name}' still holds its name {timeout:.0f} s after it was killed")


def _ray_session() -> tuple[str, str] | None:
    """(job id, node id) of this process's Ray connection, or None without one: both change when Ray is shut
    down and started again (a new cluster may reuse the job id, never the node id)."""
    import ray

    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return context.get_job_id(), context.get_node_id()


class RayStore:
    """The anchor in a named Ray actor, with the driver's mirror of its last state.

    Built for a new client, it sets the actor under its name to exactly the client's restored state (None: a
    fresh anchor), so a fresh run never inherits an actor an earlier run of this process left behind. The
    mirror makes every loss recoverable with an unchanged trajectory: an actor that died is rebuilt from it; if
    Ray was restarted, the actor is rebuilt in the new session; if Ray was shut down, the anchor continues in
    this process. Each counts one recovery. A name held by an actor that is not ours is an error naming it.
    """

    def __init__(self, key: str, config: AnchorConfig, state: dict | None = None):
        self.key, self.config = key, config
        self.recoveries = 0
        self.local: AnchorService | None = None  # the anchor in this process, once Ray was shut down under it
        self.session = _ray_session()
        self.name = actor_name(key)
        self.actor, self.mirror = self._create(state)

    def _create(self, state: dict | None, attempts: int = 3):
        """(actor, its state) with the actor under ``self.name`` set to exactly ``state``. An actor of that name
        whose last handle was just dropped (an earlier client of this process, forgotten) is still handed back
        by ``get_if_exists`` while Ray destroys it: wait until the name is free and create it again."""
        import ray
        from ray.exceptions import RayActorError

        for attempt in range(attempts):
            actor, reset = self._get_or_create(state)
            try:
                return actor, ray.get(reset.remote(asdict(self.config), state))
            except RayActorError:
                if attempt == attempts - 1:
                    raise
                logger.info(f"HA-DW anchor actor '{self.name}' was being destroyed: creating it again")
                wait_until_released(self.name)

    def _get_or_create(self, state: dict | None):
        import ray

        remote = ray.remote(num_cpus=0)(AnchorService)
        actor = remote.options(name=self.name, get_if_exists=True).remote(asdict(self.config), state)
        try:
            reset = actor.verl_hadw_reset  # an existing actor of this name keeps its state unless told otherwise
        except AttributeError:
            raise AnchorActorError(
                f"the Ray actor '{self.name}' (namespace {ray.get_runtime_context().namespace!r}) is not a "
                f"verl-hadw anchor, but holds the name of algorithm.hadw.state_key={self.key!r}'s anchor: another "
                "program created it. Give this experiment another algorithm.hadw.state_key, or end that actor "
                f"(ray.kill(ray.get_actor({self.name!r})))."
            ) from None
        return actor, reset

    def _recover(self, why: str) -> None:
        """Rebuild the anchor from the mirror, where this process can reach it now."""
        import ray

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
        import ray
        from ray.exceptions import RayActorError

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
        """The state the actor returned with the last call (no round trip)."""
        return self.mirror


def make_store(key: str, config: AnchorConfig, state: dict | None = None) -> LocalStore | RayStore:
    """A Ray actor when this process is connected to Ray, else the in-process anchor."""
    try:
        import ray

        use_ray = ray.is_initialized()
    except ImportError:  # pragma: no cover - ray ships with verl
        use_ray = False
    return RayStore(key, config, state) if use_ray else LocalStore(config, state)

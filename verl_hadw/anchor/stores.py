"""Where an anchor's state lives: in this process (``LocalStore``) or in a named Ray actor (``RayStore``).

Both stores have one interface: ``observe(step, call, correct, count) -> AnchorView``, ``state_dict()``,
``last_state()`` (the state after the last call, without a round trip) and ``recoveries``. The in-process store
calls ``AnchorState`` directly; only the Ray store exchanges plain dicts (what crosses the process boundary), and
both run the same ``AnchorState``, so their trajectories are identical.

The Ray actor is created lazily by the process that computes advantages (verl's TaskRunner actor), with
``get_if_exists``, ``num_cpus=0`` and no ``detached`` lifetime (it dies with the job). Its name carries the Ray
job id and the ``state_key``, so two experiments never share an anchor, even on one long-lived cluster. Ray is
imported only when an actor is needed.
"""

from __future__ import annotations

from dataclasses import asdict

from verl_hadw.anchor.machine import AnchorState, AnchorView
from verl_hadw.options import AnchorConfig

__all__ = ["AnchorService", "LocalStore", "RayStore", "actor_name", "make_store"]


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

    def observe(self, step: int, call: int, correct: float, count: int) -> tuple[dict, dict]:
        """(view, state) after adding one call: the driver keeps the state as its mirror."""
        view = self.state.observe(step, call, correct, count)
        return asdict(view), self.state.to_dict()

    def state_dict(self) -> dict:
        return self.state.to_dict()

    def load_state_dict(self, state: dict) -> None:
        self.state = AnchorState.from_dict(state, self.config)


def actor_name(key: str) -> str:
    import ray

    return f"verl_hadw:anchor:{ray.get_runtime_context().get_job_id()}:{key}"


class RayStore:
    """The anchor in a named Ray actor; recreated from ``mirror`` (the last state it returned) if it dies."""

    def __init__(self, key: str, config: AnchorConfig, state: dict | None = None):
        self.key, self.config = key, config
        self.recoveries = 0
        self.actor = self._create(state)
        self.mirror = self._call("state_dict")

    def _create(self, state: dict | None):
        import ray

        remote = ray.remote(num_cpus=0)(AnchorService)
        actor = remote.options(name=actor_name(self.key), get_if_exists=True).remote(asdict(self.config), state)
        if state is not None:  # an existing actor of this name keeps its state unless told otherwise
            ray.get(actor.load_state_dict.remote(state))
        return actor

    def _call(self, method: str, *args):
        import ray
        from ray.exceptions import RayActorError

        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except RayActorError:  # killed or its node lost: rebuild from the mirror and retry once
            self.recoveries += 1
            ray.kill(self.actor, no_restart=True)  # a crashed actor keeps its name until killed: free it
            self.actor = self._create(self.mirror)
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

"""Where an anchor's state lives: a named Ray actor (training) or this process (no Ray: tests, notebooks).

Both backends run the same ``AnchorState`` and exchange only JSON-able dicts of scalars, so their
trajectories are identical. The Ray actor is created lazily by the process that computes advantages
(verl's TaskRunner actor), with ``get_if_exists``, ``num_cpus=0`` and no ``detached`` lifetime (it dies with
the job). Its name carries the Ray job id and the ``state_key``, so two experiments never share an anchor,
even on one long-lived cluster. Ray is imported only when an actor is needed.
"""

from __future__ import annotations

from verl_hadw.anchor import AnchorState, AnchorView
from verl_hadw.options import AnchorConfig

__all__ = ["AnchorService", "LocalBackend", "RayBackend", "actor_name"]


class AnchorService:
    """The actor's body (also usable in-process): one ``AnchorState`` behind a dict-only interface."""

    def __init__(self, config: dict, state: dict | None = None):
        self.config = AnchorConfig(**config)
        self.state = AnchorState.from_dict(state, self.config) if state else AnchorState(config=self.config)

    def observe(self, step: int, call: int, correct: float, count: int) -> tuple[dict, dict]:
        """(view, state) after adding one call: the caller keeps the state as its mirror."""
        view = self.state.observe(step, call, correct, count)
        return view.__dict__.copy(), self.state.to_dict()

    def state_dict(self) -> dict:
        return self.state.to_dict()

    def load_state_dict(self, state: dict) -> None:
        self.state = AnchorState.from_dict(state, self.config)


class LocalBackend:
    """The anchor in this process."""

    def __init__(self, key: str, config: AnchorConfig, state: dict | None):
        self.service = AnchorService(config.__dict__, state)

    def observe(self, step, call, correct, count):
        return self.service.observe(step, call, correct, count)

    def state_dict(self):
        return self.service.state_dict()


def actor_name(key: str) -> str:
    import ray

    return f"verl_hadw:anchor:{ray.get_runtime_context().get_job_id()}:{key}"


class RayBackend:
    """The anchor in a named Ray actor; recreated from ``mirror`` (the last state it returned) if it dies."""

    def __init__(self, key: str, config: AnchorConfig, state: dict | None):
        self.key, self.config = key, config
        self.recoveries = 0
        self.actor = self._create(state)
        self.mirror = self._call("state_dict")

    def _create(self, state: dict | None):
        import ray

        remote = ray.remote(num_cpus=0)(AnchorService)
        actor = remote.options(name=actor_name(self.key), get_if_exists=True).remote(
            self.config.__dict__, state
        )
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
            self.actor = self._create(self.mirror)
            return ray.get(getattr(self.actor, method).remote(*args))

    def observe(self, step, call, correct, count):
        view, self.mirror = self._call("observe", step, call, correct, count)
        return view, self.mirror

    def state_dict(self):
        self.mirror = self._call("state_dict")
        return self.mirror


def make_backend(key: str, config: AnchorConfig, state: dict | None = None):
    """A Ray actor when this process is connected to Ray, else the in-process anchor."""
    try:
        import ray

        use_ray = ray.is_initialized()
    except ImportError:  # pragma: no cover - ray ships with verl
        use_ray = False
    return (RayBackend if use_ray else LocalBackend)(key, config, state)


def view_from_dict(view: dict) -> AnchorView:
    return AnchorView(**view)

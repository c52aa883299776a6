"""``hfcpu_ray``: a checkpoint-engine backend that moves the actor's weights to standalone CPU rollouts.

For verl's ``separate_async`` trainer, which refuses ``naive`` and ships only GPU transports (docs/cpu.md): the actor's
rank 0 ``put``s the state dict of version ``global_steps`` into one named Ray actor, each rollout worker ``get``s it.
Select it with ``actor_rollout_ref.rollout.checkpoint_engine.backend=hfcpu_ray`` (``verl_hadw.toy.modes`` does).
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry
from verl.workers.rollout.utils import ensure_async_iterator

__all__ = ["RayMailboxCheckpointEngine", "WeightMailbox", "BACKEND", "MAILBOX"]

BACKEND = "hfcpu_ray"
MAILBOX = "verl_hadw_cpu_weight_mailbox"


class WeightMailbox:
    """Holds the latest weights and their version; ``get`` waits until the wanted version arrives."""

    def __init__(self):
        self.version: Any = object()  # matches no version until the first put
        self.state: dict[str, torch.Tensor] = {}
        self.arrived = asyncio.Condition()

    async def put(self, version, state: dict[str, torch.Tensor]) -> None:
        async with self.arrived:
            self.version, self.state = version, state
            self.arrived.notify_all()

    async def get(self, version) -> dict[str, torch.Tensor]:
        async with self.arrived:
            await self.arrived.wait_for(lambda: self.version == version)
            return self.state


_HANDLE = None  # kept for the process's life: Ray ends a non-detached actor once its creator drops every handle


def _mailbox():
    global _HANDLE
    if _HANDLE is None:
        _HANDLE = ray.remote(WeightMailbox).options(name=MAILBOX, get_if_exists=True, num_cpus=0).remote()
    return _HANDLE


@CheckpointEngineRegistry.register(BACKEND)
class RayMailboxCheckpointEngine(CheckpointEngine):
    """No process group: rank 0 of the actor publishes, every rollout worker reads (see the module doc)."""

    def __init__(self, bucket_size: int = 0, is_master: bool = False, **kwargs):
        self.is_master = is_master

    def prepare(self) -> dict:
        return {}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]):
        return {}, {}

    def init_process_group(self, **kwargs):
        return None

    def finalize(self):
        return None

    async def send_weights(self, weights, global_steps: int | None = None):
        state = {}
        async for name, tensor in ensure_async_iterator(weights):  # every rank drains it (FSDP collectives)
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        if self.is_master:
            await _mailbox().put.remote(global_steps, state)
        return {}

    async def receive_weights(self, global_steps: int | None = None):
        state = await _mailbox().get.remote(global_steps)
        for name, tensor in state.items():
            yield name, tensor

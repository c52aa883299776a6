"""A ``cpu`` platform for verl's ``PlatformRegistry`` (verl 0.9.1 registers only CUDA, NPU and ROCm).

Selected only by ``VERL_PLATFORM=cpu``: auto-detection never picks it. verl's resource pools always ask
Ray for accelerators, so this platform names Ray's ``GPU`` resource and the run gives Ray *logical* GPUs
(``+ray_kwargs.ray_init.num_gpus=N``); nothing ever touches CUDA.
"""

from __future__ import annotations

import types
from contextlib import contextmanager, nullcontext
from typing import Any, Optional

import psutil
import torch
from verl.plugin.platform import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

__all__ = ["PlatformCPU", "cpu_device_module"]


def _noop(*args, **kwargs):
    return None


def _mem_get_info(device=None) -> tuple[int, int]:
    memory = psutil.virtual_memory()
    return memory.available, memory.total


def _make_device_module() -> types.ModuleType:
    """The ``torch.cuda``-like module verl calls through ``get_torch_device()`` (every attribute it uses)."""
    module = types.ModuleType("verl_hadw.cpu.device")
    module.__dict__.update(
        is_available=lambda: True,
        device_count=lambda: 1,
        current_device=lambda: "cpu",
        set_device=_noop,
        get_device_name=lambda device=None: "cpu",
        synchronize=_noop,
        empty_cache=_noop,
        ipc_collect=_noop,
        set_per_process_memory_fraction=_noop,
        mem_get_info=_mem_get_info,
        memory_allocated=lambda device=None: 0,
        memory_reserved=lambda device=None: 0,
        max_memory_allocated=lambda device=None: 0,
        max_memory_reserved=lambda device=None: 0,
        get_rng_state=lambda device=None: torch.get_rng_state(),
        set_rng_state=lambda state, device=None: torch.set_rng_state(state),
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        Stream=torch.cpu.Stream,
        Event=torch.Event,
        stream=lambda stream=None: nullcontext(),
        current_stream=torch.cpu.current_stream,
    )
    return module


cpu_device_module = _make_device_module()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl platform for CPU-only hosts: gloo collectives, logical Ray GPUs, no-op memory management."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        return False  # never auto-detected: only VERL_PLATFORM=cpu selects it

    def current_device(self):
        return "cpu"  # verl hands this straight to .to() / torch.device()

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # logical GPUs: verl's resource pools hard-code use_gpu=True

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None

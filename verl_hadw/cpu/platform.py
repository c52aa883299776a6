"""A ``cpu`` platform for verl's ``PlatformRegistry`` (verl 0.9.1 registers only CUDA, NPU and ROCm).

Selected only by ``VERL_PLATFORM=cpu``: auto-detection never picks it. verl's resource pools always ask
Ray for accelerators, so this platform names Ray's ``GPU`` resource and the run gives Ray *logical* GPUs
(``+ray_kwargs.ray_init.num_gpus=N``); nothing ever touches CUDA.
"""

from __future__ import annotations

import os
import sys
import types
from contextlib import contextmanager, nullcontext
from typing import Any, Optional

import psutil
import torch
from verl.plugin.platform import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

__all__ = ["PlatformCPU", "cpu_device_module", "pin_numerics", "pin_threads", "pin_isa", "THREADS_ENV", "ISA_ENV"]

THREADS_ENV = "VERL_HADW_CPU_THREADS"  # torch intra-op threads in every process of a CPU run (default 1)
ISA_ENV = "VERL_HADW_CPU_ISA"  # vector instruction set of torch's and MKL's kernels: avx2 (default) or native
# MKL_CBWR=COMPATIBLE, not AVX2: MKL honours a named-ISA branch (AVX2, ...) on Intel CPUs only and silently runs
# its AUTO branch on others (MKL_VERBOSE prints "CNR:AUTO" on an AMD EPYC), so AMD and Intel rounded differently.
ISA_VARS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}


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


def pin_threads() -> int:
    """Give this process, and every process it starts, the same torch intra-op thread count.

    A float reduction (matmul, sum, norm) splits its work by thread, so its last bits depend on the thread
    count, and the count otherwise depends on the machine: torch defaults to the number of cores, Ray sets
    ``OMP_NUM_THREADS`` to an actor's CPU share unless the user's environment already has one, and
    TransferQueue resets torch to the count it saw at import after every transfer. Pinning it (to
    ``$VERL_HADW_CPU_THREADS``, default 1, in the environment too so Ray workers inherit it) keeps a run's
    numbers independent of core count. Returns the count.
    """
    threads = int(os.environ.get(THREADS_ENV, "1"))
    for key in (THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[key] = str(threads)
    torch.set_num_threads(threads)
    transfer_queue = sys.modules.get("transfer_queue.utils.common")
    if transfer_queue is not None:  # imported before us: its post-transfer reset must restore our count
        transfer_queue.DEFAULT_TORCH_NUM_THREADS = threads
    return threads


def pin_isa() -> str:
    """Give torch's and MKL's float kernels one code path on every x86-64 CPU that has AVX2, Intel or AMD.

    torch picks vectorised kernels (log_softmax, reductions) for the widest instruction set the CPU has,
    and MKL its matmul kernels by CPU model and vendor, so machines round differently. ``ATEN_CPU_CAPABILITY=avx2``
    selects torch's AVX2 kernels (the same compiled code on any AVX2 CPU), ``ONEDNN_MAX_CPU_ISA=AVX2`` oneDNN's,
    and ``MKL_CBWR=COMPATIBLE`` (MKL's conditional numerical reproducibility) MKL's single SSE2 code path: the
    one branch MKL documents for Intel and non-Intel CPUs alike (``MKL_CBWR=AVX2`` is ignored on AMD, which
    then runs MKL's AUTO branch). Both libraries read these lazily; in this process MKL may already have read
    its settings (importing verl initialises it), so what counts is the environment the processes started
    afterwards inherit: Ray's workers, which run the model.
    ``$VERL_HADW_CPU_ISA=native`` keeps each machine's own choice; CPUs without AVX2 (and non-x86 ones) keep
    theirs too. Returns ``"avx2"`` or ``"native"``.
    """
    wanted = os.environ.get(ISA_ENV, "avx2").strip().lower()
    if wanted not in ("avx2", "native"):
        raise ValueError(f"{ISA_ENV}={wanted!r}: use avx2 (same kernels on every AVX2 CPU) or native")
    has_avx2 = getattr(torch.cpu, "_is_avx2_supported", lambda: False)()
    if wanted == "native" or not has_avx2:
        return "native"
    os.environ[ISA_ENV] = "avx2"
    os.environ.update(ISA_VARS)
    return "avx2"


def pin_numerics() -> tuple[int, str]:
    """``pin_threads`` and ``pin_isa``: what makes a CPU run's numbers independent of the machine."""
    return pin_threads(), pin_isa()


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

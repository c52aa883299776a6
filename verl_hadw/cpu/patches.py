"""Every monkeypatch the CPU path applies to verl, in one place, for verl 0.9.0 and 0.9.1 only.

Applied by ``verl_hadw.cpu`` only when ``VERL_PLATFORM=cpu``. Each entry says which verl behaviour blocks
CPU runs and what replaces it; a different verl version fails with a clear error instead of patching
code we have not read.
"""

from __future__ import annotations

import os

import verl
import wrapt

from verl_hadw.verl.process_state import PROCESS
from verl_hadw.verl.support import trl_has_value_head

#: the verl versions whose patched functions were read: 0.9.0's and 0.9.1's bodies of the functions patched and
#: replaced here are identical (distributed.initialize_global_process_group_ray, engine_workers' use of it,
#: monkey_patch.is_trl_available), as are the registries platform.py, rollout.py and weight_sync.py register in
SUPPORTED_VERL = ("0.9.0", "0.9.1")


def _gloo_only_process_group(distributed) -> None:
    """verl builds the backend string ``f"cpu:gloo,{device}:{backend}"``, which on a CPU device is
    ``"cpu:gloo,cpu:gloo"`` and torch rejects ("Duplicate device type cpu"). Use plain gloo.

    Put in place when ``verl.utils.distributed`` is imported, before any module takes the function by name."""
    original = distributed.initialize_global_process_group_ray
    if getattr(original, "verl_hadw_gloo", False):
        return

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray.verl_hadw_gloo = True
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def _engine_workers_use_gloo(engine_workers) -> None:
    """verl's engine workers call the function by the name they imported: the patched one, unless
    ``verl.utils.distributed`` was loaded before this module was (then rebind it here)."""
    import verl.utils.distributed as distributed

    engine_workers.initialize_global_process_group_ray = distributed.initialize_global_process_group_ray


def _trl_without_value_head(monkey_patch) -> None:
    """verl's ``apply_monkey_patch`` imports TRL's ``AutoModelForCausalLMWithValueHead`` whenever TRL is installed,
    to patch its ``state_dict``; TRL 1.x no longer has that class, so with the ``[trl]`` extra in the environment
    every FSDP actor fails at start-up (``verl_hadw/verl/support.py``). The class is only patched there,
    never used: treat a TRL without it as absent."""
    monkey_patch.is_trl_available = trl_has_value_head


#: verl's module -> the patch applied to it once it is imported (at once if it already is): a process that never
#: imports the module pays nothing for it
PATCHES = {
    "verl.utils.distributed": _gloo_only_process_group,
    "verl.workers.engine_workers": _engine_workers_use_gloo,
    "verl.models.transformers.monkey_patch": _trl_without_value_head,
}

# verl reads these to pick a training engine; its FSDP engine is registered for cuda/nvidia only and runs on
# the CPU device once selected (engine/base.py honours the override).
ENGINE_ENV = {"VERL_ENGINE_DEVICE": "cuda", "VERL_ENGINE_VENDOR": "nvidia"}


def apply() -> None:
    """Apply every patch once, each when its module is imported; refuse on a verl version other than the pinned
    ones."""
    if "cpu" in PROCESS.applied_patches:
        return
    if verl.__version__ not in SUPPORTED_VERL:
        raise RuntimeError(
            f"verl_hadw.cpu supports verl {' and '.join(SUPPORTED_VERL)} only (found {verl.__version__}); its "
            f"patches of verl internals are not checked against other versions. Install verl=={SUPPORTED_VERL[-1]} "
            "or unset VERL_PLATFORM=cpu."
        )
    for key, value in ENGINE_ENV.items():
        os.environ.setdefault(key, value)
    for module, patch in PATCHES.items():
        wrapt.register_post_import_hook(patch, module)
    PROCESS.applied_patches.add("cpu")

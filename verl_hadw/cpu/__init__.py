"""Run verl 0.9.1's (or 0.9.0's) unmodified ``main_ppo`` on a CPU-only machine (for the demo and end-to-end tests).

Opt-in: only a process told to (``VERL_USE_EXTERNAL_MODULES=verl_hadw.cpu``) imports it, and it patches only under
``VERL_PLATFORM=cpu``. It registers a ``cpu`` platform, the ``hfcpu`` rollout and the ``hfcpu_ray`` checkpoint engine
in verl's own registries, applies ``patches.py`` and pins torch's threads and kernels (``platform.pin_numerics``).
"""

import os

import wrapt

from verl_hadw.cpu import patches, platform  # noqa: F401  (platform: registered on import)

# verl imports this module in every process of a run (reward workers, request router, TransferQueue's too).
# Registering when verl's module concerned is imported (at once if already loaded) spares the processes that never
# use a rollout or a checkpoint engine the import of verl's worker configs and transformers: ``import verl`` with this
# module went from 8.3 to 6.0 core-seconds (a whole launch measured no difference).
LAZY_REGISTRATIONS = {  # verl's module -> ours, imported (registering) once verl's has been
    "verl.workers.rollout": "verl_hadw.cpu.rollout",
    "verl.checkpoint_engine": "verl_hadw.cpu.weight_sync",
}


def _importer(module: str):
    def register(_verl_module) -> None:
        import importlib

        importlib.import_module(module)  # its module-level registrations run once

    return register


for _verl_module, _ours in LAZY_REGISTRATIONS.items():
    wrapt.register_post_import_hook(_importer(_ours), _verl_module)

ACTIVE = os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"
if ACTIVE:
    patches.apply()
    platform.pin_numerics()

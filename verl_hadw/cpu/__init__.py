"""Run verl 0.9.1's (or 0.9.0's) unmodified ``main_ppo`` on a CPU-only machine (for the demo and end-to-end tests).

Opt-in only: nothing here runs unless a process imports ``verl_hadw.cpu`` (selected with
``VERL_USE_EXTERNAL_MODULES=verl_hadw.cpu``) *and* ``VERL_PLATFORM=cpu`` is set, so GPU users are never
affected. Importing it registers, through verl's own extension points:

- a ``cpu`` platform in ``verl.plugin.platform.PlatformRegistry`` (``platform.py``), at once;
- an ``hfcpu`` rollout (a ``transformers`` model with a KV-cache decode loop, in a Ray actor) in verl's
  rollout and replica registries (``rollout.py``), when ``verl.workers.rollout`` is imported;
- an ``hfcpu_ray`` checkpoint engine for rollouts in their own resource pool (``separate_async``;
  ``weight_sync.py``), when ``verl.checkpoint_engine`` is imported;

and applies the few monkeypatches verl's CPU path still needs, all listed in ``patches.py`` and guarded
by a check of verl's version (0.9.0 or 0.9.1, whose patched functions are identical), each when verl's module it
patches is imported. It also pins torch's thread count and the instruction set of torch's and MKL's kernels in every
process (``platform.pin_numerics``), so that a run's numbers do not depend on the machine's core count or vector
width.

verl imports this module in every process of a run, the reward workers, the request router and TransferQueue's
included. Registering and patching on import of the module concerned (wrapt's post-import hooks; at once when it is
already loaded) spares the processes that never use a rollout, a checkpoint engine or verl's workers the import of
verl's worker configs and transformers (``import verl`` with this module: 8.3 -> 6.0 core-seconds; most processes
of a launch import those modules for their own work anyway, and a whole launch measured no difference).
"""

import os

import wrapt

from verl_hadw.cpu import patches, platform  # noqa: F401  (platform: registered on import)

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

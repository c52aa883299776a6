"""Run verl 0.9.1's (or 0.9.0's) unmodified ``main_ppo`` on a CPU-only machine (for the demo and end-to-end tests).

Opt-in only: nothing here runs unless a process imports ``verl_hadw.cpu`` (selected with
``VERL_USE_EXTERNAL_MODULES=verl_hadw.cpu``) *and* ``VERL_PLATFORM=cpu`` is set, so GPU users are never
affected. Importing it registers, through verl's own extension points:

- a ``cpu`` platform in ``verl.plugin.platform.PlatformRegistry`` (``platform.py``);
- an ``hfcpu`` rollout (a ``transformers`` model with a KV-cache decode loop, in a Ray actor) in verl's
  rollout and replica registries (``rollout.py``);
- an ``hfcpu_ray`` checkpoint engine for rollouts in their own resource pool (``separate_async``;
  ``weight_sync.py``);

and applies the few monkeypatches verl's CPU path still needs, all listed in ``patches.py`` and guarded
by a check of verl's version (0.9.0 or 0.9.1, whose patched functions are identical). It also pins torch's
thread count and the instruction set of torch's and MKL's kernels in every process (``platform.pin_numerics``),
so that a run's numbers do not depend on the machine's core count or vector width.
"""

import os

from verl_hadw.cpu import patches, platform, rollout, weight_sync  # noqa: F401  (registration side effects)

ACTIVE = os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"
if ACTIVE:
    patches.apply()
    platform.pin_numerics()

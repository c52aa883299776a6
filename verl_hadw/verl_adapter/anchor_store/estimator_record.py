"""A run without an anchor (``dgpo``) still says which estimator trained its checkpoints, and a resume checks it.

Switching estimator on resume is refused (``core.anchor.compatibility``: ``algorithm.adv_estimator`` changes the
method): a checkpoint trained under HA-DW resumed under dgpo would drop its anchor, and one trained under dgpo
resumed under HA-DW would start an anchor mid-run. Each trainer gets what it allows:

- v1 trainer with the checkpoint callback: the callback writes the options-only file into every checkpoint and
  checks the file of the one verl resumes from at start-up (``checkpoint_files.CheckpointFiles``).
- legacy trainer (``trainer.use_v1=false``), and verl 0.9.0's v1 trainer (no checkpoint hook in either): dgpo writes
  an options-only snapshot after each step where HA-DW writes its anchor (``legacy_snapshots``), and the first call
  of a resumed run checks the snapshot of the checkpoint verl loaded.
- v1 trainer of verl >= 0.9.1 without the callback: nothing can be written; the first call of a resumed run checks
  the anchor file of the checkpoint verl loaded, when it has one (an HA-DW checkpoint resumed under dgpo is refused,
  not dropped).

Outside a trainer (no verl step) nothing is read or written.
"""

from __future__ import annotations

from verl_hadw.verl_adapter.anchor_home import legacy_snapshots
from verl_hadw.verl_adapter.anchor_home.checkpoint_files import CheckpointFiles
from verl_hadw.verl_adapter.config.call_config import CallConfig
from verl_hadw.verl_adapter.process_state import PROCESS
from verl_hadw.verl_adapter.steps import trainer_run, trainer_step

__all__ = ["check_resumed", "record"]


def check_resumed(call: CallConfig) -> None:
    """At every call of an estimator without an anchor, before it computes (``call``: what the call read of verl's
    config): on the first call of verl's ``fit()``, a run resumed from a checkpoint trained under another estimator
    stops, before its first update."""
    step, fit = trainer_step(), trainer_run()
    if step is None or PROCESS.estimator_checked_run is fit:
        return
    snapshots = legacy_snapshots.from_call(call)
    if snapshots is not None:
        snapshots.check_estimator(call.run.hadw.state_key, step)
    elif step > 1 and call.trainer is not None:
        CheckpointFiles(call.trainer, call.run.flat()).check_estimator()
    PROCESS.estimator_checked_run = fit  # checked (a refused run is checked again at its next call)


def record(call: CallConfig) -> None:
    """After each successful call: under the legacy trainer, the options-only snapshot of this step (no anchor),
    which a resume under another estimator reads. The v1 callback writes its file at verl's save itself."""
    step = trainer_step()
    snapshots = None if step is None else legacy_snapshots.from_call(call)
    if snapshots is not None:
        snapshots.after_step(step, call.run.hadw.state_key, None)

"""Kills this process with SIGKILL at one moment of ``checkpoint-<N>``'s save, as a crash, an OOM kill or a pre-empted
job would: nothing unwinds, no ``finally`` runs. A killed run loads it: TRL's (``trl_killed_run.py`` imports it) and
ms-swift's (``--external_plugins``). ``VERL_HADW_KILL_AT``: one of ``MOMENTS``; ``VERL_HADW_KILL_STEP``: N (default
2). Without ``VERL_HADW_KILL_AT`` it changes nothing; ``install`` arms it directly (a forked run).

The moments, in the order of an HF Trainer's save (transformers 5.x ``Trainer._save_checkpoint``, ms-swift's mixin
around it):

- ``anchor``: our anchor file's temporary written and synced, not yet renamed into place;
- ``weights``: the model's weights file half written;
- ``optimizer``: the optimizer and scheduler written, the RNG states and ``trainer_state.json`` not;
- ``trainer_state``: ``trainer_state.json`` half written;
- ``rotation``: every file of checkpoint-N written, the older checkpoints (``save_total_limit``) not yet removed;
- ``link``: the Trainer's save done, swift's ``last-checkpoint`` link not yet moved (TRL: its ``on_save`` callbacks
  not yet run, where the anchor file used to be written).
"""

from __future__ import annotations

import os
import signal
import sys

MOMENTS = ("anchor", "weights", "optimizer", "trainer_state", "rotation", "link")
PARTIAL = ("anchor", "weights", "optimizer", "trainer_state")  # cut off before the Trainer's last file
STATE_FILE = "verl_hadw_anchor.json"


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _halve(path: str) -> None:
    """The first half of ``path`` kept: a write cut off half-way."""
    os.truncate(path, os.path.getsize(path) // 2)


def install(at: str, step: int) -> None:
    """Arm the kill at moment ``at`` of ``checkpoint-<step>``'s save (once a process)."""
    if getattr(sys, "_verl_hadw_kill_armed", False):
        return
    sys._verl_hadw_kill_armed = True  # swift may load a plugin file twice
    import transformers
    import transformers.modeling_utils as modeling_utils
    import transformers.trainer as trainer_module

    folder = f"checkpoint-{step}"

    def saving(path) -> bool:
        return folder in str(path)

    if at == "anchor":
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):
            if str(dst).endswith(STATE_FILE) and saving(dst):
                _die()
            return real_replace(src, dst, *args, **kwargs)

        os.replace = replace
    elif at == "weights":
        real_save_file = modeling_utils.safe_save_file

        def save_file(tensors, filename, *args, **kwargs):
            real_save_file(tensors, filename, *args, **kwargs)
            if saving(filename):
                _halve(filename)
                _die()

        modeling_utils.safe_save_file = save_file
    elif at == "optimizer":
        real_optimizer = transformers.Trainer._save_optimizer_and_scheduler

        def save_optimizer(self, output_dir):
            real_optimizer(self, output_dir)
            if saving(output_dir):
                _die()

        transformers.Trainer._save_optimizer_and_scheduler = save_optimizer
    elif at == "trainer_state":
        real_state = transformers.TrainerState.save_to_json

        def save_state(self, json_path):
            real_state(self, json_path)
            if saving(json_path):
                _halve(json_path)
                _die()

        transformers.TrainerState.save_to_json = save_state
    elif at == "rotation":
        real_rotate = trainer_module.rotate_checkpoints

        def rotate(*args, **kwargs):
            output_dir = kwargs.get("output_dir", args[0] if args else "")
            if os.path.isdir(os.path.join(output_dir, folder)):
                _die()
            return real_rotate(*args, **kwargs)

        trainer_module.rotate_checkpoints = rotate
    elif at == "link":
        real_checkpoint = transformers.Trainer._save_checkpoint

        def save_checkpoint(self, *args, **kwargs):
            result = real_checkpoint(self, *args, **kwargs)
            if self.state.global_step == step:
                _die()
            return result

        transformers.Trainer._save_checkpoint = save_checkpoint
    else:
        raise ValueError(f"VERL_HADW_KILL_AT={at!r}: one of {', '.join(MOMENTS)}")


if os.environ.get("VERL_HADW_KILL_AT"):
    install(os.environ["VERL_HADW_KILL_AT"], int(os.environ.get("VERL_HADW_KILL_STEP", "2")))

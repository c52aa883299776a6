"""A ``verl-hadw-swift rlhf`` run killed (SIGKILL) at the moments of checkpoint-2's save loses nothing.

The anchor file is in checkpoint-2 before the Trainer writes its own files: before ``--save_total_limit 1`` removes
checkpoint-1 and before swift moves its ``last-checkpoint`` link. A save cut off before the Trainer's last file
(``trainer_state.json``) leaves a partial checkpoint-2: ``--resume_from_checkpoint`` naming it (or the link, once it
points at a removed folder) is refused before any model loads, in one line at the command line (no traceback), naming
the newest whole checkpoint, and nothing on disk changes. Followed, that way ends equal to the run that was never
killed: the same anchor file, weights and logged steps at step 3, and no dead temporary file left."""

import json
import os
import signal

import pytest
import swift.utils
import torch
from kill_during_save import MOMENTS, PARTIAL, install
from repo_paths import HELPERS, ROOT
from safetensors.torch import load_file
from swift_runs import command_line, logged_steps, toy_arguments, train

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import PartialCheckpointError

# a launch each (~20 s): the kill swift's own link follows, the refusal of a partial checkpoint; the others in a fork
KILLED_AT_THE_COMMAND_LINE, REFUSED_AT_THE_COMMAND_LINE = ("link",), ("trainer_state",)
LINK = hasattr(swift.utils, "update_last_checkpoint_symlink")  # ms-swift 4.6's last-checkpoint link (4.3: none)


def killed(assets, out, moment: str) -> int:
    """The run of ``killed_arguments``, killed at ``moment``: through ``verl-hadw-swift rlhf`` (its exit status: swift's
    cli runs the route in a child and exits with its status, so -9 becomes 247), or in a fork of this process (its
    signal)."""
    if moment in KILLED_AT_THE_COMMAND_LINE:
        proc = command_line(killed_arguments(assets, out), out / "records", env={"VERL_HADW_KILL_AT": moment})
        assert proc.returncode == 256 - signal.SIGKILL, proc.stderr[-3000:]
        return signal.SIGKILL
    pid = os.fork()
    if pid == 0:  # the child: armed, trained, killed at the moment (never returns)
        try:
            install(moment, 2)
            train(killed_arguments(assets, out), out / "records")
        finally:
            os._exit(3)  # not killed: the parent sees no signal
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)


def killed_arguments(assets, out, **extra) -> list[str]:
    """Three steps, a checkpoint after each, only the newest kept; the kill plugin armed by VERL_HADW_KILL_AT only."""
    plugins = [str(ROOT / "examples" / "swift_toy_plugin.py"), str(HELPERS / "record_plugin.py"),
               str(HELPERS / "kill_during_save.py")]
    return toy_arguments(assets, out, steps=3, save_steps=1, save_total_limit=1, external_plugins=plugins, **extra)


def files(folder) -> dict[str, tuple[int, int]]:
    found = {}
    for root, dirs, names in os.walk(folder):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            info = os.lstat(os.path.join(root, name))
            found[os.path.relpath(os.path.join(root, name), folder)] = (info.st_size, info.st_mtime_ns)
    return found


def final(out):
    folder = out / "checkpoint-3"
    return json.loads((folder / STATE_FILE).read_text()), load_file(str(folder / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(assets, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight")
    train(killed_arguments(assets, out), out / "records")
    return final(out), logged_steps(out)


# The Trainer's own files: cut off in its weights or optimizer, a save is partial as when cut off in trainer_state.json,
# and the same check (hf_trainer's) refuses it; TRL's test kills at all six moments.
SWIFT_MOMENTS = [m for m in MOMENTS if m not in ("weights", "optimizer")]


@pytest.mark.parametrize("moment", SWIFT_MOMENTS)
def test_a_kill_at_each_moment_of_a_save_loses_nothing(assets, uninterrupted, tmp_path, moment):
    out = tmp_path / "run"
    assert killed(assets, out, moment) == signal.SIGKILL
    link = out / "last-checkpoint"
    whole = out / ("checkpoint-1" if moment in PARTIAL else "checkpoint-2")
    assert json.loads((whole / STATE_FILE).read_text())["global_step"] == int(whole.name.split("-")[1])
    assert (out / "checkpoint-1" / STATE_FILE).exists() or moment == "link"  # not removed before 2 was whole
    if LINK:  # not yet moved: its target holds its anchor, or is gone (rotated away)
        assert os.readlink(link) == "checkpoint-1"
    # what a user resumes from: the newest checkpoint, or the link once its target is gone
    refused = link if moment == "link" and LINK else out / "checkpoint-2" if moment in PARTIAL else None
    if refused is not None:
        before = files(out)
        said = f"cannot resume from {refused}: "
        if moment in REFUSED_AT_THE_COMMAND_LINE:
            argv = killed_arguments(assets, out, resume_from_checkpoint=str(refused))
            proc = command_line(argv, out / "refused")
            assert proc.returncode == 2, proc.stderr[-3000:]
            line = proc.stderr.strip().splitlines()[-1]
            assert line.startswith(f"verl-hadw-swift rlhf: error: {said}") and "Traceback" not in proc.stderr
            assert f"{whole} is the newest whole checkpoint beside it" in line
        else:
            with pytest.raises(PartialCheckpointError, match=f"{said}.*{whole} is the newest whole checkpoint"):
                train(killed_arguments(assets, out, resume_from_checkpoint=str(refused)), out / "refused")
        assert files(out) == before  # nothing written, moved or removed
    train(killed_arguments(assets, out, resume_from_checkpoint=str(whole)), out / "resumed")
    (anchor, weights), (straight_anchor, straight_weights) = final(out), uninterrupted[0]
    assert anchor == straight_anchor and weights.keys() == straight_weights.keys()
    assert all(torch.equal(weights[k], straight_weights[k]) for k in weights)
    done = int(whole.name.split("-")[1])
    assert logged_steps(out)[-(3 - done):] == uninterrupted[1][done:]
    assert not [p for p in files(out) if ".tmp" in p]  # no dead temporary file left
    if LINK:
        assert os.readlink(link) == "checkpoint-3"

"""A TRL run killed (SIGKILL) at each moment of checkpoint-2's save loses nothing.

The anchor file is in checkpoint-2 before the Trainer writes its own files, so before ``save_total_limit=1`` removes
checkpoint-1. A save cut off before the Trainer's last file (``trainer_state.json``) leaves a partial checkpoint-2:
``resume_from_checkpoint=True`` (which picks the newest folder) is refused before anything loads, in one line naming it
and checkpoint-1, the newest whole one, and changes nothing on disk. Followed, that way ends equal to the run that was
never killed: the same anchor file and the same weights at step 3, and no dead temporary file left. A save cut off
after it resumes from checkpoint-2 itself. The killed runs are processes of their own (``trl_killed_run.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from kill_during_save import MOMENTS, PARTIAL
from repo_paths import HELPERS
from safetensors.torch import load_file
from trl_helpers import killed_config, trainer

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import PartialCheckpointError

pytestmark = pytest.mark.slow  # a process per moment, each importing torch and TRL: ~6 s


def files(folder) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: (size, mtime_ns), to show that nothing was written, moved or removed."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            info = os.stat(os.path.join(root, name))
            found[os.path.relpath(os.path.join(root, name), folder)] = (info.st_size, info.st_mtime_ns)
    return found


def final(out) -> tuple[dict, dict]:
    """checkpoint-3's anchor file and weights."""
    folder = os.path.join(out, "checkpoint-3")
    with open(os.path.join(folder, STATE_FILE)) as f:
        return json.load(f), load_file(os.path.join(folder, "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The HA-DW and the DGPO run that were never killed: checkpoint-3's anchor file and weights."""
    runs = {}
    for estimator in ("hadw", "dgpo"):
        out = tmp_path_factory.mktemp(f"straight_{estimator}")
        trainer(killed_config(out, estimator)).train()
        runs[estimator] = final(out)
    return runs


@pytest.mark.parametrize("estimator, moment", [*(("hadw", m) for m in MOMENTS), ("dgpo", "trainer_state")])
def test_a_kill_at_each_moment_of_a_save_loses_nothing(uninterrupted, tmp_path, estimator, moment):
    out = tmp_path / "run"
    env = {**os.environ, "VERL_HADW_KILL_AT": moment, "VERL_HADW_KILL_STEP": "2", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(HELPERS / "trl_killed_run.py"), str(out), estimator], env=env,
                          cwd=HELPERS, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    newest, whole = out / "checkpoint-2", out / ("checkpoint-1" if moment in PARTIAL else "checkpoint-2")
    assert json.loads((whole / STATE_FILE).read_text())["global_step"] == int(whole.name.split("-")[1])
    assert (out / "checkpoint-1" / STATE_FILE).exists() or moment not in PARTIAL  # not removed before 2 was whole
    resumed = trainer(killed_config(out, estimator))
    if moment in PARTIAL:
        before = files(out)
        said = rf"^cannot resume from {newest}: .*{whole} is the newest whole checkpoint beside it"
        with pytest.raises(PartialCheckpointError, match=said) as refused:
            resumed.train(resume_from_checkpoint=True)  # the Trainer's own choice: the newest folder
        assert "\n" not in str(refused.value) and resumed.state.global_step == 0  # one line; nothing loaded
        assert files(out) == before  # nothing written, moved or removed
        resumed = trainer(killed_config(out, estimator))
        resumed.train(resume_from_checkpoint=str(whole))  # the way the refusal names
    else:
        resumed.train(resume_from_checkpoint=True)
    assert resumed.state.global_step == 3 and len(resumed.generations) == 3 - int(whole.name.split("-")[1])
    anchor, weights = final(out)
    straight_anchor, straight_weights = uninterrupted[estimator]
    assert anchor == straight_anchor
    assert weights.keys() == straight_weights.keys()
    assert all(torch.equal(weights[k], straight_weights[k]) for k in weights)
    assert not [p for p in files(out) if ".tmp." in p]  # no dead temporary file left

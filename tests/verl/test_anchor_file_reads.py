"""Anchor files are read only as bounded regular files: a FIFO, a symlink to /dev/zero, a directory, a
file beyond the size cap or JSON nested past the parser's depth is an ``AnchorFileError`` naming the path, never a
read without end, a hang or a RecursionError. Swept over every reader: the v1 callback's resume, the legacy
trainer's snapshots, the search for an earlier checkpoint, TRL's anchor file and its trainer_state.json."""

import json
import os
import signal

import pytest
from anchor_run import batch, config, run
from omegaconf import OmegaConf
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.anchor import file_format
from verl_hadw.core.anchor.checkpoint_dirs import earlier_valid_checkpoint
from verl_hadw.core.anchor.file_format import STATE_FILE, read_bounded
from verl_hadw.core.errors import AnchorFileError, PartialCheckpointError
from verl_hadw.verl import process_state
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR
from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback


def _fifo(path):
    os.mkfifo(path)  # nobody ever writes: a blocking open or read would wait forever


def _dev_zero(path):
    os.symlink("/dev/zero", path)  # endless zeros: an unbounded read never ends


def _directory(path):
    os.mkdir(path)


def _huge(path):
    with open(path, "wb") as f:  # sparse: costs no disk
        f.truncate(file_format.MAX_FILE_BYTES + 1)


def _deep(path):
    with open(path, "w") as f:
        f.write("[" * 100_000)  # past the JSON parser's recursion limit


UNBOUNDED = {
    "fifo": (_fifo, "is a FIFO (named pipe), not a regular file"),
    "symlink-to-dev-zero": (_dev_zero, "is a character device, not a regular file"),
    "directory": (_directory, "is a directory, not a regular file"),
    "beyond-the-cap": (_huge, f"is larger than {file_format.MAX_FILE_BYTES} bytes"),
    "deep-nesting": (_deep, "nests arrays or objects deeper than a JSON reader can follow"),
}


@pytest.fixture(autouse=True)
def _no_hang():
    """A read that hangs fails the test instead of the session."""
    def hung(signum, frame):
        raise TimeoutError("the read did not end")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def replace_with(path, kind):
    if os.path.lexists(path):
        os.remove(path)
    UNBOUNDED[kind][0](str(path))
    return UNBOUNDED[kind][1]


@pytest.mark.parametrize("kind", list(UNBOUNDED))
def test_the_v1_resume_and_the_earlier_checkpoint_search_refuse_files_that_never_end(tmp_path, kind):
    run(str(tmp_path), 1, 2, save=True, resume=False)
    process_state.reset()
    run(str(tmp_path), 3, 4, save=True, resume=True)
    process_state.reset()
    (tmp_path / "global_step_4" / "actor").mkdir()
    (tmp_path / "global_step_2" / "actor").mkdir()
    earlier = tmp_path / "global_step_2" / STATE_FILE
    replace_with(earlier, kind)  # the search must pass over it, not hang on it
    path = tmp_path / "global_step_4" / STATE_FILE
    problem = replace_with(path, kind)
    with pytest.raises(AnchorFileError) as info:
        HadwCheckpointCallback(config(str(tmp_path), resume=True))
    message = str(info.value)
    assert f"cannot restore the HA-DW anchor: {path} {problem}" in message
    assert "none found beside" in message  # the earlier one was looked at and refused, not read without end
    assert earlier_valid_checkpoint(str(tmp_path / "global_step_4")) is None


@pytest.mark.parametrize("kind", list(UNBOUNDED))
def test_the_legacy_snapshot_reader_refuses_them_too(tmp_path, kind):
    cfg = OmegaConf.create({
        "algorithm": {"adv_estimator": "hadw", "hadw": {"state_key": "legacy-reads"}},
        "trainer": {"use_v1": False, "default_local_dir": str(tmp_path), "save_freq": 1, "resume_mode": "auto",
                    "resume_from_path": None},
    })
    for step in (1, 2):
        SkipManager.set_step(step)
        compute_advantage(batch(step), "hadw", config=cfg.algorithm)
    (tmp_path / "global_step_2" / "actor").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")
    path = tmp_path / SNAPSHOT_DIR / "step_2.json"
    problem = replace_with(path, kind)
    process_state.reset()
    SkipManager.set_step(3)
    with pytest.raises(AnchorFileError, match="HA-DW anchor file") as info:
        compute_advantage(batch(3), "hadw", config=cfg.algorithm)
    assert f"{path} {problem}" in str(info.value)


@pytest.mark.parametrize("kind", list(UNBOUNDED))
@pytest.mark.parametrize("which", ["anchor file", "trainer_state.json"])
def test_trl_refuses_them_in_its_anchor_file_and_its_trainer_state(tmp_path, kind, which):
    from trl_helpers import config as trl_config

    from verl_hadw.hf_trainer.checkpoint_anchor import TrainerAnchor
    from verl_hadw.trl.grpo_config import TRL

    args = trl_config(tmp_path)
    anchor = TrainerAnchor(args.hadw_options(), args.recorded_options(), TRL)
    anchor.observe(1, 3.0, 8)
    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    anchor.save(str(folder), 1)
    path = folder / (STATE_FILE if which == "anchor file" else "trainer_state.json")
    problem = replace_with(path, kind)
    # an unreadable trainer_state.json: TRL cannot resume from the folder (PartialCheckpointError, naming the file)
    refused = AnchorFileError if which == "anchor file" else PartialCheckpointError
    with pytest.raises(refused) as info:
        TrainerAnchor(args.hadw_options(), args.recorded_options(), TRL).start(str(folder))
    assert str(path) in str(info.value) and problem in str(info.value)


def test_a_real_anchor_file_is_far_below_the_cap(tmp_path):
    run(str(tmp_path), 1, 3, save=True, resume=False)
    path = tmp_path / "global_step_3" / STATE_FILE
    assert read_bounded(str(path)) == path.read_bytes()  # a regular file reads whole
    data = json.loads(path.read_text())
    full = 1001  # window=1000, full: 1001 values of each history at 17 digits
    data["state"].update(posteriors=[0.12345678901234567] * full, accuracies=[0.9876543210987654] * full)
    assert len(json.dumps(data)) * 100 < file_format.MAX_FILE_BYTES

"""One ``state_key``, one run at a time in a process: a run whose anchor a later run of the same key took
over is refused at its next call, with a message naming the key and what to set, never served from the other run's
anchor. Runs one after the other (a sweep, a notebook) and a resume in the same process go on as before."""

import pytest
from anchor_run import batch, config
from omegaconf import OmegaConf
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.errors import ConfigError
from verl_hadw.verl import metrics
from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback

KEY = "proj/exp"  # anchor_run's state_key


def steps(cfg, first, last):
    """The anchor values of steps first..last of the run whose config is ``cfg``."""
    rows = []
    for step in range(first, last + 1):
        SkipManager.set_step(step)
        compute_advantage(batch(step), "hadw", config=cfg.algorithm)
        logged = metrics.pop(step)
        rows.append((logged["hadw/anchor_prior"], logged["hadw/anchor_posterior"]))
    return rows


def refused(cfg, step):
    SkipManager.set_step(step)
    with pytest.raises(ConfigError) as info:
        compute_advantage(batch(step), "hadw", config=cfg.algorithm)
    message = str(info.value)
    assert f"algorithm.hadw.state_key={KEY!r} is used by two runs in this process" in message
    assert "Give each run its own +algorithm.hadw.state_key" in message
    return message


@pytest.mark.parametrize("second_first", [False, True], ids=["first-run-goes-on", "second-run-steps-first"])
def test_a_second_callback_with_the_same_key_refuses_the_first_runs_next_call(tmp_path, second_first):
    first = config(str(tmp_path / "a"), resume=False)
    HadwCheckpointCallback(first)
    straight = steps(first, 1, 3)
    second = config(str(tmp_path / "b"), resume=False)
    HadwCheckpointCallback(second)
    if second_first:
        assert steps(second, 1, 2) == straight[:2]  # a fresh anchor of its own
    assert "after this run's step 3" in refused(first, 4)
    assert steps(second, 3 if second_first else 1, 3) == straight[2 if second_first else 0:]  # untouched by run 1


def test_one_config_object_for_two_runs_is_told_apart_by_the_step(tmp_path):
    cfg = config(str(tmp_path), resume=False)
    HadwCheckpointCallback(cfg)
    steps(cfg, 1, 3)
    HadwCheckpointCallback(cfg)  # a fresh run: its first step is 1, but step 4 of the run before arrives
    refused(cfg, 4)


def test_runs_one_after_the_other_and_a_resume_in_the_same_process_go_on(tmp_path):
    cfg = config(str(tmp_path / "a"), resume=False)
    HadwCheckpointCallback(cfg)
    straight = steps(cfg, 1, 6)
    for again in (config(str(tmp_path / "b"), resume=False), cfg):  # a new config, or the same one reused
        HadwCheckpointCallback(again)
        assert steps(again, 1, 6) == straight
    saved = config(str(tmp_path / "c"), resume=False)
    callback = HadwCheckpointCallback(saved)
    steps(saved, 1, 3)
    callback.on_save(trainer=None, global_step=3, checkpoint_dir=str(tmp_path / "c" / "global_step_3"))
    (tmp_path / "c" / "latest_checkpointed_iteration.txt").write_text("3")
    resumed = config(str(tmp_path / "c"), resume=True)
    assert HadwCheckpointCallback(resumed).restored_step == 3
    assert steps(resumed, 4, 6) == straight[3:]  # the resume continues the saved run bit for bit


def test_without_the_callback_a_new_fit_retires_the_earlier_run_too(tmp_path):
    verl_like = {"skip": {}, "trainer": {"v1": {"trainer_mode": "sync"}}}  # what SkipManager.init reads
    first = OmegaConf.merge(config(str(tmp_path / "a"), resume=False), verl_like)
    SkipManager.init(first)
    straight = steps(first, 1, 3)
    second = OmegaConf.merge(config(str(tmp_path / "b"), resume=False), verl_like)
    SkipManager.init(second)
    assert steps(second, 1, 2) == straight[:2]
    refused(first, 4)


def test_the_way_out_works_each_run_its_own_key(tmp_path):
    reference = config(str(tmp_path / "ref"), resume=False, extra_hadw={"state_key": "proj/ref"})
    HadwCheckpointCallback(reference)
    straight = steps(reference, 1, 4)
    first = config(str(tmp_path / "a"), resume=False)
    HadwCheckpointCallback(first)
    assert steps(first, 1, 3) == straight[:3]
    second = config(str(tmp_path / "b"), resume=False, extra_hadw={"state_key": "proj/other"})
    HadwCheckpointCallback(second)
    assert steps(second, 1, 2) == straight[:2]
    assert steps(first, 4, 4) == straight[3:]  # interleaved, each on its own anchor

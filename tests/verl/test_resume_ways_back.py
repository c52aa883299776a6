"""The resumes: what the anchor's accuracy is read from is recorded and checked, a checkpoint of another
``state_key`` is said, a refused switch names the way back, a broken link is named as one, and a callback built in
code silences the "saved in no checkpoint" warning. Every refusal leaves the files and the anchor as they were."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from anchor_run import config as verl_config
from anchor_run import run
from trl_helpers import config

from verl_hadw.core.anchor.compatibility import ACCURACY_INDEX, REWARD_FUNCS, REWARD_WEIGHTS
from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import AnchorFileError, ResumeConflictError
from verl_hadw.hf_trainer.checkpoint_anchor import OptionsRecord, TrainerAnchor
from verl_hadw.trl.grpo_config import TRL
from verl_hadw.verl import process_state
from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback


def anchor(root: Path, weights=(1.0, 1.0), funcs=("acc", "short"), **overrides) -> TrainerAnchor:
    args = config(root, **overrides)
    return TrainerAnchor(args.hadw_options(), args.recorded_options(list(weights), list(funcs)), TRL)


def save(root: Path, step: int, record) -> Path:
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if isinstance(record, TrainerAnchor):
        record.observe(step, 5.0, 8)
    record.save(str(folder), step)
    return folder


@pytest.mark.parametrize("saved, resumed, change", [
    ({"accuracy_reward_index": 0}, {"accuracy_reward_index": 1}, "accuracy_reward_index: 0 -> 1"),
    ({"weights": (1.0, 1.0)}, {"weights": (1.0, 0.5)}, "reward_weights: [1.0, 1.0] -> [1.0, 0.5]"),
    # saved with reward_funcs=[acc, short], resumed with [short, acc] and the same index: y_t would be read
    # from another function
    ({"accuracy_reward_index": 0}, {"accuracy_reward_index": 0, "funcs": ("short", "acc")},
     "reward_funcs: ['acc', 'short'] -> ['short', 'acc']"),
])
def test_the_reward_columns_are_recorded_and_a_change_refuses(tmp_path, saved, resumed, change):
    folder = save(tmp_path, 2, anchor(tmp_path, **saved))
    before = (folder / STATE_FILE).read_bytes()
    later = anchor(tmp_path, **resumed)
    with pytest.raises(ResumeConflictError, match="cannot resume") as info:
        later.start(str(folder))
    assert change in str(info.value)
    assert later.state.open_step is None and later.restored_from is None  # not restored
    assert (folder / STATE_FILE).read_bytes() == before  # nothing written


def test_a_file_without_the_reward_columns_is_refused_naming_them(tmp_path):
    """Every anchor file records every option: one without the reward columns is damaged, not an older format."""
    folder = save(tmp_path, 2, anchor(tmp_path, accuracy_reward_index=0))
    data = json.loads((folder / STATE_FILE).read_text())
    del data["options"][ACCURACY_INDEX], data["options"][REWARD_WEIGHTS], data["options"][REWARD_FUNCS]
    (folder / STATE_FILE).write_text(json.dumps(data))
    later = anchor(tmp_path, accuracy_reward_index=0)
    with pytest.raises(AnchorFileError, match=r"options without algorithm\.accuracy_reward_index, "
                                              r"algorithm\.reward_weights, algorithm\.reward_funcs"):
        later.start(str(folder))
    assert later.state.open_step is None


def test_a_checkpoint_of_another_state_key_is_said(tmp_path):
    folder = save(tmp_path, 2, anchor(tmp_path, hadw_state_key="expB"))
    with pytest.warns(UserWarning, match=r"was saved by the run whose hadw_state_key is 'expB', not this run's "
                                         r"'expA'.*two experiments share one folder"):
        anchor(tmp_path, hadw_state_key="expA").start(str(folder))


def test_a_refused_estimator_switch_names_the_way_back(tmp_path):
    save(tmp_path, 2, anchor(tmp_path))
    dgpo = config(tmp_path, adv_estimator="dgpo")
    folder = save(tmp_path, 4, OptionsRecord(dgpo.hadw_state_key, dgpo.recorded_options([1.0, 1.0]), TRL))
    before = (folder / STATE_FILE).read_bytes()
    later = anchor(tmp_path)
    with pytest.raises(ResumeConflictError, match=rf"adv_estimator: 'dgpo' -> 'hadw'.*Ways out: resume from "
                                                  rf"{tmp_path / 'checkpoint-2'}, the newest earlier checkpoint"):
        later.start(str(folder))
    assert later.state.open_step is None and (folder / STATE_FILE).read_bytes() == before


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_a_broken_link_is_named_as_one_not_as_a_missing_anchor(tmp_path, link, caplog):
    folder = save(tmp_path, 2, anchor(tmp_path))
    path = folder / STATE_FILE
    path.unlink()
    os.symlink(tmp_path / "gone.json" if link == "dangling" else path, path)
    with pytest.raises(AnchorFileError, match=r"cannot be read \(.*a symbolic link to") as info:
        anchor(tmp_path).start(str(folder))
    assert "holds no HA-DW anchor" not in str(info.value)
    fresh = anchor(tmp_path, hadw_allow_missing_state=True)
    fresh.start(str(folder))  # goes on with a fresh anchor, saying why
    assert fresh.state.open_step is None and "a symbolic link to" in caplog.text
    assert os.path.islink(path)  # left as it was


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_verl_names_a_broken_link_too(tmp_path, link):
    run(str(tmp_path), 1, 2, save=True, resume=False)
    process_state.reset()
    path = tmp_path / "global_step_2" / STATE_FILE
    path.unlink()
    os.symlink(tmp_path / "gone.json" if link == "dangling" else path, path)
    with pytest.raises(AnchorFileError, match=r"cannot be read \(.*a symbolic link to") as info:
        HadwCheckpointCallback(verl_config(str(tmp_path), resume=True))
    assert "was not written with trainer.checkpoint_callback_class" not in str(info.value)
    process_state.reset()


def test_verl_refused_switch_names_the_way_back(tmp_path):
    run(str(tmp_path), 1, 2, save=True, resume=False)
    process_state.reset()
    (tmp_path / "global_step_2" / "actor").mkdir()
    data = json.loads((tmp_path / "global_step_2" / STATE_FILE).read_text())
    data.update(global_step=4, state=None)
    data["options"]["algorithm.adv_estimator"] = "dgpo"  # what a DGPO run's callback writes at step 4
    later = tmp_path / "global_step_4"
    (later / "actor").mkdir(parents=True)
    (later / STATE_FILE).write_text(json.dumps(data))
    cfg = verl_config(str(tmp_path), resume=True)
    cfg.trainer.resume_mode, cfg.trainer.resume_from_path = "resume_path", str(later)
    with pytest.raises(ResumeConflictError, match=rf"Ways out: resume from {tmp_path / 'global_step_2'} \(trainer"
                                                  rf".resume_mode=resume_path trainer.resume_from_path="):
        HadwCheckpointCallback(cfg)
    assert json.loads((later / STATE_FILE).read_text()) == data  # nothing written
    process_state.reset()


def test_a_callback_built_in_code_silences_the_unsaved_anchor_warning(tmp_path):
    from anchor_run import batch
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.skip.skip_manager import SkipManager

    cfg = verl_config(str(tmp_path), resume=False)
    cfg.trainer.save_freq = 5
    cfg.trainer.checkpoint_callback_class = None  # not named: built in code and handed to the trainer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        HadwCheckpointCallback(cfg)
        SkipManager.set_step(1)
        compute_advantage(batch(1), "hadw", config=cfg.algorithm)
    assert not [w for w in caught if "saved in no checkpoint" in str(w.message)]
    process_state.reset()

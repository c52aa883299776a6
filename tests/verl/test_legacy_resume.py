"""The anchor across restarts of verl's legacy trainer (trainer.use_v1=false): snapshots written by the estimator.

Steps are driven through verl's ``compute_advantage`` with a full config, as ``RayPPOTrainer.fit`` does; verl's
checkpoint is faked the way ``_save_checkpoint`` writes it (``global_step_N/{actor,data.pt}``, then the tracker).
Also a script: ``python test_legacy_resume.py CKPT FIRST LAST [--ray]`` prints one JSON
line per step from a fresh process.
"""

import json
import logging
import os

import pytest
from anchor_run import batch, verl_save
from omegaconf import OmegaConf
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import MissingAnchorStateError, ResumeConflictError
from verl_hadw.verl import metrics, process_state, support
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR, from_call
from verl_hadw.verl.config.run_options import read_call

pytestmark = pytest.mark.slow  # Ray / fake-cluster shells: tens of seconds

HERE = os.path.abspath(__file__)
KEY = "proj/legacy"


def legacy_config(ckpt, use_v1=False, save_freq=2, resume_path=None, **hadw):
    return OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": "hadw",
                "norm_adv_by_std_in_grpo": True,
                "hadw": {"state_key": KEY, "anchor": {"eta": 3.0, "window": 4}, **hadw},
            },
            "trainer": {
                "use_v1": use_v1, "default_local_dir": str(ckpt), "save_freq": save_freq,
                "resume_mode": "resume_path" if resume_path else "auto", "resume_from_path": resume_path,
            },
        }
    )


def train(cfg, first, last):
    """Legacy ``fit`` from ``first`` to ``last``: one estimator call per step, then verl's save if due."""
    ckpt, save_freq = cfg.trainer.default_local_dir, cfg.trainer.save_freq
    rows = []
    for step in range(first, last + 1):
        SkipManager.set_step(step)
        compute_advantage(batch(step), "hadw", config=cfg.algorithm)
        rows.append({"step": step, **metrics.pop(step)})
        if save_freq > 0 and step % save_freq == 0:
            verl_save(ckpt, step)
    return rows


def snapshots(ckpt):
    return sorted(os.listdir(os.path.join(ckpt, SNAPSHOT_DIR)))


def test_trainer_keys_are_reached_only_from_a_full_legacy_config(tmp_path):
    assert from_call(read_call(legacy_config(tmp_path).algorithm)).local_dir == str(tmp_path)
    v1 = from_call(read_call(legacy_config(tmp_path, use_v1=True).algorithm))  # verl 0.9.0 (no callback): snapshots too
    assert v1 is None if support.has_checkpoint_callback() else v1.local_dir == str(tmp_path)
    assert from_call(read_call(OmegaConf.create({"hadw": {}}))) is None  # detached node: no root to read trainer.* from
    assert from_call(read_call({"hadw": {}, "trainer": {"use_v1": False}})) is None


def test_resume_path_into_another_directory(tmp_path):
    straight = train(legacy_config(tmp_path / "straight"), 1, 4)
    process_state.reset()
    train(legacy_config(tmp_path / "a"), 1, 2)
    process_state.reset()
    SkipManager.set_step(-1)
    resumed = train(legacy_config(tmp_path / "b", resume_path=str(tmp_path / "a" / "global_step_2")), 3, 4)
    assert resumed == straight[2:]
    assert snapshots(tmp_path / "b") == ["step_4.json"]  # step 3 pruned: never checkpointed in b


def test_snapshots_are_kept_only_for_checkpointed_steps(tmp_path):
    cfg = legacy_config(tmp_path)
    train(cfg, 1, 3)
    assert snapshots(tmp_path) == ["step_2.json", "step_3.json"]  # step 1 never got a global_step_1
    (tmp_path / SNAPSHOT_DIR / "step_3.json.tmp.99").write_text("{")  # a write cut short by a crash
    train(cfg, 4, 5)
    assert snapshots(tmp_path) == ["step_2.json", "step_4.json", "step_5.json"]


def test_v1_and_trainerless_calls_write_nothing(tmp_path):
    train(legacy_config(tmp_path / "v1", use_v1=True), 1, 4)
    # the v1 trainer saves the anchor through the callback; verl 0.9.0 has none: snapshots (test_verl_versions.py)
    snapshots_too = not support.has_checkpoint_callback()
    assert (tmp_path / "v1" / "global_step_4").is_dir() and (tmp_path / "v1" / SNAPSHOT_DIR).exists() == snapshots_too
    process_state.reset()
    SkipManager.set_step(-1)  # outside a trainer each call is its own step: nothing is a verl step
    cfg = legacy_config(tmp_path / "none")
    for _ in range(3):
        compute_advantage(batch(1), "hadw", config=cfg.algorithm)
    assert not (tmp_path / "none").exists()
    process_state.reset()
    train(legacy_config(tmp_path / "never", save_freq=-1), 1, 3)  # verl never checkpoints
    assert not (tmp_path / "never").exists()


def test_missing_snapshot_is_an_error_unless_allowed(tmp_path, caplog):
    verl_save(tmp_path, 2)  # a checkpoint written without the snapshot
    with pytest.raises(MissingAnchorStateError, match=r"no anchor snapshot for step 2.*allow_missing_state=true"):
        train(legacy_config(tmp_path), 3, 3)
    process_state.reset()
    with caplog.at_level(logging.WARNING):
        train(legacy_config(tmp_path, allow_missing_state=True), 3, 3)
    assert "continuing with a fresh anchor" in caplog.text
    state = json.loads((tmp_path / SNAPSHOT_DIR / "step_3.json").read_text())["state"]
    assert state["committed_steps"] == 0 and state["open_step"] == 3


def test_snapshot_of_another_step_is_rejected(tmp_path):
    train(legacy_config(tmp_path), 1, 2)
    os.rename(tmp_path / "global_step_2", tmp_path / "global_step_4")
    os.rename(tmp_path / SNAPSHOT_DIR / "step_2.json", tmp_path / SNAPSHOT_DIR / "step_4.json")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("4")
    process_state.reset()
    with pytest.raises(MissingAnchorStateError, match="belongs to step 2.*resumes from step 4"):
        train(legacy_config(tmp_path), 5, 5)


def test_first_step_must_follow_the_checkpoint_verl_loaded(tmp_path):
    train(legacy_config(tmp_path), 1, 2)
    process_state.reset()
    with pytest.raises(MissingAnchorStateError, match=r"first training step is 5.*step 2"):
        train(legacy_config(tmp_path), 5, 5)


def test_snapshot_overwritten_by_a_run_that_never_saved_is_rejected(tmp_path):
    train(legacy_config(tmp_path), 1, 2)  # run A: checkpoint 2 with its anchor
    os.utime(tmp_path / "global_step_2" / "data.pt", (1e9, 1e9))  # A saved long before B ran
    process_state.reset()
    cfg_b = legacy_config(tmp_path, save_freq=100)  # run B in the same folder stops before its step-2 save
    train(cfg_b, 1, 2)
    process_state.reset()
    with pytest.raises(MissingAnchorStateError, match="written by a later run"):
        train(legacy_config(tmp_path), 3, 3)
    verl_save(tmp_path, 2)  # had B saved step 2, its snapshot would belong to that checkpoint
    process_state.reset()
    train(legacy_config(tmp_path), 3, 3)


def test_a_refused_estimator_switch_names_the_way_back(tmp_path):
    """HA-DW saved at step 2, then a DGPO run's checkpoint at step 4: resuming HA-DW from step 4 is refused, naming
    global_step_2 (the newest earlier checkpoint it continues) with verl's overrides; nothing is written."""
    train(legacy_config(tmp_path), 1, 2)
    process_state.reset()
    snapshot = json.loads((tmp_path / SNAPSHOT_DIR / "step_2.json").read_text())
    snapshot.pop("replaces_data_pt_mtime_ns", None)
    snapshot.update(global_step=4, state=None)  # what a DGPO run's estimator writes at step 4
    snapshot["options"]["algorithm.adv_estimator"] = "dgpo"
    verl_save(str(tmp_path), 4)
    (tmp_path / SNAPSHOT_DIR / "step_4.json").write_text(json.dumps(snapshot))
    before = {p.name: p.read_bytes() for p in (tmp_path / SNAPSHOT_DIR).iterdir()}
    back = tmp_path / "global_step_2"
    with pytest.raises(ResumeConflictError, match=rf"resume from {back} \(trainer.resume_mode=resume_path "
                                                  rf"trainer.resume_from_path={back}\)"):
        train(legacy_config(tmp_path), 5, 5)
    assert {p.name: p.read_bytes() for p in (tmp_path / SNAPSHOT_DIR).iterdir()} == before
    process_state.reset()


def test_checkpoint_of_the_v1_callback_or_a_copied_snapshot_is_used(tmp_path):
    straight = train(legacy_config(tmp_path / "straight"), 1, 4)
    process_state.reset()
    train(legacy_config(tmp_path / "a"), 1, 2)
    copy = tmp_path / "elsewhere" / "global_step_2"
    copy.mkdir(parents=True)
    (copy / STATE_FILE).write_text((tmp_path / "a" / SNAPSHOT_DIR / "step_2.json").read_text())
    process_state.reset()
    assert train(legacy_config(tmp_path / "b", resume_path=str(copy)), 3, 4) == straight[2:]


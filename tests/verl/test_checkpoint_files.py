"""Damaged anchor files on resume, anchor-config changes between runs, and failed saves."""

import errno
import json
import logging
import os
import shutil

import pytest
from anchor_run import batch, config, run
from omegaconf import OmegaConf
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.anchor import AnchorState, file_format
from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import AnchorFileError, AnchorSaveError, MissingAnchorStateError
from verl_hadw.verl import process_state
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback
from verl_hadw.verl.config.run_options import parse_run


def saved_run(tmp_path, last=3):
    """A checkpoint folder ``global_step_{last}`` written by a run of steps 1..last; returns its anchor file."""
    run(str(tmp_path), 1, last, save=True, resume=False)
    process_state.reset()
    return tmp_path / f"global_step_{last}" / STATE_FILE


def edit(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _pop(d, *keys):
    for k in keys[:-1]:
        d = d[k]
    d.pop(keys[-1])


def _set(value, *keys):
    def fn(d):
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return fn


DAMAGE = {
    "corrupt": (lambda p: p.write_bytes(b"{not json at all"), r"is not valid JSON, truncated or corrupt"),
    "truncated": (lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]), r"is not valid JSON, truncated"),
    "binary": (lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), r"is not valid JSON"),
    "empty": (lambda p: p.write_bytes(b""), r"is empty \(0 bytes\)"),
    "list": (lambda p: p.write_text("[1, 2, 3]"), r"holds an array where an object is expected"),
    "state-not-object": (lambda p: edit(p, _set([], "state")), r"has a 'state' that is not an object"),
    "schema": (lambda p: edit(p, _set(7, "state", "schema_version")), r"schema_version 7 but this .* reads version 1 "),
    "no-schema": (lambda p: edit(p, lambda d: _pop(d, "state", "schema_version")), r"schema_version None"),
    "missing-top": (lambda p: edit(p, lambda d: _pop(d, "global_step")), r"lacks the key\(s\) global_step"),
    "missing-field": (lambda p: edit(p, lambda d: _pop(d, "state", "posteriors")), r"lacks the key\(s\) state\.poster"),
    "unknown-field": (lambda p: edit(p, _set(1, "state", "extra")), r"unknown key state\.extra"),
    "prior-range": (lambda p: edit(p, _set(1.7, "state", "prior")), r"invalid fields: prior=1\.7"),
    "count-type": (lambda p: edit(p, _set("48", "state", "count")), r"count='48' \(expected an integer >= 1\)"),
    "nan-history": (lambda p: edit(p, _set([0.5, float("nan")], "state", "posteriors")), r"posteriors=\[0\.5, nan\]"),
    "ragged-history": (lambda p: edit(p, _set([0.5], "state", "accuracies")), r"posteriors and accuracies differ"),
    "correct>count": (lambda p: edit(p, _set(1000.0, "state", "correct")), r"correct=1000\.0 \(expected .*\[0, count"),
    "bool-flag": (lambda p: edit(p, _set("no", "state", "warned_frozen")), r"warned_frozen='no'"),
    "config-type": (lambda p: edit(p, _set(4, "state", "config")), r"config=4 \(expected an object\)"),
    "other-step": (lambda p: edit(p, _set(2, "global_step")), r"belongs to step 2 .* resumes from step 3"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_anchor_file_ends_in_one_clear_error(tmp_path, damage):
    path = saved_run(tmp_path)
    breaker, problem = DAMAGE[damage]
    breaker(path)
    with pytest.raises(AnchorFileError) as info:
        HadwCheckpointCallback(config(str(tmp_path), resume=True))
    error = info.value
    assert isinstance(error, MissingAnchorStateError) and isinstance(error, RuntimeError)
    message = str(error)
    assert f"cannot restore the HA-DW anchor: {path} " in message
    assert __import__("re").search(problem, message), message
    assert "Ways out: resume from an earlier global_step_N folder" in message
    assert "+algorithm.hadw.allow_missing_state=true to continue with a fresh anchor" in message
    assert error.__cause__ is None and error.__context__ is None  # one error, no JSONDecodeError/KeyError chain


def test_the_error_names_the_newest_earlier_checkpoint_that_can_be_resumed(tmp_path):
    run(str(tmp_path), 1, 2, save=True, resume=False)
    process_state.reset()
    run(str(tmp_path), 3, 4, save=True, resume=True)
    process_state.reset()
    run(str(tmp_path), 5, 6, save=True, resume=True)
    process_state.reset()
    for k in (2, 4, 6):
        (tmp_path / f"global_step_{k}" / "actor").mkdir()
    (tmp_path / "global_step_4" / STATE_FILE).write_text("{")  # damaged too: not a way out
    (tmp_path / "global_step_6" / STATE_FILE).write_text("")
    good = tmp_path / "global_step_2"
    with pytest.raises(AnchorFileError, match=rf"Ways out: resume from {good}, the newest earlier checkpoint") as info:
        HadwCheckpointCallback(config(str(tmp_path), resume=True))
    assert f"trainer.resume_from_path={good})" in str(info.value)
    # the advice works: resuming from there restores that anchor
    cfg = OmegaConf.merge(
        config(str(tmp_path), resume=True),
        {"trainer": {"resume_mode": "resume_path", "resume_from_path": str(good)}},
    )
    assert HadwCheckpointCallback(cfg).restored_step == 2
    assert anchor_client.state_dict(parse_run(cfg.algorithm).hadw)["open_step"] == 2


def test_a_checkpoint_without_weights_is_not_offered(tmp_path):
    run(str(tmp_path), 1, 2, save=True, resume=False)  # global_step_2 has a valid anchor but no actor/ folder
    process_state.reset()
    run(str(tmp_path), 3, 4, save=True, resume=True)
    process_state.reset()
    (tmp_path / "global_step_4" / STATE_FILE).write_text("[]")
    with pytest.raises(AnchorFileError, match=r"none found beside .*global_step_4"):
        HadwCheckpointCallback(config(str(tmp_path), resume=True))


def test_allow_missing_state_continues_past_a_damaged_file_with_a_fresh_anchor(tmp_path, caplog):
    path = saved_run(tmp_path)
    path.write_text('{"global_step": 3')
    with caplog.at_level(logging.WARNING, logger="verl_hadw.core.anchor"):
        cb = HadwCheckpointCallback(config(str(tmp_path), resume=True, extra_hadw={"allow_missing_state": True}))
    assert cb.restored_step is None
    messages = [r.message for r in caplog.records]
    assert any("is not valid JSON" in m and "continuing with a fresh anchor" in m for m in messages)
    SkipManager.set_step(4)
    compute_advantage(batch(4), "hadw", config=cb.config.algorithm)
    state = anchor_client.state_dict(cb.hadw)
    assert state["open_step"] == 4 and state["committed_steps"] == 0  # fresh: no history from steps 1-3


def continue_run(cfg, first, last):
    """Anchor views of steps first..last through the restored client, and the same from a reference state."""
    hadw = parse_run(cfg.algorithm).hadw
    rows = []
    for t in range(first, last + 1):
        v = anchor_client.get_client(hadw, trainer_step=t).observe(5 + t % 7, 16, t)
        rows.append((v.step, v.prior, v.posterior, v.eta_t, v.sigma_t))
    return rows


def reference(saved_state, anchor_cfg, first, last):
    state = AnchorState.from_dict(saved_state, anchor_cfg)  # history kept untrimmed, the new config
    out = []
    for t in range(first, last + 1):
        v = state.observe(t, 0, 5 + t % 7, 16)
        out.append((v.step, v.prior, v.posterior, v.eta_t, v.sigma_t))
    return out


@pytest.mark.parametrize("window, eta", [(2, 5.0), (8, 3.0), (4, 3.0)])
def test_resume_under_a_changed_anchor_config_keeps_history_and_warns(tmp_path, caplog, window, eta):
    path = saved_run(tmp_path, last=8)  # saved with window=4, eta=3.0: 5 history values kept
    saved_state = json.loads(path.read_text())["state"]
    assert len(saved_state["posteriors"]) == 5
    cfg = OmegaConf.merge(
        config(str(tmp_path), resume=True), {"algorithm": {"hadw": {"anchor": {"window": window, "eta": eta}}}}
    )
    with caplog.at_level(logging.WARNING, logger="verl_hadw.core.anchor"):
        cb = HadwCheckpointCallback(cfg)
    assert cb.restored_step == 8
    warnings = [r.message for r in caplog.records if "another algorithm.hadw.anchor config" in r.message]
    expected = [f"window: 4 -> {window}"] * (window != 4) + [f"eta: 3.0 -> {eta}"] * (eta != 3.0)
    if expected:
        assert len(warnings) == 1 and all(e in warnings[0] for e in expected), warnings
        assert "mode:" not in warnings[0]  # only the keys that changed
    else:
        assert warnings == []
    restored = anchor_client.state_dict(cb.hadw)
    assert restored["config"]["window"] == window and restored["config"]["eta"] == eta
    assert restored["posteriors"] == saved_state["posteriors"][-(window + 1) :]  # trimmed to what is read
    assert continue_run(cfg, 9, 16) == reference(saved_state, cb.hadw.anchor, 9, 16)


# ------------------------------------------------------------------------------------------------ saving
def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _half_written_dump(obj, f, **kwargs):
    f.write(json.dumps(obj)[:20])
    f.flush()
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


FAILURES = {
    "dump": ("json", "dump", _half_written_dump),
    "fsync": ("os", "fsync", _enospc),
    "replace": ("os", "replace", _enospc),
    "open": ("file_format", "open", _enospc),
}


@pytest.mark.parametrize("where", list(FAILURES))
def test_a_failed_save_leaves_no_partial_file_and_says_where(tmp_path, monkeypatch, where):
    cb = HadwCheckpointCallback(config(str(tmp_path), resume=False))
    SkipManager.set_step(1)
    compute_advantage(batch(1), "hadw", config=cb.config.algorithm)
    folder = tmp_path / "global_step_1"
    cb.on_save(trainer=None, global_step=1, checkpoint_dir=str(folder))
    before = (folder / STATE_FILE).read_bytes()
    SkipManager.set_step(2)
    compute_advantage(batch(2), "hadw", config=cb.config.algorithm)
    module, name, fake = FAILURES[where]
    target = {"json": json, "os": os, "file_format": file_format}[module]
    monkeypatch.setattr(target, name, fake, raising=False)
    with pytest.raises(AnchorSaveError) as info:
        cb.on_save(trainer=None, global_step=1, checkpoint_dir=str(folder))
    monkeypatch.undo()
    message = str(info.value)
    assert f"could not write the HA-DW anchor into {folder} (No space left on device)" in message
    assert "no partial verl_hadw_anchor.json was left" in message and "allow_missing_state=true" in message
    assert sorted(os.listdir(folder)) == [STATE_FILE]  # no .tmp left behind
    assert (folder / STATE_FILE).read_bytes() == before  # the earlier good file is untouched


def test_a_save_into_an_unwritable_place_fails_clearly_even_as_root(tmp_path):
    cb = HadwCheckpointCallback(config(str(tmp_path), resume=False))
    SkipManager.set_step(1)
    compute_advantage(batch(1), "hadw", config=cb.config.algorithm)
    (tmp_path / "a_file").write_text("not a directory")
    folder = tmp_path / "a_file" / "global_step_1"  # makedirs fails for root too
    with pytest.raises(AnchorSaveError, match=rf"into {folder} \(Not a directory\)"):
        cb.on_save(trainer=None, global_step=1, checkpoint_dir=str(folder))
    assert sorted(os.listdir(tmp_path)) == ["a_file"]


@pytest.mark.parametrize("blocker, cause", [
    ("directory-at-the-file", r"verl_hadw_anchor\.json is a directory, where the anchor file belongs"),
    ("file-at-the-folder", r"exists but is not a directory: a file stands where a folder of the path belongs"),
])
def test_a_failed_save_says_the_real_cause_not_a_full_disk(tmp_path, blocker, cause):
    cb = HadwCheckpointCallback(config(str(tmp_path), resume=False))
    SkipManager.set_step(1)
    compute_advantage(batch(1), "hadw", config=cb.config.algorithm)
    folder = tmp_path / "global_step_1"
    if blocker == "directory-at-the-file":
        (folder / STATE_FILE).mkdir(parents=True)
    else:
        folder.write_text("a file where verl's checkpoint folder belongs")
    with pytest.raises(AnchorSaveError, match=cause) as info:
        cb.on_save(trainer=None, global_step=1, checkpoint_dir=str(folder))
    assert "full" not in str(info.value) and "allow_missing_state=true" in str(info.value)


@pytest.mark.parametrize("estimator, said", [("dgpo", True), ("grpo", False)])
def test_dgpo_resumed_from_a_checkpoint_that_records_no_method_says_so(tmp_path, recwarn, estimator, said):
    """A checkpoint with no anchor file (an HA-DW run would refuse it) is said under
    DGPO; verl's own estimators are verl's business."""
    from omegaconf import OmegaConf

    from verl_hadw.verl.anchor_store.checkpoint_files import CheckpointFiles
    from verl_hadw.verl.config.run_options import parse_run

    folder = tmp_path / "global_step_2"
    (folder / "actor").mkdir(parents=True)
    trainer = OmegaConf.create({"resume_mode": "resume_path", "resume_from_path": str(folder),
                                "default_local_dir": str(tmp_path)})
    CheckpointFiles(trainer, parse_run({"adv_estimator": estimator}).flat()).check_estimator()
    messages = [str(w.message) for w in recwarn if "which method trained it is unknown" in str(w.message)]
    assert len(messages) == (1 if said else 0), messages
    assert sorted(p.name for p in folder.iterdir()) == ["actor"]  # nothing written


def _saving_run(ckpt, resume: bool):
    """anchor_run's config, with checkpoints every step (trainer.save_freq=1), and its callback."""
    cfg = config(str(ckpt), resume)
    cfg.trainer.save_freq = 1
    return cfg, HadwCheckpointCallback(cfg)


def _step(cfg, step: int) -> dict:
    SkipManager.set_step(step)
    compute_advantage(batch(step), "hadw", config=cfg.algorithm)
    from verl_hadw.verl import metrics

    return metrics.pop(step)


def test_a_kill_between_verls_tracker_and_on_save_loses_no_anchor(tmp_path, caplog):
    """Verl's v1 trainer writes global_step_N, removes older checkpoints' weights (max_actor_ckpt_to_keep)
    and names N in its tracker file before it calls on_save, which wrote the anchor: killed in between, the checkpoint
    verl resumes from had no anchor, and with one checkpoint kept none had. The anchor is now staged after each step's
    observation, before verl's save begins; the resume reads it, and step 3 equals the uninterrupted run's."""
    from anchor_run import verl_save

    from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR

    straight, _ = _saving_run(tmp_path / "straight", resume=False)
    expected = [_step(straight, step) for step in (1, 2, 3)]
    process_state.reset()
    ckpt = tmp_path / "killed"
    cfg, callback = _saving_run(ckpt, resume=False)
    for step in (1, 2):
        _step(cfg, step)
        assert (ckpt / SNAPSHOT_DIR / f"step_{step}.json").exists()  # staged before verl's save of the step begins
        verl_save(str(ckpt), step)  # verl's order: the checkpoint, the older ones' weights removed, the tracker
        if step == 2:
            break  # killed here, before on_save
        callback.on_save(trainer=None, global_step=1, checkpoint_dir=str(ckpt / "global_step_1"))
        assert not (ckpt / SNAPSHOT_DIR / "step_1.json").exists()  # in its folder now: the staged copy removed
    shutil.rmtree(ckpt / "global_step_1" / "actor")  # max_actor_ckpt_to_keep=1
    assert not (ckpt / "global_step_2" / STATE_FILE).exists()
    process_state.reset()
    resumed, callback = _saving_run(ckpt, resume=True)
    assert "restored from the anchor staged before that save" in caplog.text and callback.restored_step == 2
    assert _step(resumed, 3) == expected[2]


def test_a_tracker_file_cut_off_while_verl_wrote_it_is_refused_naming_the_newest_whole_checkpoint(tmp_path):
    """verl truncates its tracker file, then writes the step: a kill in between left it empty, and verl_hadw's resume
    (before verl's own) ended in int()'s "invalid literal for int() with base 10: ''"."""
    from verl_hadw.core.errors import PartialCheckpointError

    saved_run(tmp_path, last=3)
    (tmp_path / "global_step_3" / "actor").mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("")
    with pytest.raises(PartialCheckpointError, match=rf"tracker file .* holds b'', not a step: verl's save was cut off"
                                                     rf".*write 3 into it .*{tmp_path / 'global_step_3'}"):
        HadwCheckpointCallback(config(str(tmp_path), resume=True))

"""The anchor file and the resume rules without any framework: ``core.anchor.file_format`` (write, checked read),
``core.anchor.compatibility`` (meaning refused, tuning warned) and ``core.anchor.resume.continue_under``, in the words
of a ``core.terms.Terms`` built here.

Imports only ``verl_hadw.core``, pytest and the standard library, so the environments without verl (TRL, ms-swift) check
the format every adapter shares.
"""

import json
import logging
import os
import re

import pytest

from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.anchor.file_format import (
    MAX_FILE_BYTES,
    PAYLOAD_KEYS,
    STATE_FILE,
    payload,
    read_bounded,
    read_state_file,
    saved_units,
    write_state_file,
)
from verl_hadw.core.anchor.machine import AnchorState
from verl_hadw.core.anchor.resume import continue_under, missing_anchor
from verl_hadw.core.errors import AnchorSaveError, MissingAnchorStateError
from verl_hadw.core.options import AnchorConfig, DgpoConfig, HadwConfig
from verl_hadw.core.terms import Terms


def fw_key(path: str) -> str:
    return "fw_" + path.replace(".", "_")


TERMS = Terms(
    framework="TestFW",
    key=fw_key,
    setting=lambda path, value: f"{fw_key(path)}={value!r}",
    allow_missing_state="set fw_hadw_allow_missing_state=True",
    fresh_anchor="(fw: a fresh anchor)",
    resume_elsewhere="resume from another fw checkpoint",
    new_experiment="another fw output folder",
    anchor_tuning="other fw_hadw_anchor_* values",
)
LOGGER = "verl_hadw.core.anchor"
STEPS = [(5, 16), (9, 16), (12, 16), (4, 16), (11, 16), (13, 16), (7, 16)]


def options(hadw: HadwConfig | None = None, dgpo: DgpoConfig | None = None, norm: bool = True,
            estimator: str | None = "hadw") -> dict:
    return flat_options(hadw or HadwConfig(), dgpo or DgpoConfig(), norm, estimator)


def trained(cfg: HadwConfig, steps) -> AnchorState:
    state = AnchorState(config=cfg.anchor)
    for t, (k, n) in enumerate(steps, start=1):
        state.observe(t, 0, k, n)
    return state


def saved_file(tmp_path, cfg: HadwConfig | None = None, last: int = 3, opts: dict | None = None,
               key: str = "exp") -> str:
    """An anchor file of a run of steps 1..last, in a checkpoint folder of step ``last``; returns its path."""
    cfg = cfg or HadwConfig()
    path = str(tmp_path / f"checkpoint-{last}" / STATE_FILE)
    data = payload(last, key, trained(cfg, STEPS[:last]).to_dict(), opts or options(cfg))
    write_state_file(path, data, TERMS)
    return path


def edit(path: str, fn) -> None:
    with open(path) as f:
        data = json.load(f)
    fn(data)
    with open(path, "w") as f:
        json.dump(data, f)


def setter(value, *keys):
    def fn(d):
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return fn


def dropper(*keys):
    def fn(d):
        for k in keys[:-1]:
            d = d[k]
        d.pop(keys[-1])
    return fn


def rewrite(fn):
    """Replace the file's bytes with ``fn(old bytes)``."""
    def breaker(path):
        with open(path, "rb") as f:
            raw = f.read()
        with open(path, "wb") as f:
            f.write(fn(raw))
    return breaker


# ------------------------------------------------------------------------------------------- round trip
def test_write_then_read_round_trips_and_the_run_continues_bit_for_bit(tmp_path):
    cfg = HadwConfig(anchor=AnchorConfig(eta=3.0, window=4))
    path = saved_file(tmp_path, cfg, last=4)
    assert os.listdir(os.path.dirname(path)) == [STATE_FILE]  # the temp file was renamed, none left
    saved = read_state_file(path, 4, TERMS)
    assert sorted(saved) == ["global_step", "options", "state", "state_key"] and set(saved) <= set(PAYLOAD_KEYS)
    assert saved == payload(4, "exp", trained(cfg, STEPS[:4]).to_dict(), options(cfg))
    assert saved_units(saved) == "accuracy"
    resumed = AnchorState.from_dict(continue_under(saved, cfg, options(cfg), path, TERMS))
    straight = trained(cfg, STEPS)
    for t, (k, n) in enumerate(STEPS[4:], start=5):
        resumed.observe(t, 0, k, n)
    assert resumed.to_dict() == straight.to_dict()


def test_a_rewrite_replaces_the_file_whole(tmp_path):
    path = saved_file(tmp_path, last=3)
    write_state_file(path, payload(3, "renamed", trained(HadwConfig(), STEPS[:3]).to_dict(), options()), TERMS)
    assert read_state_file(path, 3)["state_key"] == "renamed" and os.listdir(os.path.dirname(path)) == [STATE_FILE]


def test_an_options_only_file_of_another_estimator_is_read_and_checked_for_its_step(tmp_path):
    path = str(tmp_path / STATE_FILE)
    write_state_file(path, payload(2, "exp", None, options(estimator="dgpo")), TERMS)
    assert read_state_file(path, 2, TERMS)["state"] is None
    with pytest.raises(ValueError, match="belongs to step 2 but TestFW resumes from step 5"):
        read_state_file(path, 5, TERMS)
    edit(path, setter("hadw", "options", "algorithm.adv_estimator"))  # an HA-DW file must hold a state
    with pytest.raises(ValueError, match="has a 'state' that is not an object"):
        read_state_file(path, 2, TERMS)


def test_a_reward_unit_file_holds_any_finite_anchor_and_an_accuracy_file_does_not(tmp_path):
    cfg = HadwConfig(difficulty_from="reward")
    path = str(tmp_path / STATE_FILE)
    state = AnchorState(config=cfg.anchor)
    state.observe(1, 0, -12.0, 16)  # DAPO's ±1 rewards: a negative mean
    state.observe(2, 0, -4.0, 16)
    write_state_file(path, payload(2, "exp", state.to_dict(), options(cfg)), TERMS)
    saved = read_state_file(path, 2, TERMS)
    assert saved_units(saved) == "reward" and saved["state"]["prior"] == -0.75
    edit(path, setter("accuracy", "options", "algorithm.hadw.difficulty_from"))
    with pytest.raises(ValueError, match=r"invalid fields: .*prior=-0\.75 \(expected a number in \[0, 1\]"):
        read_state_file(path, 2, TERMS)


# --------------------------------------------------------------------------------------- damaged files
DAMAGE = {
    "corrupt": (rewrite(lambda raw: b"{not json at all"), r"is not valid JSON, truncated or corrupt"),
    "truncated": (rewrite(lambda raw: raw[: len(raw) // 2]), r"is not valid JSON, truncated or corrupt"),
    "binary": (rewrite(lambda raw: b"\xff\xfe\x00garbage"), r"is not valid JSON"),
    "empty": (rewrite(lambda raw: b""), r"is empty \(0 bytes\): the save that wrote it was interrupted"),
    "blank": (rewrite(lambda raw: b"  \n"), r"is empty \(3 bytes\)"),
    "list": (rewrite(lambda raw: b"[1, 2, 3]"), r"holds an array where an object is expected"),
    "null": (rewrite(lambda raw: b"null"), r"holds null where an object is expected"),
    "deep": (rewrite(lambda raw: b"[" * 100000 + b"]" * 100000), r"nests arrays or objects deeper"),
    "state-not-object": (lambda p: edit(p, setter([], "state")), r"has a 'state' that is not an object"),
    "schema": (lambda p: edit(p, setter(7, "state", "schema_version")), r"schema_version 7 but this .* version 1 \("),
    "schema-2": (lambda p: edit(p, setter(2, "state", "schema_version")), r"schema_version 2 but this .* version 1 \("),
    "no-schema": (lambda p: edit(p, dropper("state", "schema_version")), r"schema_version None"),
    "missing-top": (lambda p: edit(p, dropper("global_step")), r"lacks the key\(s\) global_step"),
    "missing-options": (lambda p: edit(p, dropper("options")), r"lacks the key\(s\) options"),
    "missing-option": (lambda p: edit(p, dropper("options", "algorithm.reward_funcs")),
                       r"invalid fields: options without algorithm\.reward_funcs \(every file records every option\)"),
    "missing-field": (lambda p: edit(p, dropper("state", "posteriors")), r"lacks the key\(s\) state\.posteriors"),
    "unknown-field": (lambda p: edit(p, setter(1, "state", "extra")), r"unknown key state\.extra"),
    "prior-range": (lambda p: edit(p, setter(1.7, "state", "prior")), r"invalid fields: prior=1\.7"),
    "count-type": (lambda p: edit(p, setter("48", "state", "count")), r"count='48' \(expected an integer >= 1\)"),
    "nan-history": (lambda p: edit(p, setter([0.5, float("nan")], "state", "posteriors")), r"posteriors=\[0\.5, nan"),
    "ragged-history": (lambda p: edit(p, setter([0.5], "state", "accuracies")), r"posteriors and accuracies differ"),
    "correct>count": (lambda p: edit(p, setter(1000.0, "state", "correct")), r"correct=1000\.0 \(expected .*count"),
    "repeated-calls": (lambda p: edit(p, setter([0, 0], "state", "calls")), r"calls=\[0, 0\] \(expected a list of dis"),
    "bool-flag": (lambda p: edit(p, setter("no", "state", "warned_frozen")), r"warned_frozen='no'"),
    "config-type": (lambda p: edit(p, setter(4, "state", "config")), r"config=4 \(expected an object\)"),
    "options-type": (lambda p: edit(p, setter([1], "options")), r"options=\[1\] \(expected an object\)"),
    "step-type": (lambda p: edit(p, setter("3", "global_step")), r"global_step='3'"),
    "other-step": (lambda p: edit(p, setter(2, "global_step")), r"belongs to step 2 \(anchor step 3\) but TestFW "
                                                                 r"resumes from step 3: the file was copied"),
    "other-anchor-step": (lambda p: edit(p, setter(2, "state", "open_step")), r"\(anchor step 2\) but TestFW resumes"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_file_is_refused_with_a_message_that_says_what_is_wrong(tmp_path, damage):
    path = saved_file(tmp_path, last=3)
    assert read_state_file(path, 3, TERMS)["global_step"] == 3  # sound before the damage
    breaker, problem = DAMAGE[damage]
    breaker(path)
    with pytest.raises(ValueError) as info:
        read_state_file(path, 3, TERMS)
    assert re.search(problem, str(info.value)), str(info.value)
    assert info.value.__cause__ is None or damage in ("corrupt", "truncated", "binary")  # no KeyError chain


def test_a_sound_file_of_another_step_is_refused(tmp_path):
    path = saved_file(tmp_path, last=3)
    with pytest.raises(ValueError, match=r"belongs to step 3 \(anchor step 3\) but the trainer resumes from step 4"):
        read_state_file(path, 4)  # without Terms: "the trainer"


def test_read_bounded_refuses_what_is_not_a_small_regular_file(tmp_path):
    with pytest.raises(ValueError, match="is a directory, not a regular file"):
        read_bounded(str(tmp_path))
    with pytest.raises(ValueError, match=r"cannot be read \(No such file"):
        read_bounded(str(tmp_path / "absent.json"))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    with pytest.raises(ValueError, match="is larger than 100 bytes"):
        read_bounded(str(big), limit=100)
    assert read_bounded(str(big), limit=101) == b" " * 101 and MAX_FILE_BYTES == 64 * 1024 * 1024


def test_a_failed_write_names_the_cause_leaves_no_partial_file_and_keeps_the_old_one(tmp_path):
    blocker = tmp_path / "ckpt"
    blocker.write_text("a file where the checkpoint folder belongs")
    data = payload(3, "exp", trained(HadwConfig(), STEPS[:3]).to_dict(), options())
    with pytest.raises(AnchorSaveError) as info:
        write_state_file(str(blocker / STATE_FILE), data, TERMS)
    message = str(info.value)
    assert f"could not write the HA-DW anchor into {blocker}" in message and "exists but is not a directory" in message
    assert "TestFW may already list this checkpoint" in message
    assert "resume from another fw checkpoint" in message and "set fw_hadw_allow_missing_state=True" in message
    target = tmp_path / "good" / STATE_FILE
    target.mkdir(parents=True)  # a directory where the file belongs: the rename fails
    with pytest.raises(AnchorSaveError, match=rf"{re.escape(str(target))} is a directory"):
        write_state_file(str(target), data, TERMS)
    assert os.listdir(target.parent) == [STATE_FILE] and os.path.isdir(target)  # the temp file was removed


def test_missing_anchor_raises_or_warns_in_the_frameworks_words(caplog):
    with pytest.raises(MissingAnchorStateError, match="no anchor here"):
        missing_anchor(HadwConfig(), "no anchor here.", TERMS)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        missing_anchor(HadwConfig(allow_missing_state=True), "no anchor here.", TERMS)
    assert [r.message for r in caplog.records] == ["no anchor here. (fw: a fresh anchor)"]

"""The anchor file and the resume rules without any framework: ``core.anchor.file_format`` (write, checked read),
``core.anchor.compatibility`` (meaning refused, tuning warned) and ``core.anchor.resume.continue_under``, in the words
of a ``core.terms.Terms`` built here.

Imports only ``verl_hadw.core``, pytest and the standard library, so the cells without verl (TRL, ms-swift) check
the format every adapter shares.
"""

import dataclasses
import json
import logging
import os
import re

import pytest

from verl_hadw.core.anchor.compatibility import MEANING, RULES, TUNING, declared_options, flat_options
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
from verl_hadw.core.errors import AnchorSaveError, MissingAnchorStateError, ResumeConflictError
from verl_hadw.core.options import AnchorConfig, DgpoConfig, HadwConfig, declarations
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
    "schema": (lambda p: edit(p, setter(7, "state", "schema_version")), r"schema_version 7 but this .* 1 or 2"),
    "no-schema": (lambda p: edit(p, dropper("state", "schema_version")), r"schema_version None"),
    "missing-top": (lambda p: edit(p, dropper("global_step")), r"lacks the key\(s\) global_step"),
    "missing-options": (lambda p: edit(p, dropper("options")), r"lacks the key\(s\) options"),
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


# ------------------------------------------------------------------------------------------ resume rules
def test_flat_options_record_every_rule_key_as_json():
    opts = options(HadwConfig(lambda_scale=0.7, anchor=AnchorConfig(window=3)), DgpoConfig(temperature=1.5), False)
    assert sorted(opts) == sorted(RULES) == sorted(declared_options())
    assert opts["algorithm.hadw.lambda_scale"] == 0.7 and opts["algorithm.hadw.anchor.window"] == 3
    assert opts["algorithm.dgpo.temperature"] == 1.5 and opts["algorithm.norm_adv_by_std_in_grpo"] is False
    assert opts["algorithm.adv_estimator"] == "hadw" and json.loads(json.dumps(opts)) == opts
    assert all(rule.kind in (MEANING, TUNING) and rule.why for rule in RULES.values())


def resume(tmp_path, saved_cfg: HadwConfig, now_cfg: HadwConfig, saved_opts=None, now_opts=None):
    path = saved_file(tmp_path, saved_cfg, opts=saved_opts)
    saved = read_state_file(path, 3, TERMS)
    return path, continue_under(saved, now_cfg, now_opts or options(now_cfg), path, TERMS)


MEANING_CHANGES = [
    ({}, {"lambda_scale": 1.0}, "fw_hadw_lambda_scale: 1.3 -> 1.0", "fw_hadw_lambda_scale=1.3"),
    ({}, {"difficulty_from": "reward"}, "fw_hadw_difficulty_from: 'accuracy' -> 'reward'",
     "fw_hadw_difficulty_from='accuracy'"),
    ({}, {"base": "dgpo"}, "fw_hadw_base: 'grpo' -> 'dgpo'", "fw_hadw_base='grpo'"),
    ({}, {"anchor": AnchorConfig(mode="moving_average")}, "fw_hadw_anchor_mode: 'kalman' -> 'moving_average'",
     "fw_hadw_anchor_mode='kalman'"),
    ({"anchor": AnchorConfig(mode="fixed")}, {"anchor": AnchorConfig(mode="fixed", fixed_value=0.6)},
     "fw_hadw_anchor_fixed_value: 0.5 -> 0.6", "fw_hadw_anchor_fixed_value=0.5"),
]


@pytest.mark.parametrize("saved_change, now_change, named, set_back", MEANING_CHANGES, ids=lambda x: str(x)[:30])
def test_a_changed_meaning_option_refuses_the_resume(tmp_path, saved_change, now_change, named, set_back):
    saved_cfg = HadwConfig(**saved_change)
    with pytest.raises(ResumeConflictError) as info:
        resume(tmp_path, saved_cfg, dataclasses.replace(saved_cfg, **now_change))
    message = str(info.value)
    assert "cannot resume from" in message and named in message and f"Ways out: set them back ({set_back})" in message
    assert "set fw_hadw_allow_missing_state=True" in message and "another fw output folder" in message


def test_a_changed_estimator_or_std_switch_refuses_the_resume(tmp_path):
    cfg = HadwConfig()
    with pytest.raises(ResumeConflictError, match=r"fw_adv_estimator: 'hadw' -> 'dgpo'"):
        resume(tmp_path / "a", cfg, cfg, now_opts=options(cfg, estimator="dgpo"))
    with pytest.raises(ResumeConflictError, match=r"fw_norm_adv_by_std_in_grpo: True -> False"):
        resume(tmp_path / "b", cfg, cfg, now_opts=options(cfg, norm=False))


def test_a_changed_tuning_option_warns_old_to_new_and_continues_under_the_new_config(tmp_path, caplog):
    saved_cfg = HadwConfig(anchor=AnchorConfig(eta=3.0, window=4))
    now_cfg = HadwConfig(log_metrics=False, anchor=AnchorConfig(eta=8.0, window=1))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        path, state = resume(tmp_path, saved_cfg, now_cfg, now_opts=options(now_cfg, DgpoConfig(temperature=1.0)))
    [warning] = [r.message for r in caplog.records]
    assert warning.startswith(f"HA-DW anchor {path}: was saved under other fw_hadw_anchor_* values")
    assert "fw_hadw_anchor_eta: 3.0 -> 8.0" in warning and "fw_hadw_anchor_window: 4 -> 1" in warning
    assert "fw_hadw_log_metrics: True -> False" in warning
    assert "fw_dgpo_temperature: 2.0 -> 1.0 (not used by either run)" in warning  # a meaning option nobody reads
    assert "lambda_scale" not in warning  # only what changed
    assert state["config"] == dataclasses.asdict(now_cfg.anchor)
    full = trained(saved_cfg, STEPS[:3])
    assert state["posteriors"] == full.posteriors[-2:] and state["accuracies"] == full.accuracies[-2:]  # window + 1
    resumed = AnchorState.from_dict(state)
    # the open step 3 commits under the new config: window 1 leaves < 2 past values, so σ warm-up gives η = 1
    closing = resumed.view().posterior
    assert closing == 12 / 16 != full.view().posterior
    assert resumed.config == now_cfg.anchor and resumed.observe(4, 0, 8, 16).prior == closing  # Eq. 12


def test_an_unchanged_resume_is_silent_and_unknown_keys_warn(tmp_path, caplog):
    cfg = HadwConfig()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        resume(tmp_path / "a", cfg, cfg)
    assert caplog.records == []
    newer = {**options(cfg), "algorithm.hadw.future_option": 1}
    path = saved_file(tmp_path / "b", cfg, opts=newer)
    edit(path, setter("x", "written_by_a_newer_version"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        continue_under(read_state_file(path, 3, TERMS), cfg, options(cfg), path, TERMS)
    [warning] = [r.message for r in caplog.records]
    assert "ignoring key(s) this verl-hadw does not know (algorithm.hadw.future_option, (top level) " \
           "written_by_a_newer_version)" in warning


def test_a_schema_1_file_is_checked_on_its_anchor_options_only(tmp_path, caplog):
    cfg = HadwConfig(anchor=AnchorConfig(window=4))
    path = saved_file(tmp_path, cfg)
    edit(path, lambda d: (d.pop("options"), d["state"].update(schema_version=1)))
    saved = read_state_file(path, 3, TERMS)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        state = continue_under(saved, cfg, options(cfg), path, TERMS)
    [warning] = [r.message for r in caplog.records]
    assert "an older verl-hadw recorded only the anchor options" in warning and "fw_hadw_lambda_scale" in warning
    assert "fw_hadw_anchor_eta" not in warning and state["posteriors"] == saved["state"]["posteriors"]
    moved = HadwConfig(anchor=AnchorConfig(window=4, mode="moving_average"))
    with pytest.raises(ResumeConflictError, match="fw_hadw_anchor_mode: 'kalman' -> 'moving_average'"):
        continue_under(saved, moved, options(moved), path, TERMS)


def _other_value(path: str, value):
    """A valid value of the option at ``path`` that differs from ``value``."""
    meta = declarations()[path].metadata
    kind = meta["kind"]
    if kind == "flag":
        return not value
    if kind == "choice":
        return next(c for c in meta["choices"] if c != value)
    if kind == "text":
        return value + "-2"
    if kind == "integer":
        return value + 1
    if kind == "init":
        return 0.25 if value == "first_batch" else "first_batch"
    if kind == "threshold":
        return 0.5 if value is None else None
    return value / 2 if value else 0.5


@pytest.mark.parametrize("flat_key", sorted(k for k in RULES if k.startswith("algorithm.hadw.")
                                            or k.startswith("algorithm.dgpo.")))
@pytest.mark.parametrize("base", ["grpo", "dgpo"])
def test_every_option_is_refused_or_warned_as_its_rule_says(tmp_path, caplog, flat_key, base):
    now = options(HadwConfig(base=base, success_threshold=0.5))
    saved = dict(now)
    path = flat_key.removeprefix("algorithm.")
    saved[flat_key] = _other_value(path, now[flat_key])
    rule = RULES[flat_key]
    refused = rule.kind == MEANING and (rule.used(saved) or rule.used(now))
    cfg = HadwConfig(base=base)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        if refused:
            with pytest.raises(ResumeConflictError, match=re.escape(f"{fw_key(path)}: {saved[flat_key]!r} -> ")):
                resume(tmp_path, cfg, cfg, saved_opts=saved, now_opts=now)
        else:
            resume(tmp_path, cfg, cfg, saved_opts=saved, now_opts=now)
    warned = [r.message for r in caplog.records if f"{fw_key(path)}: {saved[flat_key]!r} -> " in r.message]
    assert len(warned) == (0 if refused else 1)
    if flat_key in ("algorithm.hadw.lambda_scale", "algorithm.hadw.base", "algorithm.hadw.anchor.mode"):
        assert refused  # the rule table's anchors: meaning, always read
    if flat_key in ("algorithm.hadw.anchor.eta", "algorithm.hadw.anchor.window", "algorithm.hadw.state_key"):
        assert not refused  # tuning: the freeze warning's advice must be able to resume

"""The resume rules with no framework (only ``verl_hadw.core``): every option a meaning (refused) or a tuning (warned
old -> new) change, the estimator and std switch, a newer version's keys. The files: test_core_file_format.py's."""

import dataclasses
import json
import logging
import re

import pytest
from test_core_file_format import LOGGER, STEPS, TERMS, edit, fw_key, options, saved_file, setter, trained

from verl_hadw.core.anchor.compatibility import MEANING, RULES, TUNING, declared_options
from verl_hadw.core.anchor.file_format import read_state_file
from verl_hadw.core.anchor.machine import AnchorState
from verl_hadw.core.anchor.resume import continue_under
from verl_hadw.core.errors import ResumeConflictError
from verl_hadw.core.options import AnchorConfig, DgpoConfig, HadwConfig, declarations


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

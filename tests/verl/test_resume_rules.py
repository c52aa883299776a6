"""Resume compatibility rules (one table): every option classified; meaning changes refused, tuning warned; the
same decisions in the v1 callback and the legacy trainer; files from a newer version."""

import dataclasses
import json
import logging
from pathlib import Path

import pytest
from anchor_run import batch, config, run
from omegaconf import OmegaConf
from repo_paths import ROOT
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.anchor.compatibility import MEANING, RULES, TUNING, declared_options, rules_table
from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import ResumeConflictError
from verl_hadw.core.options import AnchorConfig, DgpoConfig, HadwConfig
from verl_hadw.verl import process_state
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR
from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback
from verl_hadw.verl.config.run_options import parse_run

RESUME_PAGE = ROOT / "docs" / "reliability.md"  # "Resuming under changed options"


def _user_keys(cls, prefix):
    keys = []
    for f in dataclasses.fields(cls):
        if "kind" not in f.metadata:
            continue
        if f.metadata["kind"] == "section":
            keys += _user_keys(f.default_factory, f"{prefix}{f.name}.")
        else:
            keys.append(prefix + f.name)
    return keys


def test_every_declared_option_has_exactly_one_rule_and_the_docs_show_the_table():
    declared = _user_keys(HadwConfig, "algorithm.hadw.") + _user_keys(DgpoConfig, "algorithm.dgpo.")
    assert len(declared) == len(_user_keys(HadwConfig, "")) + len(_user_keys(DgpoConfig, ""))
    declared.append("algorithm.norm_adv_by_std_in_grpo")  # verl's key, read by HA-DW's GRPO base
    declared.append("algorithm.adv_estimator")  # verl's key: the method itself
    declared += ["algorithm.accuracy_reward_index", "algorithm.reward_weights", "algorithm.reward_funcs"]  # TRL, swift
    assert sorted(RULES) == sorted(declared) == sorted(declared_options()), "classify every option in RULES"
    assert all(rule.kind in (MEANING, TUNING) and rule.why for rule in RULES.values())
    # the examples, and the anchor's tuning knobs the freeze warning points to
    for key in ("hadw.difficulty_from", "hadw.base", "hadw.lambda_scale"):
        assert RULES[f"algorithm.{key}"].kind == MEANING
    for key in ("eta", "eta_min", "window", "sigma_source"):
        assert RULES[f"algorithm.hadw.anchor.{key}"].kind == TUNING
    page = RESUME_PAGE.read_text(encoding="utf-8")
    block = page.split("<!-- resume-rules:begin -->\n", 1)[1].split("<!-- resume-rules:end -->", 1)[0]
    assert block.strip() == rules_table(), f"{RESUME_PAGE} resume table is stale: paste compatibility.rules_table()"


def test_options_of_records_every_rule_key_with_the_parsed_value():
    options = parse_run({"norm_adv_by_std_in_grpo": False, "hadw": {"lambda_scale": 0.7, "anchor": {"window": 3}},
                          "dgpo": {"temperature": 1.5}}).flat()
    assert sorted(options) == sorted(RULES)
    assert options["algorithm.hadw.lambda_scale"] == 0.7 and options["algorithm.hadw.anchor.window"] == 3
    assert options["algorithm.dgpo.temperature"] == 1.5 and options["algorithm.norm_adv_by_std_in_grpo"] is False
    json.dumps(options)  # what the file records must be JSON


# ------------------------------------------------------------------------------------ the two trainers
KEY = "rules/exp"


def v1_resume(tmp_path, change: dict, base: dict | None = None):
    """Save steps 1-3 with the v1 callback under ``base``, then build a resumed callback under ``base + change``."""
    run(str(tmp_path), 1, 3, save=True, resume=False, extra_hadw=base)
    process_state.reset()
    cfg = OmegaConf.merge(config(str(tmp_path), resume=True, extra_hadw=base), {"algorithm": change})
    return HadwCheckpointCallback(cfg)


def legacy_cfg(ckpt, hadw: dict, extra: dict | None = None):
    cfg = OmegaConf.create({
        "algorithm": {"adv_estimator": "hadw", "norm_adv_by_std_in_grpo": True,
                      "hadw": {"state_key": KEY, "anchor": {"eta": 3.0, "window": 4}, **hadw}},
        "trainer": {"use_v1": False, "default_local_dir": str(ckpt), "save_freq": 2, "resume_mode": "auto",
                    "resume_from_path": None},
    })
    return OmegaConf.merge(cfg, {"algorithm": extra or {}})


def legacy_steps(cfg, first, last):
    for step in range(first, last + 1):
        SkipManager.set_step(step)
        compute_advantage(batch(step), cfg.algorithm.adv_estimator, config=cfg.algorithm)
    folder = Path(cfg.trainer.default_local_dir) / f"global_step_{last}"
    (folder / "actor").mkdir(parents=True, exist_ok=True)
    (folder / "data.pt").write_bytes(b"x")
    (folder.parent / "latest_checkpointed_iteration.txt").write_text(str(last))


def legacy_resume(tmp_path, change: dict, base: dict | None = None):
    legacy_steps(legacy_cfg(tmp_path, base or {}), 1, 2)
    process_state.reset()
    legacy_steps(legacy_cfg(tmp_path, base or {}, change), 3, 3)


MEANING_CHANGES = [
    ({"hadw": {"difficulty_from": "reward"}}, None, "algorithm.hadw.difficulty_from: 'accuracy' -> 'reward'"),
    ({"hadw": {"base": "dgpo"}}, None, "algorithm.hadw.base: 'grpo' -> 'dgpo'"),
    ({"hadw": {"lambda_scale": 1.0}}, None, "algorithm.hadw.lambda_scale: 1.3 -> 1.0"),
    ({"hadw": {"anchor": {"mode": "moving_average"}}}, None, "algorithm.hadw.anchor.mode: 'kalman' -> 'moving_"),
    ({"dgpo": {"temperature": 1.0}}, {"base": "dgpo"}, "algorithm.dgpo.temperature: 2.0 -> 1.0"),
    ({"hadw": {"anchor": {"include_current": True}}}, {"anchor": {"mode": "moving_average"}},
     "algorithm.hadw.anchor.include_current: False -> True"),
    ({"norm_adv_by_std_in_grpo": False}, None, "algorithm.norm_adv_by_std_in_grpo: True -> False"),
]


@pytest.mark.parametrize("trainer", ["v1", "legacy"])
@pytest.mark.parametrize("change, base, named", MEANING_CHANGES, ids=lambda x: str(x)[:40])
def test_a_meaning_change_refuses_the_resume_in_both_trainers(tmp_path, trainer, change, base, named):
    with pytest.raises(ResumeConflictError) as info:
        (v1_resume if trainer == "v1" else legacy_resume)(tmp_path, change, base)
    message = str(info.value)
    assert named in message and "cannot resume from" in message
    key = named.split(":")[0]
    plus = "" if key == "algorithm.norm_adv_by_std_in_grpo" else "+"  # verl's own key: Hydra refuses "+" on it
    assert f"Ways out: set them back ({plus}{key}=" in message
    assert "allow_missing_state=true" in message and "trainer.resume_mode=disable" in message


@pytest.mark.parametrize("trainer", ["v1", "legacy"])
def test_a_tuning_change_continues_and_warns_old_to_new_in_both_trainers(tmp_path, caplog, trainer):
    change = {"hadw": {"anchor": {"eta": 8.0}, "log_metrics": False}, "dgpo": {"temperature": 1.0}}  # dgpo unused
    with caplog.at_level(logging.WARNING, logger="verl_hadw.core.anchor"):
        (v1_resume if trainer == "v1" else legacy_resume)(tmp_path, change)
    [warning] = [r.message for r in caplog.records if "continues under this run's options" in r.message]
    assert "algorithm.hadw.anchor.eta: 3.0 -> 8.0" in warning and "algorithm.hadw.log_metrics: True -> False" in warning
    assert "algorithm.dgpo.temperature: 2.0 -> 1.0 (not used by either run)" in warning
    assert "lambda_scale" not in warning  # only what changed


def test_the_way_out_works_set_back_or_a_fresh_anchor(tmp_path):
    with pytest.raises(ResumeConflictError):
        v1_resume(tmp_path, {"hadw": {"difficulty_from": "reward"}})
    assert HadwCheckpointCallback(config(str(tmp_path), resume=True)).restored_step == 3  # set back
    process_state.reset()
    (tmp_path / "global_step_3" / STATE_FILE).rename(tmp_path / "moved.json")
    cfg = config(str(tmp_path), resume=True, extra_hadw={"difficulty_from": "reward", "allow_missing_state": True})
    assert HadwCheckpointCallback(cfg).restored_step is None  # a fresh anchor under the new meaning


def _newer(data):
    """What a newer verl-hadw of the same schema might add: an option, an anchor option, a top-level key."""
    data["options"]["algorithm.hadw.future_option"] = 1
    data["state"]["config"]["future_anchor_option"] = "x"
    data["written_by"] = "verl-hadw 9.0"


@pytest.mark.parametrize("trainer", ["v1", "legacy"])
def test_a_newer_versions_keys_are_read_alike_by_both_trainers(tmp_path, caplog, trainer):
    if trainer == "v1":
        run(str(tmp_path), 1, 3, save=True, resume=False)
        path, resume = tmp_path / "global_step_3" / STATE_FILE, lambda: HadwCheckpointCallback(
            config(str(tmp_path), resume=True))
    else:
        legacy_steps(legacy_cfg(tmp_path, {}), 1, 2)
        path, resume = tmp_path / SNAPSHOT_DIR / "step_2.json", lambda: legacy_steps(legacy_cfg(tmp_path, {}), 3, 3)
    data = json.loads(path.read_text())
    saved_state = dict(data["state"])
    _newer(data)
    path.write_text(json.dumps(data))
    process_state.reset()
    with caplog.at_level(logging.WARNING, logger="verl_hadw.core.anchor"):
        resume()
    expected = "ignoring key(s) this verl-hadw does not know (algorithm.hadw.future_option, (top level) written_by)"
    assert any(expected in r.message for r in caplog.records), [r.message for r in caplog.records]
    state = anchor_client.state_dict(parse_run({"hadw": {"state_key": KEY if trainer == "legacy" else "proj/exp",
                                                          "anchor": {"eta": 3.0, "window": 4}}}).hadw)
    assert state["committed_steps"] >= saved_state["committed_steps"]  # restored, not fresh
    assert state["config"] == dataclasses.asdict(AnchorConfig(eta=3.0, window=4))  # unknown anchor key dropped


@pytest.mark.parametrize("edit, problem", [
    (lambda d: d["state"].update(schema_version=2), "schema_version 2 but this verl-hadw reads version 1 "),
    (lambda d: d.pop("options"), r"lacks the key(s) options"),
    (lambda d: d.update(options=[1]), "options=[1] (expected an object)"),
    (lambda d: d["options"].pop("algorithm.hadw.lambda_scale"), "options without algorithm.hadw.lambda_scale"),
    (lambda d: d["state"].update(prior=-0.2), "prior=-0.2 (expected a number in [0, 1]"),
])
def test_damaged_or_unreadable_files_still_fail(tmp_path, edit, problem):
    from verl_hadw.core.errors import AnchorFileError

    run(str(tmp_path), 1, 3, save=True, resume=False)
    path = tmp_path / "global_step_3" / STATE_FILE
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    process_state.reset()
    with pytest.raises(AnchorFileError) as info:
        HadwCheckpointCallback(config(str(tmp_path), resume=True))
    assert problem in str(info.value)


def test_reward_units_accept_any_finite_value_but_not_nan(tmp_path):
    from verl_hadw.core.errors import AnchorFileError

    reward = {"difficulty_from": "reward"}
    run(str(tmp_path), 1, 3, save=True, resume=False, extra_hadw=reward)
    path = tmp_path / "global_step_3" / STATE_FILE
    data = json.loads(path.read_text())
    data["state"].update(prior=-0.75, correct=-12.0, posteriors=[-0.5] * len(data["state"]["posteriors"]))
    path.write_text(json.dumps(data))
    process_state.reset()
    assert HadwCheckpointCallback(config(str(tmp_path), resume=True, extra_hadw=reward)).restored_step == 3
    data["state"]["prior"] = float("nan")
    path.write_text(json.dumps(data))
    process_state.reset()
    with pytest.raises(AnchorFileError, match=r"prior=nan \(expected a finite number"):
        HadwCheckpointCallback(config(str(tmp_path), resume=True, extra_hadw=reward))


# ------------------------------------------------------------------------------------ switching estimator
def saved_under(tmp_path, estimator: str):
    """Steps 1-3 with the v1 callback under ``estimator``, saved at step 3."""
    cfg = OmegaConf.merge(config(str(tmp_path), resume=False), {"algorithm": {"adv_estimator": estimator}})
    callback = HadwCheckpointCallback(cfg)
    for step in (1, 2, 3):
        SkipManager.set_step(step)
        compute_advantage(batch(step), estimator, config=cfg.algorithm)
    callback.on_save(trainer=None, global_step=3, checkpoint_dir=str(tmp_path / "global_step_3"))
    (tmp_path / "global_step_3" / "actor").mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    process_state.reset()


@pytest.mark.parametrize("before, after", [("hadw", "dgpo"), ("dgpo", "hadw"), ("grpo", "hadw"), ("hadw", "grpo")])
def test_switching_estimator_on_resume_is_refused_saying_so(tmp_path, before, after):
    saved_under(tmp_path, before)
    resumed = OmegaConf.merge(config(str(tmp_path), resume=True), {"algorithm": {"adv_estimator": after}})
    with pytest.raises(ResumeConflictError) as info:
        HadwCheckpointCallback(resumed)
    message = str(info.value)
    assert f"algorithm.adv_estimator: {before!r} -> {after!r} (the method" in message, message
    assert f"set them back (algorithm.adv_estimator={before})" in message  # verl's own key: no "+"
    assert "was not written with" not in message and "allow_missing_state=true" in message


@pytest.mark.parametrize("before, after", [("hadw", "dgpo"), ("dgpo", "hadw")])
def test_switching_estimator_on_resume_is_refused_under_the_legacy_trainer_too(tmp_path, before, after):
    """No checkpoint hook there: dgpo writes an options-only snapshot after each step where HA-DW writes its anchor,
    and its first call of a resumed run checks the snapshot of the checkpoint verl loaded."""
    legacy_steps(legacy_cfg(tmp_path, {}, {"adv_estimator": before}), 1, 2)
    if before == "dgpo":
        saved = json.loads((tmp_path / SNAPSHOT_DIR / "step_2.json").read_text())
        assert saved["state"] is None and saved["options"]["algorithm.adv_estimator"] == "dgpo"
        assert sorted(p.name for p in (tmp_path / SNAPSHOT_DIR).iterdir()) == ["step_2.json"]  # step 1: pruned
    process_state.reset()
    with pytest.raises(ResumeConflictError) as info:
        legacy_steps(legacy_cfg(tmp_path, {}, {"adv_estimator": after}), 3, 3)
    message = str(info.value)
    assert f"algorithm.adv_estimator: {before!r} -> {after!r} (the method" in message, message
    assert "was written without it" not in message and "no anchor snapshot" not in message
    process_state.reset()
    legacy_steps(legacy_cfg(tmp_path, {}, {"adv_estimator": before}), 3, 4)  # the same estimator goes on


def test_an_hadw_checkpoint_resumed_under_dgpo_without_the_callback_is_refused_at_the_first_call(tmp_path):
    """v1 trainer, the callback dropped from the resumed run's config: dgpo's first call reads the checkpoint's
    anchor file and refuses before any update, instead of dropping the anchor without a word."""
    saved_under(tmp_path, "hadw")
    resumed = OmegaConf.merge(config(str(tmp_path), resume=True), {"algorithm": {"adv_estimator": "dgpo"}})
    SkipManager.set_step(4)
    with pytest.raises(ResumeConflictError, match=r"algorithm.adv_estimator: 'hadw' -> 'dgpo' \(the method"):
        compute_advantage(batch(4), "dgpo", config=resumed.algorithm)
    process_state.reset()
    saved_under(tmp_path / "dgpo", "dgpo")  # a dgpo checkpoint resumed under dgpo without the callback: goes on
    resumed = OmegaConf.merge(config(str(tmp_path / "dgpo"), resume=True), {"algorithm": {"adv_estimator": "dgpo"}})
    SkipManager.set_step(4)
    compute_advantage(batch(4), "dgpo", config=resumed.algorithm)


def test_the_same_estimator_resumes_and_dgpo_records_its_options(tmp_path):
    saved_under(tmp_path, "dgpo")
    saved = json.loads((tmp_path / "global_step_3" / STATE_FILE).read_text())
    assert saved["state"] is None and saved["options"]["algorithm.adv_estimator"] == "dgpo"
    resumed = OmegaConf.merge(config(str(tmp_path), resume=True), {"algorithm": {"adv_estimator": "dgpo"}})
    HadwCheckpointCallback(resumed)  # no error: same estimator
    # the way out for dgpo -> hadw: a fresh anchor, on purpose
    (tmp_path / "global_step_3" / STATE_FILE).unlink()
    cfg = OmegaConf.merge(config(str(tmp_path), resume=True, extra_hadw={"allow_missing_state": True}))
    assert HadwCheckpointCallback(cfg).restored_step is None

"""scripts/gpu_smoke.sh and its verdict (``verl-hadw smoke-check``, ``verl_hadw.repro.smoke``).

The script itself runs end to end on CPU (``--cpu``: the toy config, verl's real main_ppo, a save and a resume) and
its GPU mode is composed and validated with verl's own config checks (``--dry-run``). Each check is then made to
fail on crafted logs and checkpoint folders built from a real ``AnchorState``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from launches import DEMO_RESUME_FROM
from omegaconf import OmegaConf
from repo_paths import ROOT

from verl_hadw.cli import main as cli_main
from verl_hadw.core.anchor import AnchorState
from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.options import AnchorConfig
from verl_hadw.repro import smoke as S
from verl_hadw.repro.compose import compose_run
from verl_hadw.toy.launch import demo_overrides, parse_steps

SCRIPT = ROOT / "scripts" / "gpu_smoke.sh"


def _env(tmp_path, **extra):
    env = dict(os.environ, VERL_HADW_PYTHON=sys.executable, VERL_HADW_SMOKE_DIR=str(tmp_path / "smoke"), **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("VERL_HADW_CONFIGS", None)
    return env


# ------------------------------------------------------------------------------------- the script on CPU
@pytest.mark.slow
def test_script_on_cpu_toy_run_passes_every_check(smoke_run):
    """``bash scripts/gpu_smoke.sh demo --cpu trainer.v1.trainer_mode=separate_async +algorithm.hadw.base=dgpo ...``
    (the ``smoke_run`` launch, tests/helpers/launches.py): two real main_ppo runs (2 steps, saved; resumed to 3),
    then the verdict: every check passes, the anchor's (its file in each checkpoint, step 3's prior continuing the
    anchor saved at step 2) and DGPO's metrics included. On the demo's 15 + 3 steps: the next test."""
    run = smoke_run
    assert run.code == 0, run.output[-8000:]
    verdict = (run.smoke / "verdict.txt").read_text()
    assert verdict.splitlines()[-1].startswith("smoke verdict: PASS")
    status = {line.split()[1]: line.split()[0] for line in verdict.splitlines()[:-1]}
    assert status == {"steps": "PASS", "metrics": "PASS", "reward": "PASS", "truncation": "PASS",
                      "checkpoint": "PASS", "anchor": "PASS", "stop": "PASS"}, verdict
    assert "resumed at 3..3" in verdict and "step 3 prior" in verdict and "turns end with <|im_end|>" in verdict
    assert "dgpo/valid_groups" in (run.smoke / "train.log").read_text()  # HA-DW's base: DGPO's metrics logged
    for step in (2, 3):  # the anchor (and the options it was trained with) in each checkpoint
        saved = json.loads((run.smoke / "checkpoints" / f"global_step_{step}" / STATE_FILE).read_text())
        assert saved["state"]["open_step"] == step and saved["options"]["algorithm.hadw.base"] == "dgpo"


@pytest.mark.slow
def test_the_verdict_passes_an_hadw_run_and_its_resume(demo_run, demo_resumed_run, tmp_path, monkeypatch, capsys):
    """``verl-hadw smoke-check`` (the script's verdict) on the demo's first 15 steps, as a phase that ended with its
    save at step 15, and the demo resumed from that checkpoint: every check passes, the anchor's two among them
    (the anchor file in each checkpoint, and step 16's prior continuing the anchor saved at step 15)."""
    demo, resumed = demo_run, demo_resumed_run
    lines = demo.log.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if DEMO_RESUME_FROM + 1 in parse_steps(line))
    first = "".join(lines[:cut])  # verl's log up to its step-15 save
    assert sorted(parse_steps(first)) == list(range(1, DEMO_RESUME_FROM + 1))
    (tmp_path / "first.log").write_text(first)
    (tmp_path / "resume.log").write_text(resumed.log)
    monkeypatch.setenv("VERL_HADW_CONFIGS", str(ROOT / "configs" / "cpu"))
    monkeypatch.setenv("VERL_HADW_ASSETS", str(demo.out.parent / "assets"))  # the launches' toy assets
    config = tmp_path / "config.yaml"
    assert cli_main(["configs", "--show", "demo", *demo_overrides(str(demo.out))]) == 0
    config.write_text(capsys.readouterr().out)
    # the demo cuts responses at 4 tokens by design (one-token answers; the smoke script's CPU mode sets 192)
    code = cli_main(["smoke-check", "--config", str(config), "--log", str(tmp_path / "first.log"),
                     "--resume-log", str(tmp_path / "resume.log"), "--max-truncated", "1"])
    verdict = capsys.readouterr().out
    assert code == 0, verdict
    status = {line.split()[1]: line.split()[0] for line in verdict.splitlines()[:-1]}
    assert status == {"steps": "PASS", "metrics": "PASS", "reward": "PASS", "truncation": "PASS",
                      "checkpoint": "PASS", "anchor": "PASS", "stop": "PASS"}, verdict
    assert "resumed at 16..18" in verdict and "step 16 prior" in verdict


@pytest.mark.slow
def test_gpu_mode_overrides_pass_verls_config_checks(tmp_path):
    """--dry-run: the smoke overrides (and the stop-token fix the verdict prints) pass verl's checks, deep ones
    included. One run: the overrides are the same for every run, and every run passes the checks without them
    (tests/repro/test_repro_configs.py)."""
    run = "hadw_t1_qwen3_4b_grpo_hadw"
    fix = f"{S.STOP_FIX_KEY}=/models/fixed_generation_config"
    proc = subprocess.run(["bash", str(SCRIPT), run, "--dry-run", fix], cwd=tmp_path, capture_output=True, text=True,
                          env=_env(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{run}: ok (verl validate_config" in proc.stdout
    cfg = OmegaConf.load(tmp_path / "smoke" / "config.yaml")
    assert cfg.actor_rollout_ref.rollout.engine_kwargs.vllm.generation_config == "/models/fixed_generation_config"
    assert cfg.data.train_batch_size == 8 and cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 8
    assert cfg.actor_rollout_ref.rollout.n == 4 and cfg.trainer.save_freq == 4 and cfg.trainer.test_freq == -1
    assert cfg.trainer.default_local_dir == str(tmp_path / "smoke" / "checkpoints")
    assert cfg.data.max_response_length == compose_run(run).data.max_response_length  # truncation at the real length
    assert "trainer.total_training_steps=4" in proc.stdout and "trainer.total_training_steps=6" in proc.stdout


@pytest.mark.parametrize("mode, mini_batch", [(None, True), ("trainer.v1.trainer_mode='separate_async'", False),
                                              ("++trainer.v1.trainer_mode=separate_async", False)])
def test_cpu_separate_async_leaves_the_mini_batches_to_the_launcher(tmp_path, mode, mini_batch):
    """--cpu sets one mini-batch for the whole step, except in separate_async, where verl wants the step as
    ``parameter_sync_step`` mini-batches and the demo launcher sets them (verl_hadw.toy.modes): a step-wide one
    would win over the launcher's and stop the run at verl's assert (the smoke launch trains that mode so)."""
    proc = subprocess.run(["bash", str(SCRIPT), "demo", "--cpu", "--dry-run", *([mode] if mode else [])],
                          cwd=tmp_path, capture_output=True, text=True, env=_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    phases = [line for line in proc.stdout.splitlines() if line.startswith("# phase")]
    assert len(phases) == 2
    assert all(("actor_rollout_ref.actor.ppo_mini_batch_size=8" in line) == mini_batch for line in phases), phases


def test_script_rejects_bad_usage(tmp_path):
    env = _env(tmp_path, SMOKE_STEPS="4", SMOKE_RESUME_STEPS="4")
    proc = subprocess.run(["bash", str(SCRIPT), "demo", "--cpu"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "SMOKE_RESUME_STEPS=4 must exceed SMOKE_STEPS=4" in proc.stderr
    proc = subprocess.run(
        ["bash", str(SCRIPT), "hadw_t1_qwen3_4b_grpo", "--cpu"], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert proc.returncode == 2 and "--cpu runs the toy config 'demo'" in proc.stderr


# ----------------------------------------------------------------------------------- crafted smoke runs
def _line(step: int, values: dict) -> str:
    return " - ".join([f"step:{step}"] + [f"{k}:{v!r}" for k, v in values.items()])


def craft(tmp_path, saved=4, last=6, mode="kalman", fresh_resume=False):
    """A passing smoke run: logs and checkpoint folders as verl + HadwCheckpointCallback write them."""
    rng = random.Random(0)
    state = AnchorState(AnchorConfig(mode=mode, eta=4.0))
    logs = {"first": [], "resumed": []}
    ckpt = tmp_path / "checkpoints"
    for step in range(1, last + 1):
        if step == saved + 1 and fresh_resume:
            state = AnchorState(AnchorConfig(mode=mode, eta=4.0))
        y = rng.randint(4, 28) / 32
        view = state.observe(step, 0, y * 32, 32)
        values = {"critic/score/mean": y, "critic/score/max": 1.0, "response_length/mean": 812.5,
                  "response_length/clip_ratio": 0.03125, "hadw/anchor_prior": view.prior,
                  "hadw/anchor_posterior": view.posterior, "hadw/batch_acc": view.batch_acc}
        values.update({m: 1.0 for m in S.HADW_METRICS if m not in values})
        logs["first" if step <= saved else "resumed"].append(f"(TaskRunner pid=42) {_line(step, values)}")
        if step in (saved, last):
            (ckpt / f"global_step_{step}").mkdir(parents=True)
            payload = {"global_step": step, "state_key": "hadw/x", "state": state.to_dict()}
            (ckpt / f"global_step_{step}" / STATE_FILE).write_text(json.dumps(payload))
    model = tmp_path / "model"
    write_model(model, gen_eos=[151643, 151645])
    config = {"algorithm": {"adv_estimator": "hadw", "hadw": {"base": "grpo"}}, "data": {"max_response_length": 4096},
              "trainer": {"default_local_dir": str(ckpt)}, "actor_rollout_ref": {"model": {"path": str(model)}}}
    return config, "\n".join(logs["first"]), "\n".join(logs["resumed"])


def write_model(path: Path, gen_eos, eos_token="<|endoftext|>"):
    """Tokenizer files shaped like a Qwen3 model directory (ChatML template, no weights)."""
    path.mkdir(parents=True, exist_ok=True)
    tok = {
        "eos_token": eos_token,
        "chat_template": "{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>'}}",
        "added_tokens_decoder": {
            "151643": {"content": "<|endoftext|>"},
            "151644": {"content": "<|im_start|>"},
            "151645": {"content": "<|im_end|>"},
        },
    }
    (path / "tokenizer_config.json").write_text(json.dumps(tok))
    (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 151643, "eos_token_id": gen_eos}))


def statuses(checks):
    return {c.name: c.status for c in checks}


def test_crafted_run_passes(tmp_path):
    checks = S.run_checks(*craft(tmp_path))
    assert set(statuses(checks).values()) == {"PASS"}, S.render(checks)
    assert len(checks) == 7 and S.render(checks).endswith("smoke verdict: PASS (7 checks, 0 warning(s))")


@pytest.mark.parametrize("mode", ["moving_average", "fixed"])
def test_anchor_resume_check_follows_the_anchor_mode(tmp_path, mode):
    config, first, resumed = craft(tmp_path, mode=mode)
    assert statuses(S.run_checks(config, first, resumed))["anchor resume"] == "PASS"


def test_truncated_responses_fail(tmp_path):
    config, first, resumed = craft(tmp_path)
    checks = S.run_checks(config, first.replace("clip_ratio:0.03125", "clip_ratio:0.875"), resumed)
    assert statuses(checks)["truncation"] == "FAIL"
    assert "more than 25%" in S.render(checks) and "smoke verdict: FAIL (truncation)" in S.render(checks)
    assert statuses(S.run_checks(config, first, resumed, max_truncated=0.01))["truncation"] == "FAIL"


def test_zero_reward_everywhere_fails(tmp_path):
    config, first, resumed = craft(tmp_path)
    checks = S.run_checks(
        config, first.replace("score/max:1.0", "score/max:0.0"), resumed.replace("score/max:1.0", "score/max:0.0")
    )
    assert statuses(checks)["reward"] == "FAIL" and "no response was ever rewarded" in S.render(checks)
    # DAPO's signed rewards: all wrong is -1 (+ penalty) everywhere, also never above 0
    checks = S.run_checks(
        config, first.replace("score/max:1.0", "score/max:-1.0"), resumed.replace("score/max:1.0", "score/max:-0.5")
    )
    assert statuses(checks)["reward"] == "FAIL"


def test_missing_metric_fails(tmp_path):
    config, first, resumed = craft(tmp_path)
    lines = resumed.splitlines()
    lines[1] = " - ".join(part for part in lines[1].split(" - ") if not part.startswith("hadw/phi_mean"))
    checks = S.run_checks(config, first, "\n".join(lines))
    assert statuses(checks)["metrics"] == "FAIL" and "e.g. step 6: hadw/phi_mean" in S.render(checks)
    config["algorithm"]["hadw"]["base"] = "dgpo"  # HA-DW over DGPO must also log dgpo/*
    assert "dgpo/valid_groups" in S.render(S.run_checks(config, first, resumed))


def test_missing_anchor_file_fails(tmp_path):
    config, first, resumed = craft(tmp_path)
    (tmp_path / "checkpoints" / "global_step_6" / STATE_FILE).unlink()
    checks = S.run_checks(config, first, resumed)
    assert statuses(checks)["checkpoint"] == "FAIL" and f"global_step_6 hold no {STATE_FILE}" in S.render(
        checks
    )
    config["algorithm"]["adv_estimator"] = "grpo"  # no anchor expected without HA-DW
    assert statuses(S.run_checks(config, first, resumed))["checkpoint"] == "PASS"


def test_resume_that_restarts_the_anchor_fails(tmp_path):
    checks = S.run_checks(*craft(tmp_path, fresh_resume=True))
    assert statuses(checks)["anchor resume"] == "FAIL" and "the resume started a new anchor" in S.render(checks)


def test_anchor_file_from_another_state_fails(tmp_path):
    config, first, resumed = craft(tmp_path)
    path = tmp_path / "checkpoints" / "global_step_4" / STATE_FILE
    payload = json.loads(path.read_text())
    payload["state"]["correct"] += 3.0  # another y_4, hence another posterior than the log's
    path.write_text(json.dumps(payload))
    checks = S.run_checks(config, first, resumed)
    assert statuses(checks)["anchor resume"] == "FAIL" and "is not the anchor the run ended with" in S.render(checks)


def test_resume_that_started_over_fails(tmp_path):
    config, first, _ = craft(tmp_path)
    checks = S.run_checks(config, first, first)  # the "resume" trained steps 1..4 again
    assert statuses(checks)["steps"] == "FAIL" and "started at step 1, not 5" in S.render(checks)
    assert statuses(S.run_checks(config, first, ""))["steps"] == "FAIL"


def test_stop_tokens_qwen_base_without_im_end_fails_and_writes_the_fix(tmp_path):
    model = tmp_path / "qwen_base"
    write_model(model, gen_eos=151643)
    check = S.check_stop_tokens(str(model), fix_dir=str(tmp_path / "fix"))
    assert check.status == "FAIL" and "<|im_end|> (id 151645)" in check.detail and "[151643]" in check.detail
    assert f"{S.STOP_FIX_KEY}={tmp_path / 'fix'}" in check.detail
    fixed = json.loads((tmp_path / "fix" / "generation_config.json").read_text())
    assert fixed == {"bos_token_id": 151643, "eos_token_id": [151643, 151645]}
    write_model(model, gen_eos=151643, eos_token="<|im_end|>")  # the tokenizer's eos covers the turn end
    assert S.check_stop_tokens(str(model)).status == "PASS"
    assert S.check_stop_tokens(str(tmp_path / "nowhere")).status == "WARN"


def test_stop_tokens_on_the_toy_models_transformers5_files(tmp_path):
    """The toy assets as transformers 5 writes them (special-token ids only in tokenizer.json, chat_template.jinja)."""
    from verl_hadw.toy.assets import build

    model = Path(build(str(tmp_path / "assets"))["model"])
    check = S.check_stop_tokens(str(model))
    assert check.status == "PASS" and "turns end with <|im_end|>; generation stops at ids [2]" in check.detail
    for name, key, value in (
        ("generation_config.json", "eos_token_id", 0),
        ("tokenizer_config.json", "eos_token", "<|endoftext|>"),
    ):
        data = json.loads((model / name).read_text())
        (model / name).write_text(json.dumps({**data, key: value}))
    check = S.check_stop_tokens(str(model))
    assert check.status == "FAIL" and "<|im_end|> (id 2) but generation stops only at ids [0]" in check.detail


def test_cli_exit_codes(tmp_path, capsys):
    config, first, resumed = craft(tmp_path)
    OmegaConf.save(OmegaConf.create(config), tmp_path / "config.yaml")
    (tmp_path / "train.log").write_text(first)
    (tmp_path / "resume.log").write_text(resumed)
    args = ["smoke-check", "--config", str(tmp_path / "config.yaml"), "--log", str(tmp_path / "train.log"),
            "--resume-log", str(tmp_path / "resume.log")]
    assert cli_main(args) == 0 and "smoke verdict: PASS" in capsys.readouterr().out
    (tmp_path / "resume.log").write_text(resumed.replace("clip_ratio:0.03125", "clip_ratio:1.0"))
    assert cli_main(args) == 1 and "smoke verdict: FAIL (truncation)" in capsys.readouterr().out
    assert cli_main(args[:-1] + [str(tmp_path / "missing.log")]) == 2
    assert "error: argument --resume-log: no such file" in capsys.readouterr().err

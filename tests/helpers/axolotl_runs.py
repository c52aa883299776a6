"""What the Axolotl environment's tests share: the documented YAML (``verl_hadw.toy.axolotl_data``: docs/axolotl.md's,
on the toy task) with keys changed, a run through Axolotl's CLI in this process (``do_cli``, what ``axolotl train``
runs) or in a process of its own, and what a run left: its log history, weights and anchor files.
``RecordingTrainer`` (named as the YAML's ``trainer_cls``) records each generation batch as TRL held it;
``partly_unscored`` (a YAML's ``trl.reward_funcs``) leaves chosen completions unscored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from repo_paths import HELPERS
from safetensors.torch import load_file

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.axolotl_data import accuracy

QUIET = {"AXOLOTL_DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "WANDB_MODE": "disabled"}
TIME_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time")
RECORDING = "axolotl_recording.RecordingTrainer"  # tests/helpers/axolotl_recording.py
NONE_AT = [set(), {1, 5, 6, 7}, {0, 1, 4, 5, 6, 7}, set(range(8))]  # per step: the rows left unscored


def partly_unscored(completions, solution, trainer_state, **kwargs) -> list[float | None]:
    """The toy accuracy, None at the step's ``NONE_AT`` rows: none; a group with one unscored completion and one with a
    single scored one; a group without a scored completion; a batch without one."""
    none_at = NONE_AT[trainer_state.global_step % len(NONE_AT)]
    return [None if i in none_at else r for i, r in enumerate(accuracy(completions, solution))]


def write_yaml(assets: dict, out: Path, trl: dict | None = None, **keys) -> Path:
    """The documented YAML with ``output_dir: out``, ``keys`` set (``None``: removed) and ``trl`` merged into its
    ``trl:`` section; written beside ``out``."""
    cfg = yaml.safe_load(Path(assets["hadw.yml"]).read_text())
    cfg["output_dir"] = str(out)
    cfg["trl"].update(trl or {})
    for key, value in keys.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    path = out.parent / f"{out.name}.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def train_here(config: Path, records: Path | None = None) -> None:
    """One run through Axolotl's CLI function in this process (``axolotl.cli.train.do_cli``)."""
    from axolotl.cli.train import do_cli

    os.environ.update(QUIET, AXOLOTL_RECORDS=str(records or ""))
    argv, sys.argv = sys.argv, [sys.argv[0]]  # do_cli parses the CLI's own arguments from sys.argv
    try:
        do_cli(config=str(config))
    finally:
        sys.argv = argv


def train_process(*command, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command (``axolotl train ...``) in a process of its own, offline, the helpers importable."""
    path = os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([str(c) for c in command], env={**os.environ, **QUIET, "PYTHONPATH": path, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def axolotl_command() -> Path:
    return Path(sys.executable).with_name("axolotl")


def logged(out: Path, step: int = 3) -> list[dict]:
    """The per-step log entries of ``checkpoint-<step>``'s trainer state, without wall-clock fields."""
    state = json.loads((out / f"checkpoint-{step}" / "trainer_state.json").read_text())
    return [{k: v for k, v in h.items() if k not in TIME_KEYS} for h in state["log_history"] if "loss" in h]


def weights(out: Path, step: int = 3) -> dict:
    return load_file(str(out / f"checkpoint-{step}" / "model.safetensors"))


def anchor_file(out: Path, step: int = 3) -> dict:
    return json.loads((out / f"checkpoint-{step}" / STATE_FILE).read_text())


def records(folder: Path) -> list[dict]:
    path = folder / "rank0.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

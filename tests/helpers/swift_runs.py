"""What the ms-swift environment's tests share: the toy task for swift (a tiny local Qwen2, its prompts as JSONL, the
verifiable reward), the arguments of a small run, and running it through swift's own pipeline, in this process
(``rlhf_main``) or as a user types it (``verl-hadw-swift rlhf``). Each run's records (``record_plugin``) and swift's
``logging.jsonl`` are what the tests compare."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ports import free_port
from repo_paths import HELPERS, ROOT

GROUP, BATCH = 4, 8  # num_generations; per_device_train_batch_size (two prompts a step)
TIME_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time", "elapsed_time",
             "remaining_time", "train_speed(s/it)", "memory(GiB)"}


def toy_arguments(assets: dict, out: Path, steps: int = 4, save_steps: int = 2, **extra) -> list[str]:
    """A small swift GRPO run on the toy task (CPU, float32, seed 0): every argument a user would type."""
    values = {
        "rlhf_type": "grpo", "model": assets["model"], "model_type": "qwen2", "template": "chatml",
        "dataset": assets["dataset"],
        "external_plugins": [str(ROOT / "examples" / "swift_toy_plugin.py"), str(HELPERS / "record_plugin.py")],
        "reward_funcs": "toy_accuracy", "check_model": "false", "use_cpu": "true", "torch_dtype": "float32",
        "tuner_type": "full", "num_generations": GROUP, "per_device_train_batch_size": BATCH,
        "max_completion_length": 4, "max_steps": steps, "save_steps": save_steps, "logging_steps": 1,
        "learning_rate": 1e-2, "output_dir": str(out), "add_version": "false", "report_to": "none",
        "dataloader_num_workers": 0, "seed": 0, "data_seed": 0, "save_only_model": "false",
        # no worker processes, so none to keep: ms-swift 4.5 keeps them by default and then refuses 0 workers
        "dataloader_persistent_workers": "false",
    }
    values.update(extra)
    argv = []
    for key, value in values.items():
        argv += [f"--{key}", *(map(str, value) if isinstance(value, list) else [str(value)])]
    return argv


def train(argv: list[str], records: Path, swifts_own: bool = False):
    """One run through swift's pipeline in this process: ours (``rlhf_main``) or swift's own."""
    os.environ["SWIFT_ENV_RECORDS"] = str(records)
    if swifts_own:
        from swift.pipelines import rlhf_main
    else:
        from verl_hadw.swift import rlhf_main
    return rlhf_main(argv)


def command_line(argv: list[str], records: Path, ranks: int = 1, timeout: float = 900,
                 env: dict | None = None) -> subprocess.CompletedProcess:
    """``verl-hadw-swift rlhf <argv>`` as a user runs it (``NPROC_PER_NODE`` for several ranks; ``env``: more
    variables)."""
    env = {**os.environ, "SWIFT_ENV_RECORDS": str(records), **(env or {})}
    if ranks > 1:
        env.update(NPROC_PER_NODE=str(ranks), MASTER_PORT=str(free_port()))
    script = Path(sys.executable).with_name("verl-hadw-swift")
    return subprocess.run([str(script), "rlhf", *argv], env=env, capture_output=True, text=True, timeout=timeout)


def failure(proc: subprocess.CompletedProcess) -> str:
    """A failed command line's story, for its assertion: each line of its stderr that names an error, an abort or a
    signal (a rank's own, which torchrun's summary at the end does not repeat), then the tails of stdout and stderr."""
    said = [line for line in proc.stderr.splitlines()
            if re.search(r"Error|terminate called|what\(\)|Signal|Traceback|enforce fail", line)]
    return "\n".join([*said[-40:], "--- stdout's tail", proc.stdout[-2000:], "--- stderr's tail", proc.stderr[-4000:]])


def logged_steps(out: Path) -> list[dict]:
    """Swift's per-step log lines (``output_dir/logging.jsonl``), without the wall-clock fields."""
    rows = [json.loads(line) for line in (out / "logging.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if k not in TIME_KEYS} for row in rows if "loss" in row]


def records(folder: Path, rank: int = 0) -> list[dict]:
    path = folder / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def keep(name: str, folder: Path) -> None:
    """Copy a run's records to ``$VERL_HADW_RECORDS/<name>`` (the nox session keeps them for the comparison with TRL's
    adapter and verl's estimator, tests/hf_trainer/test_across_frameworks.py)."""
    target = os.environ.get("VERL_HADW_RECORDS")
    if target:
        shutil.copytree(folder, Path(target) / name, dirs_exist_ok=True)

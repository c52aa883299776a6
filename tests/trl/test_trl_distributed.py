"""Two processes (``accelerate launch --num_processes 2`` on CPU, gloo) hold the same HA-DW anchor at every step.

TRL gathers the rewards on every rank; each rank runs the estimator on the whole generation batch and keeps its own
in-process anchor, so the ranks must agree bit for bit without exchanging the anchor. One group is split across
the ranks, so a rank that used only its own rows would differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ports import free_port
from repo_paths import HELPERS

pytestmark = pytest.mark.slow  # two processes importing torch, transformers, TRL: 15-25 s


def test_two_ranks_hold_the_same_anchor_every_step(tmp_path):
    accelerate = [sys.executable, "-m", "accelerate.commands.launch"]
    # accelerate's --multi_gpu launcher is torchrun; TrainingArguments(use_cpu=True) makes the process group gloo
    cmd = [*accelerate, "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(free_port()),  # not torchrun's 29500: see ports.py
           str(HELPERS / "trl_two_ranks.py"), str(tmp_path)]
    env = {**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=HELPERS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["world_size"] == rank1["world_size"] == 2 and rank0["backend"] == "gloo"
    assert len(rank0["anchors"]) == 3 and rank0["anchors"][-1]["committed_steps"] == 2
    assert rank0["anchors"] == rank1["anchors"]  # every step, bit for bit (JSON floats round-trip exactly)
    assert rank0["rewards"] == rank1["rewards"] and len(rank0["rewards"][0]) == 12  # every rank saw all 12 rows
    assert rank0["log_history"] == rank1["log_history"]
    assert rank0["logged_advantages"] == rank1["logged_advantages"]
    # each rank trained on its own half of the batch's advantages (the last generation's), in TRL's order
    assert rank0["local_advantages"][-1] + rank1["local_advantages"][-1] == rank0["logged_advantages"]
    assert rank0["local_advantages"] != rank1["local_advantages"]

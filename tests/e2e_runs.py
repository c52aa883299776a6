"""Shared by the end-to-end tests: verl's real ``main_ppo`` on the CPU toy, and resuming from a run's checkpoint.

The runs use the demo's config at 8 prompts a step (today also the demo's batch), set here so that these tests,
which check plumbing (metrics, anchor files, exact resume), keep their cost if the demo's batch changes. The
demo's own 30-step run is ``run_demo`` (once per session: conftest.py's ``demo_run``).

A resumed run starts from a copy of the uninterrupted run's checkpoint ``global_step_K`` (verl's files, the
anchor file or the legacy snapshot of step K, ``latest_checkpointed_iteration.txt``), as after a job killed right
after it saved step K. Running the first K steps a second time would only reproduce that checkpoint.
"""

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from verl_hadw.anchor.file_format import STATE_FILE
from verl_hadw.anchor.legacy_snapshots import SNAPSHOT_DIR
from verl_hadw.research.study import RAY_STARTED
from verl_hadw.toy.launch import parse_steps, run
from verl_hadw.toy.modes import requested_mode

PROMPTS = 8  # prompts per step in these runs


def small_batch(overrides) -> list[str]:
    """8 prompts a step; one mini-batch of them, except in separate_async, where the demo launcher splits the step
    into its ``parameter_sync_step`` mini-batches (``verl_hadw.toy.modes``)."""
    batch = [f"data.train_batch_size={PROMPTS}"]
    if requested_mode(list(overrides)) != "separate_async":
        batch.append(f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}")
    return batch


def ray_failed_to_start(code: int, log: str) -> bool:
    """Ray's node never came up (it gives its raylet a fixed 30 s, which a loaded machine can miss)."""
    signs = ("timed out during startup", "Failed to get node info")
    return code != 0 and RAY_STARTED not in log and any(sign in log for sign in signs)


def until_ray_started(run_once, attempts: int):
    """``run_once()`` -> (exit code, log, ...) again while its Ray node did not come up, at most ``attempts`` times:
    these tests are about what happens once it has."""
    for attempt in range(1, attempts + 1):
        result = run_once()
        if not ray_failed_to_start(result[0], result[1]):
            break
        time.sleep(10 * attempt)
    return result


def main_ppo(assets, workdir, name, *overrides, expect_ok=True, experiment=None, attempts=3, small=True):
    """One ``main_ppo`` run in ``workdir/name`` (verl's checkpoints); returns (exit code, log, steps), trying again
    if Ray did not start. ``small=False`` keeps the demo's own batch (a run resumed from the demo's checkpoint)."""
    batch = small_batch(overrides) if small else []

    def run_once():
        code, log = run(
            assets,
            [
                f"trainer.experiment_name={experiment or name}", f"trainer.default_local_dir={workdir}/{name}",
                *batch, *overrides,
            ],
            cwd=str(workdir),
        )
        (workdir / f"{name}.log").write_text(log)
        return code, log

    code, log = until_ray_started(run_once, attempts)
    if expect_ok:
        assert code == 0, log[-5000:]
    return code, log, parse_steps(log)


def checkpoint_copy(workdir, source: str | Path, target: str, step: int) -> None:
    """``workdir/target`` holds only what ``workdir/source`` (or the folder ``source``, if absolute) had on disk
    right after it saved step ``step``."""
    src, dst = workdir / source, workdir / target
    shutil.copytree(src / f"global_step_{step}", dst / f"global_step_{step}")
    (dst / "latest_checkpointed_iteration.txt").write_text(str(step))
    snapshot = src / SNAPSHOT_DIR / f"step_{step}.json"  # the legacy trainer's anchor, beside the checkpoints
    if snapshot.exists():
        (dst / SNAPSHOT_DIR).mkdir()
        shutil.copy2(snapshot, dst / SNAPSHOT_DIR / snapshot.name)
    else:
        assert (dst / f"global_step_{step}" / STATE_FILE).exists()  # the v1 trainer's anchor file


@dataclass
class DemoRun:
    """The demo's own run (``scripts/demo_cpu.sh`` without the install step), in ``out``."""

    out: Path
    stdout: str
    log: str
    steps: dict


def run_demo(out: Path, attempts: int = 3) -> DemoRun:
    """``python -m verl_hadw.toy.launch --demo out``: what the demo script runs once installed. Shared by the demo
    test and the sync-trainer end-to-end tests (one 30-step run instead of one more of a few steps)."""
    cmd = [sys.executable, "-m", "verl_hadw.toy.launch", "--assets", str(out / "assets"), "--demo", str(out)]

    def run_once():
        proc = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=1800)
        log = (out / "main_ppo.log").read_text() if (out / "main_ppo.log").exists() else ""
        return proc.returncode, log, proc

    code, log, proc = until_ray_started(run_once, attempts)
    assert code == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return DemoRun(out, proc.stdout, log, parse_steps(log))

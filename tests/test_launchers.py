"""scripts/train.sh, scripts/slurm/train.sbatch and scripts/reproduce_*.sh in a fake Slurm + Ray environment:
PATH shims for srun / scontrol / sbatch / ray record every call, so the generated commands can be checked for
one and two nodes without a cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

SRUN = r"""#!/usr/bin/env bash
echo "srun $* | RAY_ADDRESS=${RAY_ADDRESS:-}" >>"$FAKE_LOG"
args=("$@")
while [[ ${args[0]} == -* ]]; do
  if [[ ${args[0]} == -w ]]; then args=("${args[@]:2}"); else args=("${args[@]:1}"); fi
done
case ${args[0]} in
  hostname) echo "${FAKE_HEAD_IP:-10.0.0.1}" ;;
  ray) exit 0 ;;  # `ray start --block` on a node: nothing to start here
  *)  # the training command (verl's main_ppo)
    if [[ -n ${FAKE_PREEMPT:-} ]]; then  # Slurm's --signal=B:USR1 reaching the batch script
      batch=$(ps -o ppid= -p "$PPID" | tr -d ' ')
      kill -USR1 "$batch"
      sleep 0.5
    fi
    if [[ -n ${FAKE_EXEC_MAIN:-} ]]; then exec "${args[@]}" --cfg job --resolve; fi
    exit "${FAKE_MAIN_STATUS:-0}" ;;
esac
"""
RAY = r"""#!/usr/bin/env bash
echo "ray $*" >>"$FAKE_LOG"
if [[ $1 == status ]]; then  # GPUs appear once every node's `ray start` has been launched
  n=$(grep -c '^srun .* ray start ' "$FAKE_LOG" || true)
  printf 'Resources\n---\nUsage:\n 0.0/%d.0 CPU\n 0.0/%d.0 GPU\n' $((n * 16)) $((n * 8))
fi
"""
SCONTROL = r"""#!/usr/bin/env bash
echo "scontrol $*" >>"$FAKE_LOG"
if [[ "$1 $2" == "show hostnames" ]]; then printf '%s\n' $FAKE_NODES; fi
"""
SBATCH = r"""#!/usr/bin/env bash
echo "sbatch $*" >>"$FAKE_LOG"
echo "$((1000 + $(grep -c '^sbatch ' "$FAKE_LOG")));cluster"
"""


@pytest.fixture
def fake(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", SRUN), ("ray", RAY), ("scontrol", SCONTROL), ("sbatch", SBATCH)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "FAKE_LOG": str(log),
        "VERL_HADW_PYTHON": PY,
        "VERL_HADW_DATA": str(tmp_path / "data"),
        "VERL_HADW_OUTPUT": str(tmp_path / "out"),
        "VERL_HADW_RAY_POLL": "0.2",
        "VERL_HADW_RAY_WAIT": "20",
        "SLURM_SUBMIT_DIR": str(ROOT),
        "SLURM_JOB_ID": "77",
        "SLURM_CPUS_PER_TASK": "16",
    }

    def run(*cmd, extra_env=None, cwd=tmp_path):
        return subprocess.run(list(cmd), env={**env, **(extra_env or {})}, cwd=cwd, capture_output=True,
                              text=True, timeout=300)

    def calls(prefix=""):
        return [line for line in log.read_text().splitlines() if line.startswith(prefix)]

    run.calls, run.tmp = calls, tmp_path
    return run


def test_train_dry_run_prints_the_composed_config_and_command(fake):
    proc = fake("bash", str(ROOT / "scripts/train.sh"), "hadw_t1_qwen3_4b_grpo_hadw", "--dry-run",
                "trainer.total_epochs=1")
    assert proc.returncode == 0, proc.stderr
    out, tmp = proc.stdout, fake.tmp
    assert "  total_epochs: 1\n" in out and "  adv_estimator: hadw\n" in out
    assert f"  train_files: {tmp}/data/hadw/math_train.parquet\n" in out
    command = next(line for line in out.splitlines() if line.startswith("# command:")).split()[2:]
    run_dir = f"{tmp}/out/hadw/hadw_t1_qwen3_4b_grpo_hadw"
    assert command[:5] == [PY, "-m", "verl.trainer.main_ppo", f"--config-path={ROOT / 'configs'}",
                           "--config-name=hadw_t1_qwen3_4b_grpo_hadw"]
    assert command[5:8] == [f"paths.data={tmp}/data", f"paths.output={tmp}/out", "trainer.total_epochs=1"]
    assert command[8] == f"++ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={run_dir}/tensorboard"
    assert re.fullmatch(rf"\+\+ray_kwargs\.ray_init\.runtime_env\.env_vars\.VERL_FILE_LOGGER_PATH={run_dir}/metrics/"
                        r"\d{8}-\d{6}-job77\.jsonl", command[9])
    assert not (tmp / "out").exists()  # nothing created by a dry run
    bad = fake("bash", str(ROOT / "scripts/train.sh"), "hadw_t9_nothing", "--dry-run")
    assert bad.returncode != 0 and "no run config 'hadw_t9_nothing'" in bad.stderr


def _expected_cluster_calls(nodes: int) -> list[str]:
    lines = [f"scontrol show hostnames node[1-{nodes}]",
             "srun --nodes=1 --ntasks=1 -w node1 hostname --ip-address | RAY_ADDRESS=",
             "srun --nodes=1 --ntasks=1 -w node1 ray start --head --node-ip-address=10.0.0.1 --port=6379 "
             "--num-cpus=16 --num-gpus=8 --block | RAY_ADDRESS="]
    lines += [f"srun --nodes=1 --ntasks=1 -w node{i} ray start --address=10.0.0.1:6379 --num-cpus=16 --num-gpus=8 "
              "--block | RAY_ADDRESS=" for i in range(2, nodes + 1)]
    return lines


@pytest.mark.parametrize("nodes", [1, 2])
def test_sbatch_starts_ray_on_every_node_then_trains_on_the_head(fake, nodes):
    """1 node: a Ray head only; 2 nodes: head + one worker; main_ppo on the head with trainer.nnodes = nodes.
    With two nodes the fake srun really runs verl's main_ppo (Hydra `--cfg job`): the command composes."""
    extra = {"SLURM_JOB_NODELIST": f"node[1-{nodes}]", "FAKE_NODES": " ".join(f"node{i}" for i in range(1, nodes + 1))}
    if nodes == 2:
        extra["FAKE_EXEC_MAIN"] = "1"
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo_hadw",
                "trainer.total_epochs=1", extra_env=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = fake.calls("s")  # srun / scontrol, in order
    cluster = [c for c in calls if "main_ppo" not in c]
    assert sorted(cluster) == sorted(_expected_cluster_calls(nodes))
    (main,) = [c for c in calls if "main_ppo" in c]
    assert calls[-1] == main  # training starts after the whole cluster
    assert any(c == "ray status --address=10.0.0.1:6379" for c in fake.calls("ray"))
    command, env = main.split(" | ")
    assert env == "RAY_ADDRESS=10.0.0.1:6379"
    run_dir = f"{fake.tmp}/out/hadw/hadw_t1_qwen3_4b_grpo_hadw"
    words = command.split()
    assert words[:9] == ["srun", "--overlap", "--nodes=1", "--ntasks=1", "-w", "node1", PY, "-m",
                         "verl.trainer.main_ppo"]
    assert words[9:11] == [f"--config-path={ROOT / 'configs'}", "--config-name=hadw_t1_qwen3_4b_grpo_hadw"]
    assert words[11:16] == [f"paths.data={fake.tmp}/data", f"paths.output={fake.tmp}/out", "trainer.total_epochs=1",
                            f"trainer.nnodes={nodes}", "trainer.n_gpus_per_node=8"]
    assert words[16] == f"++ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={run_dir}/tensorboard"
    assert Path(run_dir, "DONE").is_file() and len(list(Path(run_dir, "logs").glob("*-job77.log"))) == 1
    if nodes == 2:  # verl's own Hydra app composed the generated command line
        (log,) = Path(run_dir, "logs").glob("*-job77.log")
        text = log.read_text()
        assert "  nnodes: 2\n" in text and f"TENSORBOARD_DIR: {run_dir}/tensorboard" in text
        assert "checkpoint_callback_class: verl_hadw.callback.HadwCheckpointCallback" in text


def test_sbatch_requeues_near_the_time_limit_and_a_finished_run_exits(fake):
    extra = {"SLURM_JOB_NODELIST": "node1", "FAKE_NODES": "node1", "FAKE_PREEMPT": "1"}
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "dgpo_t1_base", "--eval", extra_env=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scontrol requeue 77" in fake.calls("scontrol")
    assert "requeueing job 77" in proc.stdout
    (main,) = [c for c in fake.calls("srun") if "main_ppo" in c]
    run_dir = f"{fake.tmp}/out/dgpo/dgpo_t1_base"
    assert "+eval=dgpo" in main.split() and f"TENSORBOARD_DIR={run_dir}/eval/tensorboard" in main
    assert Path(run_dir, "eval", "DONE").is_file() and not Path(run_dir, "DONE").exists()
    # the requeued job starts again: the run is finished, so no Ray cluster and no training
    before = len(fake.calls())
    again = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "dgpo_t1_base", "--eval", extra_env=extra)
    assert again.returncode == 0 and "already finished" in again.stdout
    assert len(fake.calls()) == before


def test_reproduce_submits_pending_steps_and_skips_finished_ones(fake):
    out = fake.tmp / "out" / "dgpo"
    (out / "dgpo_t1_grpo").mkdir(parents=True)
    (out / "dgpo_t1_grpo" / "DONE").write_text("x")  # GRPO trained, not yet evaluated
    dry = fake("bash", str(ROOT / "scripts/reproduce_dgpo.sh"), "--dry-run", "--only", "dgpo_t1_*")
    assert dry.returncode == 0, dry.stderr
    assert re.findall(r"\[\d+/\d+\] (\w+)\s+(\w+) (\S+)", dry.stdout) == [
        ("pending", "eval", "dgpo_t1_base"), ("done", "train", "dgpo_t1_grpo"), ("pending", "eval", "dgpo_t1_grpo"),
        ("pending", "train", "dgpo_t1_dgpo"), ("pending", "eval", "dgpo_t1_dgpo")]
    assert fake.calls("sbatch") == []
    sub = fake("bash", str(ROOT / "scripts/reproduce_dgpo.sh"), "--slurm", "--nodes", "2", "--only", "dgpo_t1_*",
               "--", "trainer.logger=[console,tensorboard]")
    assert sub.returncode == 0, sub.stderr
    script = ROOT / "scripts/slurm/train.sbatch"
    common = "--parsable --nodes=2"
    assert fake.calls("sbatch") == [
        f"sbatch {common} --job-name=dgpo_t1_base-eval {script} dgpo_t1_base --eval trainer.logger=[console,tensorboard]",
        f"sbatch {common} --job-name=dgpo_t1_grpo-eval {script} dgpo_t1_grpo --eval trainer.logger=[console,tensorboard]",
        f"sbatch {common} --job-name=dgpo_t1_dgpo {script} dgpo_t1_dgpo trainer.logger=[console,tensorboard]",
        # the evaluation waits for its training job (the fake sbatch numbered it 1003)
        f"sbatch {common} --job-name=dgpo_t1_dgpo-eval --dependency=afterok:1003 {script} dgpo_t1_dgpo --eval "
        "trainer.logger=[console,tensorboard]",
    ]

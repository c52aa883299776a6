"""scripts/train.sh, scripts/slurm/train.sbatch and scripts/reproduce_*.sh in a fake Slurm + Ray environment:
PATH shims for srun / scontrol / sbatch record every call, so the generated commands can be checked for one and
two nodes without a cluster. Ray must be the job interpreter's (``$PY -m ray.scripts.scripts``): the launchers
run a fake interpreter whose ray module records the calls, and a ``ray`` on PATH records a WRONG call."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # Ray / fake-cluster shells: tens of seconds

ROOT = Path(__file__).resolve().parents[1]
REAL_PY = sys.executable

SRUN = r"""#!/usr/bin/env bash
echo "srun $* | RAY_ADDRESS=${RAY_ADDRESS:-}" >>"$FAKE_LOG"
args=("$@")
while [[ ${args[0]} == -* ]]; do
  if [[ ${args[0]} == -w ]]; then args=("${args[@]:2}"); else args=("${args[@]:1}"); fi
done
# what each step sees of Ray's authentication and temp dir, and of Python's buffering
echo "auth ${args[0]##*/} ${args[*]:1:3} | ${RAY_AUTH_MODE:-unset} ${RAY_AUTH_TOKEN:-unset} ${RAY_TMPDIR:-unset}" \
  "PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-unset}" >>"$FAKE_LOG"
case " ${args[*]} " in
  " hostname --ip-address "*) echo "${FAKE_HEAD_IP:-10.0.0.1}" ;;
  " hostname -I "*) echo "${FAKE_ALL_IPS:-}" ;;
  " ip -o -4 addr show dev "*)  # `ip -o -4 addr show dev IFACE` on the head
    [[ ${args[6]} == "${FAKE_IFACE:-ib0}" ]] && echo "3: ${args[6]}    inet 10.9.0.7/16 brd 10.9.255.255 scope global"
    ;;
  *" ray.scripts.scripts start "*) exec "${args[@]}" ;;  # `ray start --block` on a node: the interpreter's Ray
  *)  # the training command (verl's main_ppo)
    if [[ -n ${FAKE_NEW_CHECKPOINT:-} ]]; then  # the job saved a newer checkpoint before the time limit
      mkdir -p "$FAKE_NEW_CHECKPOINT" && echo 40 >"$FAKE_NEW_CHECKPOINT/latest_checkpointed_iteration.txt"
    fi
    if [[ -n ${FAKE_PREEMPT:-} ]]; then  # Slurm's --signal=B:USR1 reaching the batch script's shell
      batch=$PPID  # train.sh here; walk up to the shell that runs train.sbatch
      until ps -o args= -p "$batch" | grep -q 'slurm/train\.sbatch'; do
        batch=$(ps -o ppid= -p "$batch" | tr -d ' ')
        [[ $batch -gt 1 ]] || { echo "fake srun: no train.sbatch above me" >&2; exit 99; }
      done
      kill -USR1 "$batch"
      sleep 0.5
    fi
    if [[ -n ${FAKE_EXEC_MAIN:-} ]]; then exec "${args[@]}" --cfg job --resolve; fi
    exit "${FAKE_MAIN_STATUS:-0}" ;;
esac
"""
# the job's interpreter: its ray module records `start` / `status`; main_ppo run directly (train.sh without a
# launch prefix) is recorded and not run unless FAKE_EXEC_MAIN; everything else is the real Python
PYTHON = r"""#!/usr/bin/env bash
if [[ "$1 $2" == "-m ray.scripts.scripts" ]]; then
  shift 2
  [[ $1 == start ]] || echo "pyray $*" >>"$FAKE_LOG"
  if [[ $1 == start ]]; then  # `ray start --block` runs until the job stops it; FAKE_RAY_DIES: it exits at once
    [[ " $* " == *" ${FAKE_RAY_DIES:-none} "* ]] && { echo "died $*" >>"$FAKE_LOG"; exit 3; }
    echo "pyray $*" >>"$FAKE_LOG"
    exec sleep 300
  fi
  if [[ $1 == status ]]; then  # the head answers after FAKE_HEAD_SLOW failed polls; GPUs appear once every
    n=$(grep -c '^pyray status' "$FAKE_LOG" || true)  # node's `ray start` has run
    if [[ $n -le ${FAKE_HEAD_SLOW:-0} ]]; then echo "ConnectionError: no head (test)" >&2; exit 1; fi
    echo "pyray answered" >>"$FAKE_LOG"
    n=$(grep -c '^pyray start ' "$FAKE_LOG" || true)
    printf 'Resources\n---\nUsage:\n 0.0/%d.0 CPU\n 0.0/%d.0 GPU\n' $((n * 16)) $((n * 8))
  fi
  exit 0
fi
if [[ "$1 $2" == "-m verl.trainer.main_ppo" && -z ${FAKE_EXEC_MAIN:-} ]]; then
  echo "main_ppo ${*:3}" >>"$FAKE_LOG"
  exit "${FAKE_MAIN_STATUS:-0}"
fi
# the installed verl-hadw is this checkout (also in a job whose environment is clean)
export PYTHONPATH="__ROOT__${PYTHONPATH:+:$PYTHONPATH}" VERL_HADW_CONFIGS="${VERL_HADW_CONFIGS:-__ROOT__/configs}"
exec "__REAL_PY__" "$@"
"""
WRONG_RAY = r"""#!/usr/bin/env bash
echo "WRONG ray on PATH: $*" >>"$FAKE_LOG"
exit 1
"""
SCONTROL = r"""#!/usr/bin/env bash
echo "scontrol $*" >>"$FAKE_LOG"
if [[ "$1 $2" == "show hostnames" ]]; then printf '%s\n' $FAKE_NODES; fi
"""
SQUEUE = r"""#!/usr/bin/env bash
# FAKE_QUEUE="name=jobid ...": the jobs pending or running; prints the id of the one --name= asks for
echo "squeue $*" >>"$FAKE_LOG"
for arg in "$@"; do [[ $arg == --name=* ]] && name=${arg#--name=}; done
for pair in ${FAKE_QUEUE:-}; do [[ ${pair%%=*} == "$name" ]] && echo "${pair#*=}"; done
exit 0
"""
SBATCH = r"""#!/usr/bin/env bash
echo "sbatch $*" >>"$FAKE_LOG"
echo "$((1000 + $(grep -c '^sbatch ' "$FAKE_LOG")));cluster"
"""
# Runs the job at once, as a compute node would: in the submit directory, with only the cluster's PATH, the
# Slurm variables and what `--export=ALL,K=V,...` names (ALL: the submitting shell's environment is *not*
# passed here, as on sites that export nothing by default). Records the job's exit status.
SBATCH_RUN = r"""#!/usr/bin/env bash
echo "sbatch $*" >>"$FAKE_LOG"
job=$((1000 + $(grep -c '^sbatch ' "$FAKE_LOG")))
env_pairs=()
while [[ $1 == --* ]]; do
  case $1 in --export=*) IFS=, read -r -a items <<<"${1#--export=}"
    for item in "${items[@]}"; do [[ $item == *=* ]] && env_pairs+=("$item"); done ;; esac
  shift
done
script=$1; shift
env -i PATH="$FAKE_CLUSTER_PATH" HOME="$HOME" FAKE_LOG="$FAKE_LOG" FAKE_NODES=node1 SLURM_JOB_ID="$job" \
  SLURM_JOB_NODELIST=node1 SLURM_SUBMIT_DIR="$PWD" SLURM_CPUS_ON_NODE=16 SLURM_GPUS_ON_NODE=8 \
  VERL_HADW_RAY_POLL=0.2 VERL_HADW_RAY_WAIT=20 "${env_pairs[@]}" bash "$script" "$@" >"$FAKE_JOB_OUT.$job" 2>&1
echo "job $job exit $?" >>"$FAKE_LOG"
echo "$job;cluster"
"""


@pytest.fixture
def fake(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    py = tmp_path / "py" / "python"
    py.parent.mkdir()
    py.write_text(PYTHON.replace("__REAL_PY__", REAL_PY).replace("__ROOT__", str(ROOT)))
    py.chmod(0o755)
    for name, text in (("srun", SRUN), ("ray", WRONG_RAY), ("scontrol", SCONTROL), ("sbatch", SBATCH),
                       ("squeue", SQUEUE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "FAKE_LOG": str(log),
        "VERL_HADW_PYTHON": str(py),
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

    run.calls, run.tmp, run.py, run.env, run.bin = calls, tmp_path, str(py), env, bin_dir
    yield run
    wrong = calls("WRONG")
    assert not wrong, f"a launcher ran the `ray` on PATH instead of its interpreter's: {wrong}"


def test_train_dry_run_prints_the_composed_config_and_command(fake):
    proc = fake("bash", str(ROOT / "scripts/train.sh"), "hadw_t1_qwen3_4b_grpo_hadw", "--dry-run",
                "trainer.total_epochs=1")
    assert proc.returncode == 0, proc.stderr
    out, tmp = proc.stdout, fake.tmp
    assert "  total_epochs: 1\n" in out and "  adv_estimator: hadw\n" in out
    assert f"  train_files: {tmp}/data/hadw/math_train.parquet\n" in out
    command = next(line for line in out.splitlines() if line.startswith("# command:")).split()[2:]
    run_dir = f"{tmp}/out/hadw/hadw_t1_qwen3_4b_grpo_hadw"
    assert command[:5] == [fake.py, "-m", "verl.trainer.main_ppo", f"--config-path={ROOT / 'configs'}",
                           "--config-name=hadw/experiments/hadw_t1_qwen3_4b_grpo_hadw"]
    assert command[5:8] == [f"paths.data={tmp}/data", f"paths.output={tmp}/out", "trainer.total_epochs=1"]
    assert command[8] == f"++ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={run_dir}/tensorboard"
    assert re.fullmatch(rf"\+\+ray_kwargs\.ray_init\.runtime_env\.env_vars\.VERL_FILE_LOGGER_PATH={run_dir}/metrics/"
                        r"\d{8}-\d{6}-job77\.jsonl", command[9])
    assert not (tmp / "out").exists()  # nothing created by a dry run
    bad = fake("bash", str(ROOT / "scripts/train.sh"), "hadw_t9_nothing", "--dry-run")
    assert bad.returncode != 0 and "no run config 'hadw_t9_nothing'" in bad.stderr


def _expected_cluster_calls(py: str, nodes: int) -> list[str]:
    step = "srun --nodes=1 --ntasks=1 --cpus-per-task=16 --gpus-per-task=8"
    lines = [f"scontrol show hostnames node[1-{nodes}]",
             "srun --nodes=1 --ntasks=1 -w node1 hostname --ip-address | RAY_ADDRESS=",
             f"{step} -w node1 {py} -m ray.scripts.scripts start --head --node-ip-address=10.0.0.1 --port=6379 "
             "--num-cpus=16 --num-gpus=8 --temp-dir=/tmp/ray-77 --block | RAY_ADDRESS="]
    lines += [f"{step} -w node{i} {py} -m ray.scripts.scripts start --address=10.0.0.1:6379 --num-cpus=16 "
              "--num-gpus=8 --temp-dir=/tmp/ray-77 --block | RAY_ADDRESS=" for i in range(2, nodes + 1)]
    return lines


@pytest.mark.parametrize("nodes", [1, 2])
def test_sbatch_starts_ray_on_every_node_then_trains_on_the_head(fake, nodes):
    """1 node: a Ray head only; 2 nodes: head + one worker; main_ppo on the head with trainer.nnodes = nodes.
    Ray is the job interpreter's (the fixture fails on a `ray` from PATH) and each Ray step asks for the node's
    CPUs and GPUs. With two nodes the fake srun really runs verl's main_ppo (Hydra `--cfg job`)."""
    extra = {"SLURM_JOB_NODELIST": f"node[1-{nodes}]", "FAKE_NODES": " ".join(f"node{i}" for i in range(1, nodes + 1))}
    if nodes == 2:
        extra["FAKE_EXEC_MAIN"] = "1"
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo_hadw",
                "trainer.total_epochs=1", extra_env=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = fake.calls("s")  # srun / scontrol, in order
    cluster = [c for c in calls if "main_ppo" not in c]
    assert sorted(cluster) == sorted(_expected_cluster_calls(fake.py, nodes))
    (main,) = [c for c in calls if "main_ppo" in c]
    assert calls[-1] == main  # training starts after the whole cluster
    ray = fake.calls("pyray")  # what the interpreter's ray module was asked: one start per node, then status
    assert sorted(c for c in ray if c.startswith("pyray start")) == sorted(
        c.split(" -m ray.scripts.scripts ")[1].replace(" | RAY_ADDRESS=", "").join(["pyray ", ""])
        for c in cluster if "ray.scripts.scripts" in c)
    assert "pyray status --address=10.0.0.1:6379" in ray
    command, env = main.split(" | ")
    assert env == "RAY_ADDRESS=10.0.0.1:6379"
    run_dir = f"{fake.tmp}/out/hadw/hadw_t1_qwen3_4b_grpo_hadw"
    words = command.split()
    assert words[:9] == ["srun", "--overlap", "--nodes=1", "--ntasks=1", "-w", "node1", fake.py, "-m",
                         "verl.trainer.main_ppo"]
    assert words[9:11] == [f"--config-path={ROOT / 'configs'}",
                           "--config-name=hadw/experiments/hadw_t1_qwen3_4b_grpo_hadw"]
    assert words[11:16] == [f"paths.data={fake.tmp}/data", f"paths.output={fake.tmp}/out", "trainer.total_epochs=1",
                            f"trainer.nnodes={nodes}", "trainer.n_gpus_per_node=8"]
    assert words[16] == f"++ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR={run_dir}/tensorboard"
    assert Path(run_dir, "DONE").is_file() and len(list(Path(run_dir, "logs").glob("*-job77.log"))) == 1
    if nodes == 2:  # verl's own Hydra app composed the generated command line
        (log,) = Path(run_dir, "logs").glob("*-job77.log")
        text = log.read_text()
        assert "  nnodes: 2\n" in text and f"TENSORBOARD_DIR: {run_dir}/tensorboard" in text
        assert "checkpoint_callback_class: verl_hadw.callback.HadwCheckpointCallback" in text


def test_sbatch_takes_the_allocation_from_slurm_and_has_no_hard_limits(fake):
    """CPUs / GPUs come from the allocation (SLURM_CPUS_ON_NODE, typed SLURM_GPUS_PER_NODE), not constants; the
    script itself pins neither a CPU count nor a time limit."""
    header = [line for line in (ROOT / "scripts/slurm/train.sbatch").read_text().splitlines()
              if line.startswith("#SBATCH")]
    assert not [line for line in header if "--cpus-per-task" in line or "--time" in line], header
    extra = {"SLURM_JOB_NODELIST": "node1", "FAKE_NODES": "node1", "SLURM_CPUS_PER_TASK": "",
             "SLURM_CPUS_ON_NODE": "96", "SLURM_GPUS_PER_NODE": "a100:8"}
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (start,) = [c for c in fake.calls("srun") if "ray.scripts.scripts start" in c]
    assert start.startswith("srun --nodes=1 --ntasks=1 --cpus-per-task=96 --gpus-per-task=8 -w node1 ")
    assert "--num-cpus=96 --num-gpus=8" in start


def test_sbatch_requeues_near_the_time_limit_only_after_progress(fake):
    """USR1 (10 min before the time limit) requeues the job only if it saved a newer checkpoint than the one it
    started from; otherwise it says to pass a longer --time (a requeue would start, load, validate and stop
    again, forever). A requeued start of a finished run exits at once."""
    run_dir = fake.tmp / "out" / "hadw" / "hadw_t1_qwen3_4b_grpo"
    _checkpoint(run_dir / "checkpoints", 30)
    base = {"SLURM_JOB_NODELIST": "node1", "FAKE_NODES": "node1", "FAKE_PREEMPT": "1"}
    stuck = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=base)
    assert stuck.returncode == 0, stuck.stdout + stuck.stderr
    assert "scontrol requeue 77" not in fake.calls("scontrol")
    assert "no checkpoint since this job started (latest: 30): not requeueing" in stuck.stderr
    assert "longer --time" in stuck.stderr
    (run_dir / "DONE").unlink()
    moved = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo",
                 extra_env={**base, "FAKE_NEW_CHECKPOINT": str(run_dir / "checkpoints")})
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "scontrol requeue 77" in fake.calls("scontrol")
    assert "requeueing job 77 (checkpoint 30 -> 40)" in moved.stdout
    # the requeued job starts again: the run is finished, so no Ray cluster and no training
    before = len(fake.calls())
    again = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=base)
    assert again.returncode == 0 and "already finished" in again.stdout
    assert len(fake.calls()) == before


def test_sbatch_eval_pass_writes_its_own_marker(fake):
    extra = {"SLURM_JOB_NODELIST": "node1", "FAKE_NODES": "node1"}
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "dgpo_t1_base", "--eval", extra_env=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (main,) = [c for c in fake.calls("srun") if "main_ppo" in c]
    run_dir = f"{fake.tmp}/out/dgpo/dgpo_t1_base"
    assert "eval=dgpo" in main.split() and f"TENSORBOARD_DIR={run_dir}/eval/tensorboard" in main
    assert Path(run_dir, "eval", "DONE").is_file() and not Path(run_dir, "DONE").exists()


def test_sbatch_gives_every_step_the_job_token_and_temp_dir(fake):
    """Token auth per job: RAY_AUTH_MODE=token and one fresh 64-hex RAY_AUTH_TOKEN in the environment of every Ray
    step and of the driver (never on a command line); a short per-job Ray temp dir; unbuffered Python."""
    tokens = []
    for job in ("77", "78"):
        extra = {"SLURM_JOB_NODELIST": "node[1-2]", "FAKE_NODES": "node1 node2", "SLURM_JOB_ID": job}
        proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        steps = [c for c in fake.calls("auth ") if "ray.scripts.scripts start" in c or "main_ppo" in c][-3:]
        assert len(steps) == 3  # head, worker, driver
        envs = {c.split(" | ")[1] for c in steps}
        assert len(envs) == 1, envs
        mode, token, tmp, unbuffered = envs.pop().split()
        assert mode == "token" and re.fullmatch(r"[0-9a-f]{64}", token) and tmp == f"/tmp/ray-{job}"
        assert unbuffered == "PYTHONUNBUFFERED=1"
        assert not [c for c in fake.calls() if token in c and not c.startswith("auth ")]  # on no command line
        tokens.append(token)
        fake.tmp.joinpath("out/hadw/hadw_t1_qwen3_4b_grpo/DONE").unlink()
    assert tokens[0] != tokens[1]  # per job
    custom = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo",
                  extra_env={"SLURM_JOB_NODELIST": "node1", "FAKE_NODES": "node1",
                             "VERL_HADW_RAY_TMPDIR": "/dev/shm/r"})
    assert custom.returncode == 0 and "--temp-dir=/dev/shm/r" in fake.calls("pyray start")[-1]


@pytest.mark.parametrize("case", ["loopback", "iface", "explicit", "only_loopback"])
def test_sbatch_head_address_is_not_loopback(fake, case):
    """The head address: what the head's name resolves to unless loopback (then its first non-loopback IPv4),
    the address of VERL_HADW_RAY_IFACE, or VERL_HADW_RAY_HEAD_IP; a head with only loopback stops the job."""
    extra = {"SLURM_JOB_NODELIST": "node1", "FAKE_NODES": "node1"}
    extra.update({
        "loopback": {"FAKE_HEAD_IP": "127.0.1.1", "FAKE_ALL_IPS": "fd00::2 192.0.2.2 10.0.0.3"},
        "iface": {"VERL_HADW_RAY_IFACE": "ib0"},
        "explicit": {"VERL_HADW_RAY_HEAD_IP": "10.5.5.5"},
        "only_loopback": {"FAKE_HEAD_IP": "127.0.0.1", "FAKE_ALL_IPS": "::1"},
    }[case])
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=extra)
    if case == "only_loopback":
        assert proc.returncode == 2 and "no non-loopback IPv4 address; set VERL_HADW_RAY_IFACE" in proc.stderr
        assert not fake.calls("pyray")
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    want = {"loopback": "192.0.2.2", "iface": "10.9.0.7", "explicit": "10.5.5.5"}[case]
    assert f"--node-ip-address={want} " in fake.calls("pyray start")[0]
    assert fake.calls("main_ppo") == [] and f"RAY_ADDRESS={want}:6379" in fake.calls("srun")[-1]


def test_sbatch_starts_workers_once_the_head_answers_and_fails_fast_when_a_ray_step_dies(fake):
    """Workers start only after `ray status` reaches the head (its errors are shown, not hidden); a Ray step that
    exits stops the job at once, naming the node and the status, long before VERL_HADW_RAY_WAIT."""
    extra = {"SLURM_JOB_NODELIST": "node[1-2]", "FAKE_NODES": "node1 node2", "FAKE_HEAD_SLOW": "3"}
    proc = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ray = fake.calls("pyray")
    worker = next(i for i, c in enumerate(ray) if c.startswith("pyray start --address="))
    answered = ray.index("pyray answered")
    assert answered < worker
    # 3 unanswered polls, then the answer (the GPU poll that follows may log before the worker's start line)
    assert sum(c.startswith("pyray status") for c in ray[:answered]) == 4
    for dies, name in (("--head", "node1 (head)"), ("--address=10.0.0.1:6379", "node2")):
        fake.tmp.joinpath("out/hadw/hadw_t1_qwen3_4b_grpo/DONE").unlink(missing_ok=True)
        extra = {"SLURM_JOB_NODELIST": "node[1-2]", "FAKE_NODES": "node1 node2", "FAKE_RAY_DIES": dies,
                 "VERL_HADW_RAY_WAIT": "120"}
        began = time.monotonic()
        died = fake("bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo", extra_env=extra)
        assert time.monotonic() - began < 60  # not the 120 s wait
        assert died.returncode == 1
        assert f"the Ray step on {name} exited (status 3" in died.stderr, died.stderr
        assert "main_ppo" not in "".join(fake.calls("srun")[-1:])


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
               "--sbatch-args", "--partition=gpu --time=1-00:00:00", "--", "trainer.logger=[console,tensorboard]")
    assert sub.returncode == 0, sub.stderr
    script = ROOT / "scripts/slurm/train.sbatch"
    export = (f"--export=ALL,VERL_HADW_HOME={ROOT},VERL_HADW_DATA={fake.tmp}/data,VERL_HADW_OUTPUT={fake.tmp}/out,"
              f"VERL_HADW_PYTHON={fake.py},VERL_HADW_KEEP=final")
    site = "--partition=gpu --time=1-00:00:00"
    assert fake.calls("sbatch") == [
        f"sbatch --parsable --nodes=2 --job-name=dgpo_t1_base-eval {export} {site} "
        f"{script} dgpo_t1_base --eval trainer.logger=[console,tensorboard]",
        f"sbatch --parsable --nodes=2 --job-name=dgpo_t1_grpo-eval {export} {site} "
        f"{script} dgpo_t1_grpo --eval trainer.logger=[console,tensorboard]",
        f"sbatch --parsable --nodes=2 --job-name=dgpo_t1_dgpo {export} {site} "
        f"{script} dgpo_t1_dgpo trainer.logger=[console,tensorboard]",
        # the evaluation waits for its training job (the fake sbatch numbered it 1003)
        f"sbatch --parsable --nodes=2 --job-name=dgpo_t1_dgpo-eval {export} {site} "
        f"--dependency=afterok:1003 {script} dgpo_t1_dgpo --eval trainer.logger=[console,tensorboard]",
    ]
    # run again while dgpo_t1_dgpo's training job is pending and dgpo_t1_base's evaluation runs: neither is
    # submitted twice, and the new evaluation job waits for the queued training job
    again = fake("bash", str(ROOT / "scripts/reproduce_dgpo.sh"), "--slurm", "--only", "dgpo_t1_*",
                 extra_env={"FAKE_QUEUE": "dgpo_t1_dgpo=555 dgpo_t1_base-eval=556 dgpo_t1_grpo=557"})
    assert again.returncode == 0, again.stderr
    assert "job 555 is pending or running; not submitted again" in again.stdout
    assert "job 556 is pending or running" in again.stdout
    submitted = fake.calls("sbatch")[4:]
    assert [c.split("--job-name=")[1].split()[0] for c in submitted] == ["dgpo_t1_grpo-eval", "dgpo_t1_dgpo-eval"]
    assert "--dependency=afterok:555" in submitted[1]
    user = fake.calls("squeue")[-1]
    assert "--noheader" in user and re.search(r"--user=\S+ --name=dgpo_t1_dgpo-eval --format=%i", user)
    broken = fake.bin / "squeue"
    broken.write_text("#!/usr/bin/env bash\nexit 1\n")
    fails = fake("bash", str(ROOT / "scripts/reproduce_dgpo.sh"), "--slurm", "--only", "dgpo_t1_*")
    assert fails.returncode == 1 and "squeue failed" in fails.stderr and len(fake.calls("sbatch")) == 6


def test_reproduce_slurm_jobs_work_when_submitted_from_outside_the_checkout(fake, tmp_path):
    """Submitted from an unrelated directory, each job runs as on a compute node (submit directory = that
    directory, a clean environment apart from --export): it finds the checkout, the data/output paths and the
    interpreter, starts Ray, trains and writes DONE. The PATH has a `python3` that must not be used."""
    (fake.bin / "sbatch").write_text(SBATCH_RUN)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cluster_bin = tmp_path / "cluster-bin"  # the compute node's PATH: Slurm tools, the WRONG ray, a bare python3
    cluster_bin.mkdir()
    for name in ("srun", "scontrol", "ray"):
        (cluster_bin / name).symlink_to(fake.bin / name)
    (cluster_bin / "python3").write_text(
        '#!/usr/bin/env bash\necho "WRONG python3 on PATH: $*" >>"$FAKE_LOG"; exit 1\n')
    (cluster_bin / "python3").chmod(0o755)
    extra = {"FAKE_CLUSTER_PATH": f"{cluster_bin}:/usr/bin:/bin", "FAKE_JOB_OUT": str(tmp_path / "job"),
             "VERL_HADW_DATA": "data", "VERL_HADW_OUTPUT": "runs", "VERL_HADW_KEEP": "final"}
    sub = fake("bash", str(ROOT / "scripts/reproduce_hadw.sh"), "--slurm", "--only", "hadw_t1_qwen3_4b_grpo",
               extra_env=extra, cwd=elsewhere)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    (status,) = fake.calls("job ")
    job_out = Path(f"{tmp_path}/job.{status.split()[1]}").read_text()
    assert status.endswith("exit 0"), job_out
    run_dir = elsewhere / "runs" / "hadw" / "hadw_t1_qwen3_4b_grpo"  # relative paths resolved at submission
    assert (run_dir / "DONE").is_file(), job_out
    (main,) = [c for c in fake.calls("srun") if "main_ppo" in c]
    assert f"paths.data={elsewhere}/data" in main.split() and f" {fake.py} -m verl.trainer.main_ppo " in main
    assert fake.calls("pyray start --head") and not fake.calls("WRONG python3")


# ------------------------------------------------------------------------------- resume and retention
def _checkpoint(ckpt: Path, step: int, params_mb: int = 1) -> None:
    """A verl FSDP checkpoint as written by an 2-GPU run: model, optimizer, extra state, the HA-DW anchor."""
    actor = ckpt / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    for rank in range(2):
        (actor / f"model_world_size_2_rank_{rank}.pt").write_bytes(b"m" * params_mb * 4000)
        (actor / f"optim_world_size_2_rank_{rank}.pt").write_bytes(b"o" * params_mb * 8000)
        (actor / f"extra_state_world_size_2_rank_{rank}.pt").write_bytes(b"e")
    (ckpt / f"global_step_{step}" / "data.pt").write_bytes(b"d")
    (ckpt / f"global_step_{step}" / "verl_hadw_anchor.json").write_text("{}")
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))


def _log_validation(run_dir: Path, steps: list[int]) -> None:
    """What verl's file logger writes: one json line per step; validation steps carry val-core metrics."""
    (run_dir / "metrics").mkdir(parents=True, exist_ok=True)
    with open(run_dir / "metrics" / "20260101-000000.jsonl", "w") as f:
        for step in range(1, max(steps) + 1):
            data = {"actor/pg_loss": 0.1}
            if step in steps:
                data["val-core/math500/acc/mean@1"] = 0.5
            f.write(json.dumps({"step": step, "data": data}) + "\n")


@pytest.mark.parametrize("logged", [True, False])
def test_train_resume_skips_a_redundant_validation_and_prunes_after_done(fake, logged):
    """A resume from global_step_20 passes trainer.val_before_train=false when step 20's validation is in the
    logs (verl saves before it validates: a job killed in between must validate again), drops the superseded
    global_step_10, and once DONE the run keeps only the final weights (no optimizer state)."""
    run = "hadw_t1_qwen3_4b_grpo"
    run_dir = fake.tmp / "out" / "hadw" / run
    ckpt = run_dir / "checkpoints"
    _checkpoint(ckpt, 10)
    _checkpoint(ckpt, 20)
    _log_validation(run_dir, [5, 10, 15, 20] if logged else [5, 10, 15])
    proc = fake("bash", str(ROOT / "scripts/train.sh"), run)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (main,) = fake.calls("main_ppo")
    words = main.split()
    assert words[3:5] == [f"paths.data={fake.tmp}/data", f"paths.output={fake.tmp}/out"]
    assert ("trainer.val_before_train=false" in words) is logged
    if logged:
        assert words[5] == "trainer.val_before_train=false"
    assert "resuming from" in proc.stdout and (run_dir / "DONE").is_file()
    # after DONE (VERL_HADW_KEEP=final): global_step_20 without its optimizer shards, global_step_10 gone
    assert sorted(p.name for p in ckpt.iterdir()) == ["global_step_20", "latest_checkpointed_iteration.txt"]
    left = sorted(p.name for p in (ckpt / "global_step_20" / "actor").iterdir())
    assert left == [f"{k}_world_size_2_rank_{r}.pt" for k in ("extra_state", "model") for r in (0, 1)]
    assert (ckpt / "global_step_20" / "verl_hadw_anchor.json").is_file()


def test_train_keeps_state_when_asked_and_refuses_a_bad_policy(fake):
    run = "hadw_t1_qwen3_4b_grpo"
    ckpt = fake.tmp / "out" / "hadw" / run / "checkpoints"
    for step in (10, 20, 30):
        _checkpoint(ckpt, step)
    proc = fake("bash", str(ROOT / "scripts/train.sh"), run, extra_env={"VERL_HADW_KEEP": "2"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in ckpt.glob("global_step_*")) == ["global_step_20", "global_step_30"]
    assert len(list(ckpt.rglob("optim_world_size_*"))) == 4  # whole checkpoints
    # a fresh start (no checkpoint): verl's pre-training validation stays (the base model's row at step 0)
    fresh = fake("bash", str(ROOT / "scripts/train.sh"), "hadw_t1_qwen3_8b_grpo", extra_env={"VERL_HADW_KEEP": "all"})
    assert fresh.returncode == 0 and "trainer.val_before_train=false" not in fake.calls("main_ppo")[-1]
    bad = fake("bash", str(ROOT / "scripts/train.sh"), run, extra_env={"VERL_HADW_KEEP": "latest"})
    assert bad.returncode == 2 and "VERL_HADW_KEEP=latest" in bad.stderr
    assert len(fake.calls("main_ppo")) == 2  # refused before launching anything


# ------------------------------------------------------------------------------------------ shell hygiene
LAUNCHERS = ["scripts/train.sh", "scripts/slurm/train.sbatch", "scripts/reproduce_paper.sh"]


@pytest.mark.parametrize("script", LAUNCHERS)
def test_launchers_expand_arrays_safely_for_old_bash(script):
    """`"${a[@]}"` of an empty array is an unbound-variable error under `set -u` in bash < 4.4 (still common on
    clusters): every whole-array expansion is written ${a[@]+"${a[@]}"}."""
    text = (ROOT / script).read_text()
    bare = re.findall(r'(?<!\+)"\$\{(\w+)\[@\]\}"', text)
    assert bare == [], f"{script}: unguarded array expansions of {sorted(set(bare))}"
    assert "set -euo pipefail" in text


def test_train_runs_python_unbuffered(fake):
    """train.sh tees verl's output into the run log: Python must not hold it back in 8 KB blocks."""
    proc = fake("bash", str(ROOT / "scripts/train.sh"), "hadw_t1_qwen3_4b_grpo",
                extra_env={"VERL_HADW_LAUNCH_PREFIX": f"{fake.bin}/srun --overlap"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (env,) = [c for c in fake.calls("auth ") if "main_ppo" in c]
    assert env.endswith("PYTHONUNBUFFERED=1")


# ------------------------------------------------------------------------------------ the real Ray, one node
PASS_THROUGH_SRUN = r"""#!/usr/bin/env bash
# srun on a one-node allocation, minus Slurm: drop srun's own options and run the command here
args=("$@")
while [[ ${args[0]} == -* ]]; do
  if [[ ${args[0]} == -w ]]; then args=("${args[@]:2}"); else args=("${args[@]:1}"); fi
done
exec "${args[@]}"
"""
DRIVER = r"""#!/usr/bin/env bash
# stands in for scripts/train.sh: the driver connects to the job's Ray cluster as verl's main_ppo does
exec "$VERL_HADW_PYTHON" -c '
import os, sys, time, ray
began = time.monotonic()
address = os.environ["RAY_ADDRESS"]
ray.init(address=address, logging_level="ERROR")
print(f"DRIVER connected in {time.monotonic() - began:.1f}s to {address}: "
      f"{ray.cluster_resources()} args={sys.argv[1:]}", flush=True)
ray.shutdown()
' "$@"
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def test_sbatch_reaches_its_driver_on_a_real_ray_with_token_auth_on(tmp_path):
    """The real train.sbatch with the venv's real Ray (>= 2.59 turns token auth on when ~/.ray/auth_token exists,
    as after any local ray.init()), one node, a pass-through srun: the head starts, `ray status` and the driver's
    ray.init() get in with the job's token, and the driver sees the cluster."""
    import ray

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("0" * 64)  # someone's earlier local ray.init()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", PASS_THROUGH_SRUN), ("scontrol", SCONTROL), ("driver", DRIVER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    job = f"{os.getpid()}{time.monotonic_ns() % 10000}"
    ray_tmp = f"/tmp/ray-t{job}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SLURM_"))}
    env.update({
        "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "calls.log"),
        "FAKE_NODES": "node1", "SLURM_JOB_NODELIST": "node1", "SLURM_JOB_ID": job,
        "VERL_HADW_HOME": str(ROOT), "VERL_HADW_PYTHON": REAL_PY, "VERL_HADW_TRAIN_CMD": str(bin_dir / "driver"),
        "VERL_HADW_DATA": str(tmp_path / "data"), "VERL_HADW_OUTPUT": str(tmp_path / "out"),
        "VERL_HADW_GPUS_PER_NODE": "1", "VERL_HADW_CPUS_PER_NODE": "1", "VERL_HADW_RAY_TMPDIR": ray_tmp,
        # the default poll (5 s): each `ray status` is a Python process that would slow the head's own start-up
        "VERL_HADW_RAY_PORT": str(_free_port()), "VERL_HADW_RAY_WAIT": "240",
        # Other Ray clusters on this machine may hold Ray's fixed default ports (the dashboard agent's 52365 among
        # them): every port is a free one. Given ports also spare two of the raylet's waits for the agents' port
        # files (Ray 2.60 aborts after ~15 s per file, which a loaded machine can exceed).
        "VERL_HADW_RAY_START_ARGS": " ".join([
            "--include-dashboard=false", f"--dashboard-port={_free_port()}",
            f"--ray-client-server-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
            f"--dashboard-agent-grpc-port={_free_port()}", f"--metrics-export-port={_free_port()}",
            f"--runtime-env-agent-port={_free_port()}",
            # fewer Python processes competing with the agents' start-up on a loaded machine
            "--include-log-monitor=false", "--disable-usage-stats"]),
    })
    began = time.monotonic()
    # output to files, not pipes: a Ray process left behind would hold a pipe open and stall the wait
    with open(tmp_path / "job.out", "w") as stdout, open(tmp_path / "job.err", "w") as stderr:
        try:
            proc = subprocess.run(["bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo",
                                   "trainer.total_epochs=1"], env=env, cwd=tmp_path, stdout=stdout, stderr=stderr,
                                  timeout=600)
        finally:  # `ray start --block` stops its processes when the job ends; this catches any it left
            leftovers = subprocess.run(["pgrep", "-f", ray_tmp], capture_output=True, text=True).stdout.split()
            for pid in leftovers:
                subprocess.run(["kill", pid])
    elapsed = time.monotonic() - began
    proc.stdout, proc.stderr = (tmp_path / "job.out").read_text(), (tmp_path / "job.err").read_text()
    out = proc.stdout + proc.stderr
    print(f"\n[real Ray {ray.__version__}] sbatch -> driver: {elapsed:.1f} s\n{out[-3000:]}")
    assert proc.returncode == 0, out
    assert "token authentication (per job)" in proc.stdout
    match = re.search(r"DRIVER connected in [0-9.]+s to (\S+): (\{.*\}) args=(\[.*\])", proc.stdout)
    assert match, out
    host, port = match.group(1).rsplit(":", 1)
    assert not host.startswith("127.") and port == env["VERL_HADW_RAY_PORT"]
    resources = ast.literal_eval(match.group(2))
    assert resources["GPU"] == 1.0 and resources["CPU"] == 1.0
    assert ast.literal_eval(match.group(3)) == ["hadw_t1_qwen3_4b_grpo", "trainer.total_epochs=1",
                                                "trainer.nnodes=1", "trainer.n_gpus_per_node=1"]
    assert "InvalidAuthToken" not in out and leftovers == []
    shutil.rmtree(ray_tmp, ignore_errors=True)  # kept when the test fails: Ray's logs are in it

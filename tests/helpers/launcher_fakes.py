"""A fake Slurm + Ray environment for the launchers' tests: PATH shims for srun / scontrol / sbatch / squeue record
every call, so the generated commands can be checked for one and two nodes without a cluster. Ray must be the job
interpreter's (``$PY -m ray.scripts.scripts``): the launchers run a fake interpreter whose ray module records the
calls, and a ``ray`` on PATH records a WRONG call (tests/ has no __init__.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT

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
    exit "${FAKE_MAIN_STATUS:-0}" ;;
esac
"""


# the job's interpreter: its ray module records `start` / `status`; main_ppo run directly (train.sh without a
# launch prefix) is recorded and not run; everything else is the real Python
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
if [[ "$1 $2" == "-m verl.trainer.main_ppo" ]]; then
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


def fake_cluster(tmp_path):
    """The body of each test file's ``fake`` fixture: ``run(*cmd)`` in the fake environment, ``run.calls(prefix)``
    the recorded calls; after the test, no launcher may have run the ``ray`` on PATH."""
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


def checkpoint(ckpt: Path, step: int, params_mb: int = 1) -> None:
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


def log_validation(run_dir: Path, steps: list[int]) -> None:
    """What verl's file logger writes: one json line per step; validation steps carry val-core metrics."""
    (run_dir / "metrics").mkdir(parents=True, exist_ok=True)
    with open(run_dir / "metrics" / "20260101-000000.jsonl", "w") as f:
        for step in range(1, max(steps) + 1):
            data = {"actor/pg_loss": 0.1}
            if step in steps:
                data["val-core/math500/acc/mean@1"] = 0.5
            f.write(json.dumps({"step": step, "data": data}) + "\n")


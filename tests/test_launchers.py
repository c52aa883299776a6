"""scripts/train.sh, scripts/slurm/train.sbatch and scripts/reproduce_*.sh in a fake Slurm + Ray environment:
PATH shims for srun / scontrol / sbatch record every call, so the generated commands can be checked for one and
two nodes without a cluster. Ray must be the job interpreter's (``$PY -m ray.scripts.scripts``): the launchers
run a fake interpreter whose ray module records the calls, and a ``ray`` on PATH records a WRONG call."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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
case " ${args[*]} " in
  " hostname "*) echo "${FAKE_HEAD_IP:-10.0.0.1}" ;;
  *" ray.scripts.scripts start "*) exec "${args[@]}" ;;  # `ray start --block` on a node: the interpreter's Ray
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
# the job's interpreter: its ray module records `start` / `status`; main_ppo run directly (train.sh without a
# launch prefix) is recorded and not run unless FAKE_EXEC_MAIN; everything else is the real Python
PYTHON = r"""#!/usr/bin/env bash
if [[ "$1 $2" == "-m ray.scripts.scripts" ]]; then
  shift 2
  echo "pyray $*" >>"$FAKE_LOG"
  if [[ $1 == status ]]; then  # GPUs appear once every node's `ray start` has run
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
    for name, text in (("srun", SRUN), ("ray", WRONG_RAY), ("scontrol", SCONTROL), ("sbatch", SBATCH)):
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
                           "--config-name=hadw_t1_qwen3_4b_grpo_hadw"]
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
             "--num-cpus=16 --num-gpus=8 --block | RAY_ADDRESS="]
    lines += [f"{step} -w node{i} {py} -m ray.scripts.scripts start --address=10.0.0.1:6379 --num-cpus=16 "
              "--num-gpus=8 --block | RAY_ADDRESS=" for i in range(2, nodes + 1)]
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
        '#!/usr/bin/env bash\necho "WRONG python3 on PATH: $*" >>"$FAKE_LOG"; exit 1\n'
    )
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

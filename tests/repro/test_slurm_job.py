"""scripts/slurm/train.sbatch in a fake Slurm + Ray environment (tests/helpers/launcher_fakes.py): Ray on every node
from the job's interpreter, then main_ppo on the head; the allocation, the requeue near the time limit, the evaluation
pass, per-job token auth, the head address, a Ray step that dies."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from launcher_fakes import ROOT, checkpoint, fake_cluster

from verl_hadw.repro.compose import compose_run

pytestmark = pytest.mark.slow  # fake-cluster shells: tens of seconds


@pytest.fixture
def fake(tmp_path):
    yield from fake_cluster(tmp_path)


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
    CPUs and GPUs. With two nodes, the recorded command line's overrides compose with Hydra, as main_ppo's would."""
    extra = {"SLURM_JOB_NODELIST": f"node[1-{nodes}]", "FAKE_NODES": " ".join(f"node{i}" for i in range(1, nodes + 1))}
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
    if nodes == 2:  # the generated overrides compose on the run's config, as verl's Hydra app composes them
        config = compose_run("hadw_t1_qwen3_4b_grpo_hadw", words[11:])
        assert config.trainer.nnodes == 2 and config.trainer.n_gpus_per_node == 8
        assert config.ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR == f"{run_dir}/tensorboard"
        assert config.trainer.checkpoint_callback_class == "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"


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
    checkpoint(run_dir / "checkpoints", 30)
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


"""scripts/slurm/train.sbatch with the venv's real Ray on one node (a pass-through srun): the head starts and the
driver gets in with the job's token, even where ~/.ray/auth_token turns Ray's token auth on."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import time

import pytest
from launcher_fakes import REAL_PY, ROOT, SCONTROL
from launches import until_ray_started
from ports import free_port

pytestmark = pytest.mark.slow  # a real Ray cluster


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
        "VERL_HADW_RAY_PORT": str(free_port()), "VERL_HADW_RAY_WAIT": "240",
        # Other Ray clusters on this machine may hold Ray's fixed default ports (the dashboard agent's 52365 among
        # them): every port is a free one. Given ports also spare two of the raylet's waits for the agents' port
        # files (Ray 2.60 aborts after ~15 s per file, which a loaded machine can exceed).
        "VERL_HADW_RAY_START_ARGS": " ".join([
            "--include-dashboard=false", f"--dashboard-port={free_port()}",
            f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}", f"--metrics-export-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            # fewer Python processes competing with the agents' start-up on a loaded machine
            "--include-log-monitor=false", "--disable-usage-stats"]),
    })
    # Ray gives a starting node a fixed 30 s to register (ray/_private/node.py), which a loaded 2-core machine can
    # exceed: that failure of Ray's own start-up, and only it, gets a second job (on a fresh port)
    ports = iter([env["VERL_HADW_RAY_PORT"]])  # then a port free at the second job's start

    def job():
        env["VERL_HADW_RAY_PORT"] = next(ports, None) or str(free_port())
        began = time.monotonic()
        # output to files, not pipes: a Ray process left behind would hold a pipe open and stall the wait
        with open(tmp_path / "job.out", "w") as stdout, open(tmp_path / "job.err", "w") as stderr:
            try:
                proc = subprocess.run(["bash", str(ROOT / "scripts/slurm/train.sbatch"), "hadw_t1_qwen3_4b_grpo",
                                       "trainer.total_epochs=1"], env=env, cwd=tmp_path, stdout=stdout,
                                      stderr=stderr, timeout=600)
            finally:  # `ray start --block` stops its processes when the job ends; this catches any it left
                leftovers = subprocess.run(["pgrep", "-f", ray_tmp], capture_output=True, text=True).stdout.split()
                for pid in leftovers:
                    subprocess.run(["kill", pid])
        proc.stdout, proc.stderr = (tmp_path / "job.out").read_text(), (tmp_path / "job.err").read_text()
        return proc.returncode, proc.stdout + proc.stderr, proc, time.monotonic() - began, leftovers

    _, out, proc, elapsed, leftovers = until_ray_started(job, 2)
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


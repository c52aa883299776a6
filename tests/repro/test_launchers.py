"""scripts/train.sh and scripts/reproduce_*.sh in a fake Slurm + Ray environment (tests/helpers/launcher_fakes.py):
the command train.sh builds, its resume and checkpoint retention, the reproduce scripts' submissions, and the shell
hygiene of every launcher."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from launcher_fakes import ROOT, SBATCH_RUN, checkpoint, fake_cluster, log_validation

pytestmark = pytest.mark.slow  # fake-cluster shells: tens of seconds


@pytest.fixture
def fake(tmp_path):
    yield from fake_cluster(tmp_path)


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
    assert bad.returncode != 0 and "argument --locate: 'hadw_t9_nothing' is not one of dgpo_t1_base" in bad.stderr


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


@pytest.mark.parametrize("logged", [True, False])
def test_train_resume_skips_a_redundant_validation_and_prunes_after_done(fake, logged):
    """A resume from global_step_20 passes trainer.val_before_train=false when step 20's validation is in the
    logs (verl saves before it validates: a job killed in between must validate again), drops the superseded
    global_step_10, and once DONE the run keeps only the final weights (no optimizer state)."""
    run = "hadw_t1_qwen3_4b_grpo"
    run_dir = fake.tmp / "out" / "hadw" / run
    ckpt = run_dir / "checkpoints"
    checkpoint(ckpt, 10)
    checkpoint(ckpt, 20)
    log_validation(run_dir, [5, 10, 15, 20] if logged else [5, 10, 15])
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
        checkpoint(ckpt, step)
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


"""Every launch of verl's real ``main_ppo`` that the test session makes, in one list (``LAUNCHES``).

The tests name the launches they read with ``@pytest.mark.e2e("name", ...)`` and get their results from the
session's stage (``e2e_stage.py``, a process of its own started by conftest.py), which runs them in the background
and writes each one's folder and record; ``load`` turns a record into what the tests read. One launch
carries every check that can read it: the demo's 30-step run is the demo test, the v1 HA-DW checks, the source
of the exact-resume run and (with that run) the smoke verdict's HA-DW checks on a long run; the GPU smoke script's
CPU run trains HA-DW over DGPO in ``separate_async``, saved and resumed, so it is also that mode's check (the anchor
once a step over its K estimator calls, across the resume) and DGPO's as HA-DW's base; ``colocate_dgpo`` trains DGPO
alone in ``colocate_async``.

The runs use the demo's config at 8 prompts a step (today also the demo's batch), set here so that these tests,
which check plumbing (metrics, anchor files, exact resume), keep their cost if the demo's batch changes.

A resumed run starts from a copy of the uninterrupted run's checkpoint ``global_step_K`` (verl's files, the
anchor file or the legacy snapshot of step K, ``latest_checkpointed_iteration.txt``), as after a job killed right
after it saved step K. Running the first K steps a second time would only reproduce that checkpoint.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from e2e_stage import RAY_STARTED, Context, Launch
from repo_paths import HELPERS, ROOT, TESTS

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.launch import parse_steps, run, stream
from verl_hadw.toy.modes import requested_mode
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR

PROMPTS = 8  # prompts per step in these runs
LEGACY = ["trainer.use_v1=false", "trainer.save_freq=2"]
DEMO_STEPS, DEMO_RESUME_FROM, DEMO_RESUMED = 30, 15, 3  # the demo saves at 15; the resumed run trains 16-18
STRAIGHT, HALF = 3, 2  # legacy runs: 3 steps, checkpoints at 2 and 3 (verl saves the last), resumed from 2
SMOKE_STEPS, SMOKE_RESUME_STEPS = 2, 3  # the smoke launch: steps 1-2 saved at 2, then resumed to 3
SWIFT_OLDEST, SWIFT_NEWEST = "4.3.0", "4.6.0"  # the ends of SWIFT_RANGE (test_swift_environment.py checks them)
SWIFT_ENV = HELPERS / "swift_environment.py"
AXOLOTL = "0.19.0"  # the Axolotl release the adapter is proven on (test_axolotl_environment.py checks it)
LAUNCH_TIMEOUT = 1800  # seconds: a hung launch is killed (the slowest takes about 4 min here)


def small_batch(overrides) -> list[str]:
    """8 prompts a step; one mini-batch of them, except in separate_async, where the demo launcher splits the step
    into its ``parameter_sync_step`` mini-batches (``verl_hadw.toy.modes``)."""
    batch = [f"data.train_batch_size={PROMPTS}"]
    if requested_mode(list(overrides)) != "separate_async":
        batch.append(f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}")
    return batch


def failed_to_start(code: int, log: str) -> bool:
    """The run died of the machine, not of what it tests: Ray's node never came up (it gives its raylet a fixed 30 s,
    which a loaded machine can miss), or a port verl picked as free was taken before its process group bound it
    (verl finds a free port, then binds it later; a launch running beside it can take it in between)."""
    ray_signs = ("timed out during startup", "Failed to get node info")
    ray_down = RAY_STARTED not in log and any(sign in log for sign in ray_signs)
    return code != 0 and (ray_down or "EADDRINUSE" in log)


def until_ray_started(run_once, attempts: int):
    """``run_once()`` -> (exit code, log, ...) again while it ``failed_to_start``, at most ``attempts`` times: these
    tests are about what happens once it has."""
    for attempt in range(1, attempts + 1):
        result = run_once()
        if not failed_to_start(result[0], result[1]):
            break
        print(f"main_ppo did not start (attempt {attempt}/{attempts}); trying again", flush=True)
        time.sleep(10 * attempt)
    return result


@dataclass
class Run:
    """A finished ``main_ppo`` launch: its exit code, verl's console log, the steps it logged, its folder."""

    code: int
    log: str
    steps: dict
    out: Path
    stdout: str = ""


def text_file(ctx: Context, name: str, suffix: str, text: str) -> str:
    path = ctx.root / f"{name}.{suffix}"
    path.write_text(text)
    return str(path)


def run_record(ctx: Context, name: str, code: int, log: str, out: Path, stdout: str = "") -> dict:
    """What the stage writes for a ``Run``: the texts go to files beside the record."""
    return {"kind": "run", "code": code, "log": text_file(ctx, name, "log", log), "out": str(out),
            "stdout": text_file(ctx, name, "stdout", stdout)}


def load(result: dict):
    """The object a test reads, from a launch's record (``e2e_stage.py``)."""
    kind, fields = result["kind"], {k: v for k, v in result.items() if k != "kind"}
    if kind == "run":
        log = Path(fields["log"]).read_text()
        return Run(fields["code"], log, parse_steps(log), Path(fields["out"]), Path(fields["stdout"]).read_text())
    if kind == "smoke":
        return SmokeRun(fields["code"], Path(fields["output"]).read_text(), Path(fields["smoke"]))
    if kind == "study":
        return StudyRun(fields["code"], Path(fields["output"]).read_text(), Path(fields["out"]), Path(fields["docs"]))
    if kind == "command":
        return CommandRun(fields["code"], Path(fields["output"]).read_text(), fields["seconds"])
    raise ValueError(f"unknown launch record kind {kind!r}")


def main_ppo(ctx: Context, name: str, *overrides, expect_ok=True, experiment=None, attempts=3, small=True,
             assets=None, env=None) -> dict:
    """One ``main_ppo`` run with checkpoints in ``<root>/<name>``; tries again if Ray did not start. ``small=False``
    keeps the demo's own batch (a run resumed from the demo's checkpoint); ``env``: variables on top of the run's
    environment (verl 0.9.0's ``PYTHONPATH``)."""
    workdir = ctx.workdir(name)
    batch = small_batch(overrides) if small else []

    def run_once():
        gate = ctx.gate.enter()
        try:
            code, log = run(
                assets or ctx.assets,
                [f"trainer.experiment_name={experiment or name}", f"trainer.default_local_dir={workdir}", *batch,
                 *overrides],
                cwd=str(workdir), on_line=gate, timeout=LAUNCH_TIMEOUT, env=env,
            )
        finally:
            gate.release()
        return code, log

    code, log = until_ray_started(run_once, attempts)
    record = run_record(ctx, name, code, log, workdir)
    if expect_ok:
        assert code == 0, f"{name}: main_ppo exit {code}\n{log[-5000:]}"
    return record


def checkpoint_copy(source: Path, target: Path, step: int) -> None:
    """``target`` holds only what the checkpoint folder ``source`` had on disk right after it saved ``step``."""
    shutil.copytree(source / f"global_step_{step}", target / f"global_step_{step}")
    (target / "latest_checkpointed_iteration.txt").write_text(str(step))
    snapshot = source / SNAPSHOT_DIR / f"step_{step}.json"  # the legacy trainer's anchor, beside the checkpoints
    if snapshot.exists():
        (target / SNAPSHOT_DIR).mkdir()
        shutil.copy2(snapshot, target / SNAPSHOT_DIR / snapshot.name)
    else:
        assert (target / f"global_step_{step}" / STATE_FILE).exists()  # the v1 trainer's anchor file


def subprocess_lines(ctx: Context, cmd: list[str], cwd: Path, env=None, timeout: float = LAUNCH_TIMEOUT):
    """Run ``cmd`` through the Ray start gate, returning (exit code, stdout + stderr)."""
    gate = ctx.gate.enter()
    try:
        return stream(cmd, str(cwd), env, on_line=gate, timeout=timeout)
    finally:
        gate.release()


# ------------------------------------------------------------------------------------------ the launches
def demo(ctx: Context) -> dict:
    """``python -m verl_hadw.toy.launch --demo out``: what ``scripts/demo_cpu.sh`` runs once installed (30 steps,
    checkpoints at 15 and 30, the PNG)."""
    out = ctx.workdir("demo")
    cmd = [sys.executable, "-m", "verl_hadw.toy.launch", "--assets", ctx.assets, "--demo", str(out)]

    def run_once():
        code, stdout = subprocess_lines(ctx, cmd, out)
        log = (out / "main_ppo.log").read_text() if (out / "main_ppo.log").exists() else ""
        return code, log, stdout

    code, log, stdout = until_ray_started(run_once, 3)
    record = run_record(ctx, "demo", code, log, out, stdout)
    assert code == 0, stdout[-8000:]
    return record


def demo_resumed(ctx: Context) -> dict:
    """Resumed from the demo's step-15 checkpoint, to step 18 (the demo's own batch)."""
    checkpoint_copy(Path(ctx.result("demo")["out"]) / "checkpoints", ctx.workdir("demo_resumed"), DEMO_RESUME_FROM)
    return main_ppo(ctx, "demo_resumed", f"trainer.total_training_steps={DEMO_RESUME_FROM + DEMO_RESUMED}",
                    f"trainer.save_freq={DEMO_RESUME_FROM}", "trainer.resume_mode=auto", experiment="demo",
                    small=False)


def refused(ctx: Context) -> dict:
    """Two start-up problems in one launch: a typo and HA-DW with dynamic sampling; the start-up check (the demo
    config's Hydra callback) reports both in main_ppo's own process, before Ray starts."""
    return main_ppo(ctx, "refused", "+algorithm.hadw.lamda_scale=1.3", "algorithm.filter_groups.enable=true",
                    "algorithm.filter_groups.metric=acc", expect_ok=False, attempts=1)


def legacy_straight(ctx: Context) -> dict:
    """The uninterrupted legacy run: 3 steps, checkpoints (and anchor snapshots) at steps 2 and 3."""
    return main_ppo(ctx, "legacy_straight", *LEGACY, f"trainer.total_training_steps={STRAIGHT}")


def legacy_resumed(ctx: Context) -> dict:
    """Resumed from the uninterrupted legacy run's step-2 checkpoint and anchor snapshot."""
    checkpoint_copy(Path(ctx.result("legacy_straight")["out"]), ctx.workdir("legacy_resumed"), HALF)
    return main_ppo(ctx, "legacy_resumed", *LEGACY, f"trainer.total_training_steps={STRAIGHT}",
                    "trainer.resume_mode=auto", experiment="legacy_straight")


# ----------------------------------------------------------------------------------------------- verl 0.9.0
V090_STEPS, V090_SAVE = 3, 2  # 3 steps, a checkpoint at step 2 (and at 3, the last); resumed from 2, trains 3
V090_SITE = "verl090_site"
_V090_LOCK = threading.Lock()


def v090_ready(ctx: Context) -> Path:
    """The overlay's stamp: the verl version a process imported there, written once its checks passed."""
    return ctx.root / f"{V090_SITE}.ok"


def verl090(ctx: Context) -> dict:
    """The environment of verl 0.9.0 runs: ``PYTHONPATH`` starting at ``<root>/verl090_site``, where verl 0.9.0's
    wheel is unpacked without dependencies, so every process of a run (Ray's workers inherit the variable) imports
    verl 0.9.0 instead of this venv's 0.9.1, beside the same dependencies and this checkout. Built once per stage,
    under a lock (launches run two at a time). Refused unless 0.9.0 is what a process then imports and ``pip check``
    finds every requirement of verl 0.9.0 met here (0.9.0 and 0.9.1 declare the same ones)."""
    import subprocess

    site = ctx.root / V090_SITE
    ready = v090_ready(ctx)  # written once the checks passed: a launch never uses an unchecked overlay
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    with _V090_LOCK:
        if not ready.exists():
            pip = [sys.executable, "-m", "pip"]
            install = subprocess.run([*pip, "install", "-q", "--upgrade", "--no-deps", "--target", str(site),
                                      "verl==0.9.0"], capture_output=True, text=True)  # compiled (.pyc) by pip
            if install.returncode:
                raise RuntimeError(f"verl 0.9.0 overlay in {site}: pip install failed\n{install.stderr[-3000:]}")
            both = {**os.environ, **env}
            check = subprocess.run([*pip, "check"], env=both, capture_output=True, text=True)
            probe = subprocess.run([sys.executable, "-c", "import verl; print(verl.__version__)"], env=both,
                                   capture_output=True, text=True)
            if check.returncode or probe.stdout.strip() != "0.9.0":
                raise RuntimeError(f"verl 0.9.0 overlay in {site}: pip check says {check.stdout}{check.stderr}; a "
                                   f"process imports verl {probe.stdout.strip() or probe.stderr[-2000:]}")
            ready.write_text(probe.stdout)
    return env


def v090_straight(ctx: Context) -> dict:
    """verl 0.9.0, v1 trainer, HA-DW (the demo config, which names the checkpoint callback 0.9.0 ignores): 3 steps,
    checkpoints (and anchor snapshots) at steps 2 and 3."""
    return main_ppo(ctx, "v090_straight", f"trainer.total_training_steps={V090_STEPS}",
                    f"trainer.save_freq={V090_SAVE}", env=verl090(ctx))


def v090_resumed(ctx: Context) -> dict:
    """verl 0.9.0: resumed from a copy of ``v090_straight``'s step-2 checkpoint and anchor snapshot; trains step 3."""
    checkpoint_copy(Path(ctx.result("v090_straight")["out"]), ctx.workdir("v090_resumed"), V090_SAVE)
    return main_ppo(ctx, "v090_resumed", f"trainer.total_training_steps={V090_STEPS}",
                    f"trainer.save_freq={V090_SAVE}", "trainer.resume_mode=auto", experiment="v090_straight",
                    env=verl090(ctx))


GDPO_DGPO_KEYS = ["algorithm.adv_estimator=gdpo", "+algorithm.dgpo.temperature=2.0", "trainer.total_training_steps=1"]
# what the start-up check and the checkpoint callback say of it (test_verl090_e2e.py, by_hand_e2e.py)
GDPO_TYPO = ("algorithm.adv_estimator=gdpo with algorithm.dgpo.temperature set: did you mean "
             "algorithm.adv_estimator=dgpo")


def v090_gdpo_dgpo_keys(ctx: Context) -> dict:
    """verl 0.9.0 without any start-up check (no checkpoint callback can load; the demo config's Hydra start-up check
    removed): ``gdpo`` with an ``algorithm.dgpo`` option is verl's gdpo, untouched: its own assertion stops the first
    advantage."""
    return main_ppo(ctx, "v090_gdpo_dgpo_keys", *GDPO_DGPO_KEYS, "~hydra.callbacks.verl_hadw", expect_ok=False,
                    env=verl090(ctx))


def v091_gdpo_dgpo_keys_callback(ctx: Context) -> dict:
    """verl 0.9.1 with the checkpoint callback but without the Hydra start-up check: it stops where verl builds
    the callback, in its driver, before any worker starts."""
    return main_ppo(ctx, "v091_gdpo_dgpo_keys_callback", *GDPO_DGPO_KEYS, "~hydra.callbacks.verl_hadw", expect_ok=False)


def v091_gdpo_dgpo_keys(ctx: Context) -> dict:
    """verl 0.9.1 with no start-up check at all (no callback, no Hydra check): verl's gdpo, untouched, stops the
    first advantage with its own assertion."""
    return main_ppo(ctx, "v091_gdpo_dgpo_keys", *GDPO_DGPO_KEYS, "~hydra.callbacks.verl_hadw",
                    "trainer.checkpoint_callback_class=null", expect_ok=False)


def v090_startup_check(ctx: Context) -> dict:
    """verl 0.9.0 with the demo config's Hydra start-up check: the same config stops in main_ppo's own process, before
    Ray starts."""
    return main_ppo(ctx, "v090_startup_check", *GDPO_DGPO_KEYS, expect_ok=False, attempts=1, env=verl090(ctx))


# The verl adapter's own tests (CONTRIBUTING.md, "Where a change goes"), and those of what differs between verl 0.9.0
# and 0.9.1 (the version check, the gdpo guard, dynamic sampling, the snapshots back-end 0.9.0's v1 trainer uses)
VERL_ADAPTER_TESTS = ("test_estimators.py", "test_input_checks.py", "test_verl_integration.py", "test_parse_once.py",
                      "test_verl_versions.py", "test_gdpo_with_dgpo_options.py", "test_dynamic_sampling.py",
                      "test_legacy_resume.py")
# not run on the overlay: a venv of its own with verl 0.8.0, whichever verl runs the test
NOT_ON_V090 = "test_verl_versions.py::test_real_verl_0_8_0_is_refused_where_a_user_meets_the_plugin"


def v090_adapter_tests(ctx: Context) -> dict:
    """verl 0.9.0: ``VERL_ADAPTER_TESTS`` in a pytest of their own on the overlay, but the tests of verl 0.9.1's
    checkpoint hook (marker ``verl091``: checkpoint_files.py, which tests only the hook's files, is not listed)."""
    import subprocess

    workdir = ctx.workdir("v090_adapter_tests")
    began = time.monotonic()
    env = {**os.environ, **verl090(ctx)}
    imported = v090_ready(ctx).read_text().strip()  # the verl a process imports there, as verl090 probed it
    argv = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
            str(ROOT / "pytest.ini"), "--basetemp", str(workdir / "pytest"), "-m", "not verl091", "--deselect",
            f"tests/verl/{NOT_ON_V090}", *(str(TESTS / "verl" / name) for name in VERL_ADAPTER_TESTS)]
    # in the launch's folder, as every launch, so that the stage's meter counts its core-seconds
    proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=1200)
    output = f"[v090 adapter tests] verl {imported}\n{proc.stdout}{proc.stderr}"
    return {"kind": "command", "code": proc.returncode, "seconds": round(time.monotonic() - began, 1),
            "output": text_file(ctx, "v090_adapter_tests", "stdout", output)}


# The smoke launch is also the separate_async launch: HA-DW over DGPO (the async runs' DGPO checks ride with HA-DW's),
# each step split into SEPARATE_SYNC_STEPS estimator calls, saved at step 2 and resumed to step 3 (verl restores its
# in-flight prompts from TransferQueue). Its mini-batches: the launcher's, as a user of --cpu gets them.
SMOKE_MODE = "separate_async"
ASYNC_BASE = "+algorithm.hadw.base=dgpo"
SMOKE_OVERRIDES = [f"trainer.v1.trainer_mode={SMOKE_MODE}", ASYNC_BASE]
# DGPO alone, in verl's colocate_async mode: its own v1 check (no anchor, the estimator recorded in each checkpoint)
COLOCATE_DGPO = ["algorithm.adv_estimator=dgpo", "trainer.v1.trainer_mode=colocate_async",
                 f"trainer.total_training_steps={HALF}", f"trainer.save_freq={HALF}"]


def colocate_dgpo(ctx: Context) -> dict:
    """DGPO alone in ``colocate_async``: 2 steps, a checkpoint at step 2."""
    return main_ppo(ctx, "colocate_dgpo", *COLOCATE_DGPO)


@dataclass
class SmokeRun:
    code: int
    output: str
    smoke: Path  # VERL_HADW_SMOKE_DIR: train.log, resume.log, verdict.txt, checkpoints/


def smoke(ctx: Context) -> dict:
    """``bash scripts/gpu_smoke.sh demo --cpu`` with ``SMOKE_OVERRIDES`` (HA-DW over DGPO, separate_async): two real
    main_ppo runs (2 steps, saved; resumed to 3), then the verdict."""
    out = ctx.workdir("smoke")
    env = dict(os.environ, VERL_HADW_PYTHON=sys.executable, VERL_HADW_SMOKE_DIR=str(out / "smoke"),
               SMOKE_STEPS=str(SMOKE_STEPS), SMOKE_RESUME_STEPS=str(SMOKE_RESUME_STEPS), SMOKE_BATCH=str(PROMPTS))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("VERL_HADW_CONFIGS", None)
    code, output = subprocess_lines(ctx, ["bash", str(ROOT / "scripts" / "gpu_smoke.sh"), "demo", "--cpu",
                                          *SMOKE_OVERRIDES], out, env=env)
    return {"kind": "smoke", "code": code, "output": text_file(ctx, "smoke", "stdout", output),
            "smoke": str(out / "smoke")}


@dataclass
class StudyRun:
    code: int
    output: str
    out: Path  # the study's run folders
    docs: Path  # --copy-to: the CSVs, summary and plot


def quick_study(ctx: Context) -> dict:
    """``verl-hadw study --quick``: hadw, then grpo at HA-DW's measured Φ × lr, one seed, one step each."""
    work = ctx.workdir("quick_study")
    out, docs = work / "study", work / "docs"
    cmd = [sys.executable, "-m", "verl_hadw.cli", "study", "--quick", "--out", str(out), "--copy-to", str(docs)]
    code, output = subprocess_lines(ctx, cmd, work)
    return {"kind": "study", "code": code, "output": text_file(ctx, "quick_study", "stdout", output),
            "out": str(out), "docs": str(docs)}


# ------------------------------------------------------------------------ commands that mostly wait on pip
@dataclass
class CommandRun:
    code: int
    output: str  # stdout and stderr
    seconds: float


def command(name: str, *argv: str, timeout: float = 2400):
    """A launch that runs ``argv`` in ``<root>/<name>`` (not through Ray's start gate). For the tests that wait on
    pip's downloads and resolver most of their time: in the stage they overlap the other tests instead of holding
    pytest's one process for minutes."""

    def start(ctx: Context) -> dict:
        import subprocess

        began = time.monotonic()
        proc = subprocess.run(list(argv), cwd=ctx.workdir(name), capture_output=True, text=True, timeout=timeout)
        return {"kind": "command", "code": proc.returncode, "seconds": round(time.monotonic() - began, 1),
                "output": text_file(ctx, name, "stdout", proc.stdout + proc.stderr)}

    return start


LAUNCHES: dict[str, Launch] = {
    launch.name: launch
    for launch in [
        Launch("demo", demo, cost=130),
        Launch("demo_resumed", demo_resumed, after="demo", cost=45),
        Launch("refused", refused, cost=10),
        Launch("legacy_straight", legacy_straight, cost=50),
        Launch("legacy_resumed", legacy_resumed, after="legacy_straight", cost=45),
        Launch("colocate_dgpo", colocate_dgpo, cost=50),
        Launch("smoke", smoke, cost=130),
        Launch("quick_study", quick_study, cost=110),
        Launch("gpu_resolve", command("gpu_resolve", "bash", str(ROOT / "scripts" / "install_gpu.sh"),
                                      "--resolve-only"), cost=60),
        Launch("trl_env", command("trl_env", sys.executable, str(HELPERS / "trl_environment.py"), "."),
               cost=50),
        Launch("swift_env_newest", command("swift_env_newest", sys.executable, str(SWIFT_ENV), SWIFT_NEWEST, "."),
               cost=120),
        Launch("swift_env_oldest", command("swift_env_oldest", sys.executable, str(SWIFT_ENV), SWIFT_OLDEST, ".",
                                            "--lean"), cost=90),
        Launch("axolotl_env", command("axolotl_env", sys.executable, str(HELPERS / "axolotl_environment.py"), AXOLOTL,
                                      "."), cost=180),
        Launch("v090_straight", v090_straight, cost=60),
        Launch("v090_resumed", v090_resumed, after="v090_straight", cost=45),
        Launch("v090_gdpo_dgpo_keys", v090_gdpo_dgpo_keys, cost=40),
        Launch("v090_startup_check", v090_startup_check, cost=15),
        Launch("v090_adapter_tests", v090_adapter_tests, cost=30),
        Launch("v091_gdpo_dgpo_keys_callback", v091_gdpo_dgpo_keys_callback, cost=20),
        Launch("v091_gdpo_dgpo_keys", v091_gdpo_dgpo_keys, cost=40),
    ]
}

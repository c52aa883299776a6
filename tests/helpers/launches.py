"""verl's real ``main_ppo`` launches that the tests read, as session-scoped fixtures (a pytest plugin, listed in
tests/conftest.py's ``pytest_plugins``).

A test asks for the run it reads by name (``demo_run``, ``smoke_run``, ...): the launch runs once per test process,
for every test that reads it. Under pytest-xdist (``-n 2 --dist loadgroup``) each worker is a test process of its
own, so ``pytest_collection_modifyitems`` gives every test that uses a launch the ``xdist_group`` of its launches (a
launch and the one it resumes from are one group: ``demo_resumed_run`` asks for ``demo_run``) and puts those tests
first, the costliest group first, so that both workers start on a long launch and end together.

One launch carries every check that can read it: the demo's 30-step run is the demo test, the v1 HA-DW checks and the
source of the exact-resume run; the GPU smoke script's CPU run trains HA-DW over DGPO in ``separate_async``, saved and
resumed, so it is also that mode's check and DGPO's as HA-DW's base; ``colocate_dgpo`` trains DGPO alone in
``colocate_async``. The runs use the demo's config at 8 prompts a step, set here so that these tests, which check
plumbing (metrics, anchor files, exact resume), keep their cost if the demo's batch changes. A resumed run starts from
a copy of the uninterrupted run's checkpoint ``global_step_K``, as after a job killed right after it saved step K.

Ray's start-up on a loaded machine: Ray 2.60 gives a new node's raylet a fixed 30 s to register with the GCS
(``raylet_start_wait_time_s = 30``, a constant in ``ray/_private/node.py``; no ``RAY_*`` variable or system config
lengthens it, ``RAY_gcs_server_port_wait_time_s`` covers only the GCS's own port). Two workers starting main_ppo at
once on 2 cores can miss it, and a port verl found free can be taken before it binds it. So every launch here runs
through ``until_ray_started``, which runs it again when it died of that and of nothing else: these tests are about what
happens once Ray has started. Here and nowhere else: the library and a user's demo keep Ray's own behaviour.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from repo_paths import ROOT

RAY_STARTED = "Started a local Ray instance"  # ray.init's log line once the node is up
PROMPTS = 8  # prompts per step in these runs
DEMO_STEPS, DEMO_RESUME_FROM, DEMO_RESUMED = 30, 15, 3  # the demo saves at 15; the resumed run trains 16-18
STRAIGHT, HALF = 3, 2  # 3-step runs: checkpoints at 2 and 3 (verl saves the last), resumed from 2
SMOKE_STEPS, SMOKE_RESUME_STEPS = 2, 3  # the smoke launch: steps 1-2 saved at 2, then resumed to 3
LAUNCH_TIMEOUT = 1800  # seconds: a hung launch is killed (the slowest takes about 3 min here)
LAUNCHES: dict[str, float] = {}  # fixture name -> rough seconds on 2 cores (the costliest group starts first)


def launch(cost: float):
    """A session-scoped fixture that runs a launch; ``cost`` orders the groups (module docstring)."""

    def register(function):
        LAUNCHES[function.__name__] = cost
        return pytest.fixture(scope="session")(function)

    return register


def launch_groups(items) -> dict:
    """item -> (group, cost) for each test that uses a launch: the launches used by one test, and those they ask for,
    are one group (``item.fixturenames`` holds the fixtures a fixture asks for)."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    used = {item: [n for n in item.fixturenames if n in LAUNCHES] for item in items}
    for names in used.values():
        for name in names[1:]:
            parent[root(name)] = root(names[0])
    members: dict[str, set[str]] = {}
    for name in {n for names in used.values() for n in names}:
        members.setdefault(root(name), set()).add(name)
    group = {r: ("+".join(sorted(m)), sum(LAUNCHES[n] for n in m)) for r, m in members.items()}
    return {item: group[root(names[0])] for item, names in used.items() if names}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marker into the test's id
def pytest_collection_modifyitems(config, items):
    groups = launch_groups(items)
    for item in items:
        if item not in groups and (shared := shared_fixture_group(item)):
            groups[item] = (shared, 0.0)
    for item, (name, _) in groups.items():
        item.add_marker(pytest.mark.xdist_group(name))
        if getattr(config.option, "loadgroup", False) and hasattr(item, "_id"):
            # xdist's scheduler reads the group from an "@group" ending of the test's id, which xdist 3.8 writes into
            # item._nodeid; pytest 9.2 reads the id from item._id instead, so without this no test is grouped
            from _pytest.nodeid import coerce_node_id

            item._id = coerce_node_id(f"{item.nodeid}@{name}")
    items.sort(key=lambda item: (0, -groups[item][1], groups[item][0]) if item in groups else (1, 0, ""))


def shared_fixture_group(item) -> str | None:
    """The group of a test that uses a module- or session-scoped fixture of ours (a wheel built, a Ray cluster, a
    run trained once for its module): its module, or the session fixture's name, so that one worker builds it."""
    for name in item.fixturenames:
        defs = getattr(item, "_fixtureinfo", None) and item._fixtureinfo.name2fixturedefs.get(name)
        if not defs or name in LAUNCHES or str(ROOT / "tests") not in str(getattr(defs[-1].func, "__code__", "")):
            continue
        if defs[-1].scope == "session":
            return f"session:{name}"
        if defs[-1].scope == "module":
            return item.nodeid.split("::")[0]
    return None


# ------------------------------------------------------------------------------------------- how a launch runs
def failed_to_start(code: int, log: str) -> bool:
    """The run died of the machine, not of what it tests: Ray's node never came up (after the last Ray that did, for
    a script that starts two), or a port verl picked as free was taken before its process group bound it."""
    since = log.rsplit(RAY_STARTED, 1)[-1]
    ray_down = any(sign in since for sign in ("timed out during startup", "Failed to get node info"))
    return code != 0 and (ray_down or "EADDRINUSE" in log)


def until_ray_started(run_once, attempts: int = 3):
    """``run_once()`` -> (exit code, log, ...) again while it ``failed_to_start``, at most ``attempts`` times."""
    for attempt in range(1, attempts + 1):
        result = run_once()
        if not failed_to_start(result[0], result[1]):
            break
        print(f"Ray did not start (attempt {attempt}/{attempts}); trying again", flush=True)
        time.sleep(10 * attempt)
    return result


@dataclass
class Run:
    """A finished ``main_ppo`` launch: its exit code, verl's console log, its folder, the steps it logged."""

    code: int
    log: str
    out: Path
    stdout: str = ""
    steps: dict = field(init=False)

    def __post_init__(self):
        from verl_hadw.toy.launch import parse_steps

        self.steps = parse_steps(self.log)


@dataclass
class SmokeRun:
    code: int
    output: str
    smoke: Path  # VERL_HADW_SMOKE_DIR: train.log, resume.log, verdict.txt, checkpoints/


@dataclass
class StudyRun:
    code: int
    output: str
    out: Path  # the study's run folders
    docs: Path  # --copy-to: the CSVs, summary and plot


@pytest.fixture(scope="session")
def launch_root(tmp_path_factory) -> Path:
    """The launches' folder: ``<name>/`` each, and the toy assets they share (``assets/``)."""
    from verl_hadw.toy.launch import ensure_assets

    root = tmp_path_factory.mktemp("launches")
    ensure_assets(str(root / "assets"))
    return root


def workdir(root: Path, name: str) -> Path:
    (root / name).mkdir(exist_ok=True)
    return root / name


def command(root: Path, name: str, cmd: list[str], env=None) -> tuple[int, str]:
    """``cmd`` in ``<root>/<name>``: (exit code, stdout and stderr), run again while Ray did not start."""
    from verl_hadw.toy.launch import stream

    return until_ray_started(lambda: stream(cmd, str(workdir(root, name)), env, timeout=LAUNCH_TIMEOUT))


def main_ppo(root: Path, name: str, *overrides, expect_ok=True, experiment=None, small=True) -> Run:
    """One ``main_ppo`` run with checkpoints in ``<root>/<name>``. ``small=False`` keeps the demo's own batch (a run
    resumed from the demo's checkpoint)."""
    from verl_hadw.toy.launch import run
    from verl_hadw.toy.modes import requested_mode

    out = workdir(root, name)
    batch = [f"data.train_batch_size={PROMPTS}"] if small else []
    if small and requested_mode(list(overrides)) != "separate_async":  # there the launcher splits the step
        batch.append(f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}")
    overrides = [f"trainer.experiment_name={experiment or name}", f"trainer.default_local_dir={out}", *batch,
                 *overrides]
    code, log = until_ray_started(lambda: run(str(root / "assets"), overrides, cwd=str(out), timeout=LAUNCH_TIMEOUT))
    (out / "main_ppo.log").write_text(log)  # where a reader that failed can look
    assert code == 0 or not expect_ok, f"{name}: main_ppo exit {code}\n{log[-5000:]}"
    return Run(code, log, out)


def checkpoint_copy(source: Path, target: Path, step: int) -> None:
    """``target`` holds only what the checkpoint folder ``source`` had on disk right after it saved ``step``."""
    from verl_hadw.core.anchor.file_format import STATE_FILE
    from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR

    shutil.copytree(source / f"global_step_{step}", target / f"global_step_{step}")
    (target / "latest_checkpointed_iteration.txt").write_text(str(step))
    snapshot = source / SNAPSHOT_DIR / f"step_{step}.json"  # verl 0.9.0's or the legacy trainer's, beside them
    if snapshot.exists():
        (target / SNAPSHOT_DIR).mkdir()
        shutil.copy2(snapshot, target / SNAPSHOT_DIR / snapshot.name)
    else:
        assert (target / f"global_step_{step}" / STATE_FILE).exists()  # the v1 trainer's anchor file


# ------------------------------------------------------------------------------------------------ the launches
@launch(cost=130)
def demo_run(launch_root) -> Run:
    """``python -m verl_hadw.toy.launch --demo out``: what ``scripts/demo_cpu.sh`` runs once installed (30 steps,
    checkpoints at 15 and 30, the PNG)."""
    from verl_hadw.toy.launch import stream

    out = workdir(launch_root, "demo")
    cmd = [sys.executable, "-m", "verl_hadw.toy.launch", "--assets", str(launch_root / "assets"), "--demo", str(out)]

    def once():
        code, stdout = stream(cmd, str(out), timeout=LAUNCH_TIMEOUT)
        log = (out / "main_ppo.log").read_text() if (out / "main_ppo.log").exists() else ""
        return code, log, stdout

    code, log, stdout = until_ray_started(once)
    assert code == 0, stdout[-8000:]
    return Run(code, log, out, stdout)


@launch(cost=45)
def demo_resumed_run(launch_root, demo_run) -> Run:
    """Resumed from the demo's step-15 checkpoint, to step 18 (the demo's own batch)."""
    checkpoint_copy(demo_run.out / "checkpoints", workdir(launch_root, "demo_resumed"), DEMO_RESUME_FROM)
    return main_ppo(launch_root, "demo_resumed", f"trainer.total_training_steps={DEMO_RESUME_FROM + DEMO_RESUMED}",
                    f"trainer.save_freq={DEMO_RESUME_FROM}", "trainer.resume_mode=auto", experiment="demo",
                    small=False)


@launch(cost=10)
def refused_run(launch_root) -> Run:
    """Two start-up problems in one launch: a typo and HA-DW with dynamic sampling; the start-up check (the demo
    config's Hydra callback) reports both in main_ppo's own process, before Ray starts."""
    return main_ppo(launch_root, "refused", "+algorithm.hadw.lamda_scale=1.3", "algorithm.filter_groups.enable=true",
                    "algorithm.filter_groups.metric=acc", expect_ok=False)


@launch(cost=50)
def colocate_dgpo_run(launch_root) -> Run:
    """DGPO alone in verl's ``colocate_async``: 2 steps, a checkpoint at step 2 (no anchor, the estimator recorded)."""
    return main_ppo(launch_root, "colocate_dgpo", "algorithm.adv_estimator=dgpo",
                    "trainer.v1.trainer_mode=colocate_async", f"trainer.total_training_steps={HALF}",
                    f"trainer.save_freq={HALF}")


# The smoke launch is also the separate_async launch: HA-DW over DGPO (the async runs' DGPO checks ride with HA-DW's),
# each step split into the launcher's estimator calls, saved at step 2 and resumed to step 3 (verl restores its
# in-flight prompts from TransferQueue). Its mini-batches: the launcher's, as a user of --cpu gets them.
SMOKE_MODE = "separate_async"
SMOKE_OVERRIDES = [f"trainer.v1.trainer_mode={SMOKE_MODE}", "+algorithm.hadw.base=dgpo"]


@launch(cost=130)
def smoke_run(launch_root) -> SmokeRun:
    """``bash scripts/gpu_smoke.sh demo --cpu`` with ``SMOKE_OVERRIDES``: two real main_ppo runs (2 steps, saved;
    resumed to 3), then the verdict."""
    smoke = launch_root / "smoke" / "smoke"
    env = dict(os.environ, VERL_HADW_PYTHON=sys.executable, VERL_HADW_SMOKE_DIR=str(smoke),
               SMOKE_STEPS=str(SMOKE_STEPS), SMOKE_RESUME_STEPS=str(SMOKE_RESUME_STEPS), SMOKE_BATCH=str(PROMPTS))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("VERL_HADW_CONFIGS", None)
    code, output = command(launch_root, "smoke", ["bash", str(ROOT / "scripts" / "gpu_smoke.sh"), "demo", "--cpu",
                                                  *SMOKE_OVERRIDES], env=env)
    return SmokeRun(code, output, smoke)


# ----------------------------------------------------------------------------------------------- verl 0.9.0
# The installed verl's (the verl-0.9.0 nox session's): 3 steps, a checkpoint at step 2 (and at 3, the last); resumed
# from 2, trains step 3.
V090_STEPS, V090_SAVE = STRAIGHT, HALF
GDPO_DGPO_KEYS = ["algorithm.adv_estimator=gdpo", "+algorithm.dgpo.temperature=2.0", "trainer.total_training_steps=1"]
# what the start-up check and the checkpoint callback say of it (test_verl090_e2e.py, by_hand_e2e.py)
GDPO_TYPO = ("algorithm.adv_estimator=gdpo with algorithm.dgpo.temperature set: did you mean "
             "algorithm.adv_estimator=dgpo")


@launch(cost=60)
def v090_straight_run(launch_root) -> Run:
    """v1 trainer, HA-DW (the demo config, which names the checkpoint callback 0.9.0 ignores): 3 steps, checkpoints
    (and anchor snapshots) at steps 2 and 3."""
    return main_ppo(launch_root, "v090_straight", f"trainer.total_training_steps={V090_STEPS}",
                    f"trainer.save_freq={V090_SAVE}")


@launch(cost=45)
def v090_resumed_run(launch_root, v090_straight_run) -> Run:
    """Resumed from a copy of ``v090_straight``'s step-2 checkpoint and anchor snapshot; trains step 3."""
    checkpoint_copy(v090_straight_run.out, workdir(launch_root, "v090_resumed"), V090_SAVE)
    return main_ppo(launch_root, "v090_resumed", f"trainer.total_training_steps={V090_STEPS}",
                    f"trainer.save_freq={V090_SAVE}", "trainer.resume_mode=auto", experiment="v090_straight")


@launch(cost=15)
def v090_startup_check_run(launch_root) -> Run:
    """With the demo config's Hydra start-up check: ``gdpo`` with an ``algorithm.dgpo`` option stops in main_ppo's
    own process, before Ray starts."""
    return main_ppo(launch_root, "v090_startup_check", *GDPO_DGPO_KEYS, expect_ok=False)


# --------------------------------------------------------------------- read by tests/helpers/by_hand_e2e.py only
@launch(cost=40)
def v090_gdpo_dgpo_keys_run(launch_root) -> Run:
    """verl 0.9.0 without any start-up check (no checkpoint callback can load; the Hydra start-up check removed)."""
    return main_ppo(launch_root, "v090_gdpo_dgpo_keys", *GDPO_DGPO_KEYS, "~hydra.callbacks.verl_hadw",
                    expect_ok=False)


@launch(cost=20)
def v091_gdpo_dgpo_keys_callback_run(launch_root) -> Run:
    """verl 0.9.1 with the checkpoint callback but without the Hydra start-up check."""
    return main_ppo(launch_root, "v091_gdpo_dgpo_keys_callback", *GDPO_DGPO_KEYS, "~hydra.callbacks.verl_hadw",
                    expect_ok=False)


@launch(cost=40)
def v091_gdpo_dgpo_keys_run(launch_root) -> Run:
    """verl 0.9.1 with no start-up check at all (no callback, no Hydra check)."""
    return main_ppo(launch_root, "v091_gdpo_dgpo_keys", *GDPO_DGPO_KEYS, "~hydra.callbacks.verl_hadw",
                    "trainer.checkpoint_callback_class=null", expect_ok=False)


LEGACY = ["trainer.use_v1=false", "trainer.save_freq=2"]


@launch(cost=50)
def legacy_straight_run(launch_root) -> Run:
    """The uninterrupted legacy run: 3 steps, checkpoints (and anchor snapshots) at steps 2 and 3."""
    return main_ppo(launch_root, "legacy_straight", *LEGACY, f"trainer.total_training_steps={STRAIGHT}")


@launch(cost=45)
def legacy_resumed_run(launch_root, legacy_straight_run) -> Run:
    """Resumed from the uninterrupted legacy run's step-2 checkpoint and anchor snapshot."""
    checkpoint_copy(legacy_straight_run.out, workdir(launch_root, "legacy_resumed"), HALF)
    return main_ppo(launch_root, "legacy_resumed", *LEGACY, f"trainer.total_training_steps={STRAIGHT}",
                    "trainer.resume_mode=auto", experiment="legacy_straight")


@launch(cost=110)
def quick_study_run(launch_root) -> StudyRun:
    """``verl-hadw study --quick``: hadw, then grpo at HA-DW's measured Φ × lr, one seed, one step each."""
    out, docs = launch_root / "quick_study" / "study", launch_root / "quick_study" / "docs"
    code, output = command(launch_root, "quick_study", [sys.executable, "-m", "verl_hadw.cli", "study", "--quick",
                                                        "--out", str(out), "--copy-to", str(docs)])
    return StudyRun(code, output, out, docs)

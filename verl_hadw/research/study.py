"""The CPU study: GRPO, HA-DW, DGPO, HA-DW over DGPO and a step-size control through verl's own ``main_ppo``.

Every run is the CPU demo's command (``verl_hadw.toy.launch``) with the method's overrides, the study's batch and
learning rate, a ``data.seed`` and verl's validation per tier of the toy task (design and results: docs/study.md).
Resumable: a run lives in ``<out>/runs/<method>/seed<k>/`` and is skipped once its ``DONE`` marker exists.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from verl_hadw.research.study_stats import (
    ALL,
    PHI_METRIC,
    comparisons,
    paired_tests,
    plot_curves,
    summarise,
    summary_markdown,
    train_table,
    val_key,
    val_table,
)
from verl_hadw.toy import TASKS
from verl_hadw.toy.task import TIERS

__all__ = [
    "METHODS", "StudyPlan", "check_methods", "quick_plan", "arith_plan", "base_overrides", "run_one", "run_study",
    "measured_phi", "run_metrics", "load_runs", "write_outputs",
    # the statistics (research.study_stats), re-exported: one import for the study's callers
    "ALL", "PHI_METRIC", "val_key", "val_table", "summarise", "comparisons", "paired_tests", "summary_markdown",
    "plot_curves",
]

METHODS = {  # name -> Hydra overrides on configs/cpu/demo.yaml (grpo_lr_phi's learning rate is added at run time)
    "hadw": ["algorithm.adv_estimator=hadw"],
    "grpo": ["algorithm.adv_estimator=grpo"],
    "dgpo": ["algorithm.adv_estimator=dgpo"],
    "hadw_dgpo": ["algorithm.adv_estimator=hadw", "+algorithm.hadw.base=dgpo"],
    # GRPO at the actor lr times the mean hadw/phi_mean of the hadw runs: is HA-DW's effect only a larger step?
    "grpo_lr_phi": ["algorithm.adv_estimator=grpo"],
}
GRPO_LR_PHI_NEEDS_HADW = "method grpo_lr_phi needs method hadw in the same study (its Φ sets the learning rate)"
ATTEMPTS = 8  # per run, for Ray start-up failures (Ray gives its node 30 s: a loaded machine can miss that)
RAY_STARTED = "Started a local Ray instance"  # ray.init's log line once the node is up


class _StartGate:
    """Lets one run at a time start its Ray node: several starting at once on a loaded machine time out."""

    def __init__(self):
        self.lock = threading.Lock()

    @contextmanager
    def passage(self):
        self.lock.acquire()
        held = [True]

        def release():
            if held[0]:
                held[0] = False
                self.lock.release()

        try:
            yield release
        finally:
            release()


_START_GATE = _StartGate()


@dataclass
class StudyPlan:
    out: Path = Path("runs/study")
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    steps: int = 30
    prompts: int = 16  # prompts a step (x group responses), set here: the study does not follow the demo's
    lr: float = 5e-3  # the actor's learning rate (grpo_lr_phi: times the measured Φ), also the study's own
    test_freq: int = 5
    val_prompts: int = 32  # held-out prompts, a quarter per tier
    val_n: int = 4  # sampled answers per held-out prompt (temperature 1)
    extra: list[str] = field(default_factory=list)  # Hydra overrides for every run
    task: str = "toy"  # toy (random weights) | arith (the pretrained model; configs/cpu/task/arith.yaml on top)
    group: int = 4  # answers a prompt (rollout.n)

    def __post_init__(self):
        self.out = Path(self.out)
        check_methods(self.methods, METHODS)
        if min(self.steps, self.prompts, self.test_freq, self.val_n) < 1 or self.val_prompts < len(TIERS):
            raise ValueError("steps, prompts, test_freq and val_n must be >= 1 and val_prompts >= 4 (one per tier)")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.task not in TASKS or self.group < 2:
            raise ValueError(f"task must be one of {', '.join(TASKS)} and group >= 2, got {self.task!r}, {self.group}")

    @property
    def assets(self) -> Path:
        return self.out / "assets"

    def run_dir(self, method: str, seed: int) -> Path:
        return self.out / "runs" / method / f"seed{seed}"

    def ordered_methods(self) -> list[str]:
        return [m for m in METHODS if m in self.methods]  # hadw before grpo_lr_phi


def check_methods(methods, valid) -> None:
    """A study's methods: each one of ``valid``, and ``grpo_lr_phi`` only beside ``hadw`` (both studies: verl's and
    TRL's, ``research.trl_study``)."""
    unknown = [m for m in methods if m not in valid]
    if unknown:
        raise ValueError(f"unknown study method(s) {unknown}; valid: {list(valid)}")
    if "grpo_lr_phi" in methods and "hadw" not in methods:
        raise ValueError(GRPO_LR_PHI_NEEDS_HADW)


def quick_plan(out: Path) -> StudyPlan:
    """Two methods, one seed, one step of 8 prompts: checks the pipeline (the test suite's mode), not the numbers."""
    return StudyPlan(out=out, methods=["hadw", "grpo_lr_phi"], seeds=[1], steps=1, prompts=8, test_freq=1,
                     val_prompts=8, val_n=2)


def arith_plan(out: Path = Path("runs/study_arith")) -> StudyPlan:
    """The arithmetic task through verl, in the TRL arithmetic study's design (``trl_study.arith_plan``): 16 prompts
    × 8 answers, lr 3e-4, 150 steps, each tier's 100 held-out problems × 4 answers (every 30 steps: the final
    accuracy is what is compared); a few seeds of ``grpo`` and ``hadw`` to set beside that study's spread
    (docs/does-it-help.md)."""
    return StudyPlan(out=Path(out), methods=["hadw", "grpo"], seeds=[1, 2, 3], steps=150, prompts=16, lr=3e-4,
                     test_freq=30, val_prompts=400, val_n=4, task="arith", group=8)


def base_overrides(plan: StudyPlan, method: str, seed: int, lr: float | None = None) -> list[str]:
    """The run's Hydra overrides on configs/cpu/demo.yaml; ``lr`` defaults to the plan's."""
    run_dir = plan.run_dir(method, seed).resolve()
    return [
        *METHODS[method],
        f"data.seed={seed}",
        f"trainer.total_training_steps={plan.steps}",
        f"data.train_batch_size={plan.prompts}",
        f"actor_rollout_ref.rollout.n={plan.group}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={plan.prompts}",  # one mini-batch a step, as in the demo
        f"actor_rollout_ref.actor.optim.lr={plan.lr if lr is None else lr:.6g}",
        f"trainer.test_freq={plan.test_freq}",
        "trainer.val_before_train=true",
        "trainer.save_freq=-1",
        f"trainer.experiment_name=study_{method}_seed{seed}",  # also the HA-DW anchor's state key
        f"trainer.default_local_dir={run_dir / 'checkpoints'}",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
        f"actor_rollout_ref.rollout.val_kwargs.n={plan.val_n}",
        *plan.extra,
    ]


def measured_phi(plan: StudyPlan) -> float:
    """Mean ``hadw/phi_mean`` over every step of every finished ``hadw`` run of the plan's seeds."""
    values = [
        step[PHI_METRIC]
        for seed in plan.seeds
        for step in run_metrics(plan.run_dir("hadw", seed)).values()
        if PHI_METRIC in step
    ]
    if not values:
        raise RuntimeError("grpo_lr_phi needs finished hadw runs with hadw/phi_mean in their logs")
    return float(np.mean(values))


def run_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """{step: stable metrics} of a finished run (``DONE``); {} for one that has not finished."""
    if not (run_dir / "DONE").exists():
        return {}
    return {int(k): v for k, v in json.loads((run_dir / "metrics.json").read_text()).items()}


def run_one(plan: StudyPlan, method: str, seed: int, log=print) -> bool:
    """Run one (method, seed) unless its ``DONE`` marker exists; True if it ran."""
    from verl_hadw.toy.launch import parse_steps, run, stable_metrics

    run_dir = plan.run_dir(method, seed)
    if (run_dir / "DONE").exists():
        return False
    run_dir.mkdir(parents=True, exist_ok=True)
    lr = plan.lr
    if method == "grpo_lr_phi":
        phi = measured_phi(plan)
        lr = plan.lr * phi
        (run_dir / "phi.json").write_text(json.dumps({"study_lr": plan.lr, "phi": phi, "lr": lr}))
    overrides = base_overrides(plan, method, seed, lr=lr)
    (run_dir / "overrides.json").write_text(json.dumps(overrides, indent=1))
    start = time.time()
    for attempt in range(1, ATTEMPTS + 1):
        with _START_GATE.passage() as started:  # one run at a time through Ray's start-up
            code, output = run(str(plan.assets), overrides, test_rows=plan.val_prompts, task=plan.task,
                               on_line=lambda line: started() if RAY_STARTED in line else None)
        (run_dir / "main_ppo.log").write_text(output)
        if code == 0:
            break
        if RAY_STARTED in output and "timed out during startup" not in output:
            raise RuntimeError(f"study run {method} seed {seed} failed (exit {code}); log: {run_dir / 'main_ppo.log'}")
        log(f"study: {method} seed {seed}: Ray did not start (attempt {attempt}/{ATTEMPTS}); retrying")
        time.sleep(10 * attempt)
    else:
        raise RuntimeError(f"study run {method} seed {seed}: Ray failed to start {ATTEMPTS} times; {run_dir}")
    steps = {step: stable_metrics(values) for step, values in parse_steps(output).items()}
    (run_dir / "metrics.json").write_text(json.dumps(steps))
    (run_dir / "DONE").write_text(f"{time.time() - start:.0f} s\n")
    log(f"study: {method} seed {seed} done in {time.time() - start:.0f} s")
    return True


def run_study(plan: StudyPlan, log=print, workers: int = 1) -> list[Path]:
    """Run every missing (method, seed) of the plan, ``workers`` at a time, then write the outputs.

    A run pins torch to one thread (``verl_hadw.cpu.platform``), so two at a time use two cores. A
    ``grpo_lr_phi`` run waits for every ``hadw`` run: its learning rate is their mean Φ times the demo's.
    """
    from concurrent.futures import ThreadPoolExecutor

    from verl_hadw.toy.launch import ensure_assets

    ensure_assets(str(plan.assets), plan.val_prompts, plan.task)  # once, before runs start in parallel
    # hadw first, then method by method in the order of the main questions (HA-DW vs GRPO, vs GRPO at HA-DW's
    # step size, DGPO), so a study cut short still answers the first ones over every seed
    order = [m for m in ("hadw", "grpo", "grpo_lr_phi", "dgpo", "hadw_dgpo") if m in plan.methods]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        hadw = [pool.submit(run_one, plan, "hadw", s, log) for s in plan.seeds if "hadw" in order]

        def job(method, seed):
            if method == "grpo_lr_phi":  # its learning rate needs every hadw run's Φ
                for future in hadw:
                    future.result()
            return run_one(plan, method, seed, log)

        rest = [pool.submit(job, m, s) for m in order if m != "hadw" for s in plan.seeds]
        for future in hadw + rest:
            future.result()
    return write_outputs(plan)


def load_runs(plan: StudyPlan) -> dict[tuple[str, int], dict[int, dict[str, float]]]:
    """{(method, seed): per-step metrics} of the plan's finished runs."""
    runs = {}
    for method in plan.ordered_methods():
        for seed in plan.seeds:
            metrics = run_metrics(plan.run_dir(method, seed))
            if metrics:
                runs[method, seed] = metrics
    return runs


def _write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        if rows:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return path


def write_outputs(plan: StudyPlan) -> list[Path]:
    """``val_accuracy.csv``, ``train.csv``, ``summary.md`` and ``curves.png`` from the finished runs."""
    runs = load_runs(plan)
    rows = val_table(plan, runs)
    methods = [m for m in plan.ordered_methods() if any(k[0] == m for k in runs)]
    phi = measured_phi(plan) if any(k[0] == "hadw" for k in runs) else None
    paths = [_write_csv(plan.out / "val_accuracy.csv", rows), _write_csv(plan.out / "train.csv", train_table(runs))]
    text = summary_markdown(summarise(rows, methods), paired_tests(rows, methods), phi)
    (plan.out / "summary.md").write_text(text)
    paths += [plan.out / "summary.md", plot_curves(rows, methods, plan.out / "curves.png")]
    return paths


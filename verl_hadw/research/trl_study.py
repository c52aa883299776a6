"""The study through TRL on CPU: does HA-DW or DGPO train better than GRPO? (``verl-hadw study --trainer trl``)

One process per (method, seed, learning rate) runs ``research.trl_study_run``, ``workers`` at a time; a run whose
``DONE`` exists is never rerun. The methods: ``METHODS``; the design: ``TrlStudyPlan`` (docs/does-it-help.md).
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from verl_hadw.research.study import check_methods
from verl_hadw.research.study_stats import ALL  # the tier column's value for all four tiers (accuracy) or the batch
from verl_hadw.research.trl_study_stats import (
    ARITH_FAMILIES,
    ARITH_METHODS,
    FAMILIES,
    HARD_TIERS,
    METHODS,
    TOY_METHODS,
    TWO_HARDEST,
    plot_advantage_share,
    plot_curves,
    plot_mechanism,
    summary_markdown,
)
from verl_hadw.toy.task import TIERS

__all__ = ["METHODS", "TABLE_FILES", "ARITH_TABLE_FILES", "TrlStudyPlan", "arith_plan", "quick_plan",
           "run_one", "run_study", "measured_phi",
           "load_tables", "write_outputs", "ALL"]

# the per-step tables are large (the advantage shares: 4 rows a step of each of 480 runs), so they are gzipped
TABLE_FILES = {"val_accuracy": "val_accuracy.csv", "train_reward": "train_reward.csv.gz", "phi": "phi.csv.gz",
               "advantage_share": "advantage_share.csv.gz"}
# the arith study's two more: within-group balance Σ A⁺ / Σ|A⁻| per tier, and the anchor beside the batch accuracy
ARITH_TABLE_FILES = {**TABLE_FILES, "balance": "advantage_balance.csv.gz", "anchor": "anchor.csv.gz"}
ORDER = ("hadw", "grpo", "grpo_lr_phi", "hadw_authors", "dgpo", "hadw_dgpo")  # a study cut short answers the first


@dataclass
class TrlStudyPlan:
    """What the study runs. The defaults are the design, fixed before the runs (see the module's docstring)."""

    out: Path = Path("outputs/study_trl")
    methods: list[str] = field(default_factory=lambda: list(TOY_METHODS))
    seeds: list[int] = field(default_factory=lambda: list(range(1, 49)))
    # GRPO learns fast / slowly: fixed by a GRPO-only pilot before any comparison (docs/study/trl_pilot/; at 1e-2 and
    # above GRPO falls into the task's "always a vowel" optimum, exactly 0.5 held-out accuracy, within 30 steps)
    lrs: list[float] = field(default_factory=lambda: [3e-3, 1e-3])
    steps: int = 150
    prompts: int = 8  # prompts a step
    group: int = 8  # completions a prompt (num_generations)
    max_completion_length: int = 4
    val_every: int = 10
    val_prompts: int = 64  # held-out prompts, a quarter per tier
    val_n: int = 4  # sampled answers per held-out prompt (temperature 1)
    train_rows: int = 256
    task: str = "toy"  # toy (verl_hadw.toy.task, random weights) | arith (verl_hadw.toy.arith, the pretrained model)
    model: str = ""  # arith: the starting model's folder (verl_hadw.toy.arith_model)

    def __post_init__(self):
        self.out = Path(self.out)
        check_methods(self.methods, METHODS)
        if self.task not in ("toy", "arith"):
            raise ValueError(f"task must be toy or arith, got {self.task!r}")
        if min(self.steps, self.prompts, self.val_every, self.val_n, self.max_completion_length) < 1:
            raise ValueError("steps, prompts, val_every, val_n and max_completion_length must be >= 1")
        if self.group < 2 or self.val_prompts < len(TIERS) or not self.seeds or not self.lrs:
            raise ValueError("group must be >= 2, val_prompts >= 4 (one per tier), seeds and lrs not empty")
        if not all(lr > 0 for lr in self.lrs):
            raise ValueError(f"every learning rate must be > 0, got {self.lrs}")

    def run_dir(self, method: str, seed: int, lr: float) -> Path:
        return self.out / "runs" / f"lr{lr:g}" / method / f"seed{seed}"

    def ordered_methods(self) -> list[str]:
        return [m for m in METHODS if m in self.methods]

    def spec(self, method: str, seed: int, lr: float) -> dict:
        """What one run reads (``trl_study_run``): its method, seed and learning rate, and the plan's sizes."""
        sizes = {k: v for k, v in asdict(self).items() if k not in ("out", "methods", "seeds", "lrs")}
        return {"method": method, "seed": seed, "lr": lr, **sizes}

    @property
    def table_files(self) -> dict[str, str]:
        return ARITH_TABLE_FILES if self.task == "arith" else TABLE_FILES

    @property
    def families(self) -> dict:
        return ARITH_FAMILIES if self.task == "arith" else FAMILIES


ARITH_SEEDS = 32  # pre-registered from the pilot (docs/study/arith_pilot/)
ARITH_LRS = (3e-4,)  # chosen by the GRPO-only pilot (docs/study/arith_pilot/): 3e-3 collapses, 1e-3 loses the hard tier


def arith_plan(out: Path = Path("outputs/study_trl_arith"), model: str = "outputs/arith_model") -> TrlStudyPlan:
    """The arithmetic study's design (docs/does-it-help.md), fixed before its runs: from the pretrained model, 16
    prompts × 8 answers a step, 100 held-out problems of each tier, 4 answers each at temperature 1."""
    return TrlStudyPlan(out=Path(out), task="arith", model=str(model), methods=list(ARITH_METHODS),
                        seeds=list(range(1, ARITH_SEEDS + 1)), lrs=list(ARITH_LRS), steps=150, prompts=16, group=8,
                        max_completion_length=5, val_every=10, val_prompts=400, val_n=4, train_rows=4096)


def quick_plan(out: Path, task: str = "toy", model: str = "") -> TrlStudyPlan:
    """Every method, one seed, one learning rate, 4 steps: checks the pipeline (CI's slow tests), not the numbers."""
    if task == "arith":
        return dataclasses.replace(arith_plan(out, model), seeds=[1], steps=4, val_every=2, val_prompts=8, val_n=2,
                                   train_rows=64)
    return TrlStudyPlan(out=out, seeds=[1], lrs=[1e-2], steps=4, val_every=2, val_prompts=8, val_n=2)


def measured_phi(plan: TrlStudyPlan, lr: float) -> float:
    """Mean ``hadw/phi_mean`` over every step of every finished ``hadw`` run of learning rate ``lr``."""
    values = [row["phi_mean"] for seed in plan.seeds for row in _finished(plan.run_dir("hadw", seed, lr), "steps.jsonl")
              if "phi_mean" in row]
    if not values:
        raise RuntimeError(f"grpo_lr_phi needs finished hadw runs at lr {lr:g} with hadw/phi_mean in their logs")
    return float(np.mean(values))


def _finished(run_dir: Path, name: str) -> list[dict]:
    """The rows of a finished run's ``name`` (``steps.jsonl``, ``val.jsonl``); [] for one that has not finished."""
    if not (run_dir / "DONE").exists():
        return []
    return [json.loads(line) for line in (run_dir / name).read_text().splitlines()]


def run_one(plan: TrlStudyPlan, method: str, seed: int, lr: float, log=print) -> bool:
    """Run one (method, seed, lr) in a process of its own unless its ``DONE`` exists; True if it ran."""
    run_dir = plan.run_dir(method, seed, lr)
    if (run_dir / "DONE").exists():
        return False
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = plan.spec(method, seed, lr)
    if method == "grpo_lr_phi":
        spec["phi"] = measured_phi(plan, lr)
        spec["lr"] = lr * spec["phi"]
    (run_dir / "spec.json").write_text(json.dumps(spec, indent=1))
    start = time.time()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"}
    with open(run_dir / "run.log", "w") as out:
        code = subprocess.call([sys.executable, "-m", "verl_hadw.research.trl_study_run", str(run_dir / "spec.json")],
                               stdout=out, stderr=subprocess.STDOUT, env=env)
    if code != 0 or not (run_dir / "DONE").exists():
        raise RuntimeError(f"study run {method} seed {seed} lr {lr:g} failed (exit {code}); log: {run_dir / 'run.log'}")
    log(f"study: {method} seed {seed} lr {lr:g} done in {time.time() - start:.0f} s")
    return True


def run_study(plan: TrlStudyPlan, workers: int = 2, log=print) -> list[Path]:
    """Run every missing (method, seed, lr), ``workers`` at a time, then write the outputs. A learning rate's
    ``grpo_lr_phi`` runs wait for its ``hadw`` runs (their Φ sets the learning rate)."""
    order = [m for m in ORDER if m in plan.methods]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        hadw = {lr: [pool.submit(run_one, plan, "hadw", s, lr, log) for s in plan.seeds if "hadw" in order]
                for lr in plan.lrs}

        def job(method, seed, lr):
            if method == "grpo_lr_phi":
                for future in hadw[lr]:
                    future.result()
            return run_one(plan, method, seed, lr, log)

        rest = [pool.submit(job, m, s, lr) for lr in plan.lrs for m in order if m != "hadw" for s in plan.seeds]
        for future in [f for fs in hadw.values() for f in fs] + rest:
            future.result()
    return write_outputs(plan)


def load_tables(plan: TrlStudyPlan) -> dict[str, list[dict]]:
    """The finished runs as the tables of rows ``method, seed, lr, step, tier, value`` (``plan.table_files``). The
    arith study's accuracy has a row for the two hardest tiers too, and its balance (tier: Σ A⁺ / Σ|A⁻| of the
    step's groups of that tier) and anchor (tier ``anchor``: C_t⁻; ``batch_acc``: y_t) tables."""
    arith = plan.task == "arith"
    tables = {name: [] for name in plan.table_files}
    for lr in plan.lrs:
        for method in plan.ordered_methods():
            for seed in plan.seeds:
                run_dir = plan.run_dir(method, seed, lr)
                key = dict(method=method, seed=seed, lr=lr)
                for row in _finished(run_dir, "val.jsonl"):
                    accs = {t: row[t] for t in TIERS}
                    accs[ALL] = float(np.mean(list(accs.values())))
                    if arith:
                        accs[TWO_HARDEST] = float(np.mean([row[t] for t in HARD_TIERS]))
                    tables["val_accuracy"] += [dict(key, step=row["step"], tier=t, value=v) for t, v in accs.items()]
                for row in _finished(run_dir, "steps.jsonl"):
                    if "reward" in row:
                        tables["train_reward"].append(dict(key, step=row["step"], tier=ALL, value=row["reward"]))
                    if "phi_mean" in row:
                        tables["phi"].append(dict(key, step=row["step"], tier=ALL, value=row["phi_mean"]))
                    mass = row.get("mass")
                    if mass:
                        total = sum(mass.values())
                        tables["advantage_share"] += [dict(key, step=row["step"], tier=t,
                                                           value=mass[t] / total if total > 0 else 0.0)
                                                      for t in TIERS]
                    if arith and row.get("pos"):
                        tables["balance"] += [dict(key, step=row["step"], tier=t, value=row["pos"][t] / row["neg"][t])
                                              for t in TIERS if row["neg"][t] > 0]
                    if arith and "anchor" in row:
                        tables["anchor"] += [dict(key, step=row["step"], tier=name, value=row[name])
                                             for name in ("anchor", "batch_acc")]
    return tables


def write_csv(path: Path, rows: list[dict]) -> Path:
    """``rows`` as a CSV with the columns ``method, seed, lr, step, tier, value``; gzipped where the name ends in
    ``.gz``, with no time stamp or name in the header, so the same rows give the same bytes."""
    with open(path, "wb") as raw:
        binary = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if str(path).endswith(".gz") else raw
        with io.TextIOWrapper(binary, encoding="utf-8", newline="") as f:  # its close closes (and ends) the gzip
            writer = csv.DictWriter(f, fieldnames=["method", "seed", "lr", "step", "tier", "value"])
            writer.writeheader()
            writer.writerows(rows)
    return path


def read_csv(path: Path) -> list[dict]:
    """A table written by ``write_csv`` (gzipped where its name ends in ``.gz``), its numbers as numbers."""
    with (gzip.open(path, "rt", newline="") if str(path).endswith(".gz") else open(path, newline="")) as f:
        return [dict(r, seed=int(r["seed"]), lr=float(r["lr"]), step=int(r["step"]), value=float(r["value"]))
                for r in csv.DictReader(f)]


def write_outputs(plan: TrlStudyPlan) -> list[Path]:
    """The CSVs, ``summary.md`` and the plots, from the finished runs, into ``plan.out``."""
    tables = load_tables(plan)
    paths = [write_csv(plan.out / plan.table_files[name], rows) for name, rows in tables.items()]
    (plan.out / "summary.md").write_text(summary_markdown(tables["val_accuracy"], tables["phi"], plan.families))
    paths.append(plan.out / "summary.md")
    paths.append(plot_curves(tables["val_accuracy"], plan.out / "curves.png"))
    paths.append(plot_advantage_share(tables["advantage_share"], plan.out / "advantage_share.png"))
    if tables.get("anchor"):
        paths.append(plot_mechanism(tables["balance"], tables["anchor"], plan.out / "mechanism.png"))
    return paths

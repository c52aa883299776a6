"""The arithmetic study's own blocks of ``docs/does-it-help.md`` (``research.does_it_help``): the within-group balance
per tier, HA-DW's anchor beside the batch accuracy, and the verl runs' final accuracy beside the TRL study's spread."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from verl_hadw.research.study_stats import ALL, ci_text
from verl_hadw.research.trl_study_stats import EARLY, HARD_TIERS, TWO_HARDEST, lrs_in, methods_in
from verl_hadw.toy.task import TIERS

__all__ = ["balance", "anchor", "verl", "read_verl_csv"]


def read_verl_csv(path: Path) -> list[dict]:
    """The verl study's ``val_accuracy.csv`` (``research.study``: ``method, seed, step, tier, val_accuracy``) as rows
    ``method, seed, step, tier, value``."""
    with open(path, newline="") as f:
        return [dict(method=r["method"], seed=int(r["seed"]), step=int(r["step"]), tier=r["tier"],
                     value=float(r["val_accuracy"])) for r in csv.DictReader(f)]


def _run_means(rows, names, first: int, last: int) -> dict[tuple, dict[str, float]]:
    """(lr, method, seed) -> the mean of each of ``names`` (a row's tier) over the run's steps first..last that have
    it."""
    values: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        if first <= r["step"] <= last and r["tier"] in names:
            values.setdefault((r["lr"], r["method"], r["seed"]), {}).setdefault(r["tier"], []).append(r["value"])
    return {key: {name: float(np.mean(v)) for name, v in by_name.items()} for key, by_name in values.items()}


def _of(means: dict[tuple, dict[str, float]], lr: float, method: str) -> list[dict[str, float]]:
    return [v for (l_, m, _), v in means.items() if l_ == lr and m == method]


def balance(tables) -> str:
    rows = tables["balance"]
    last = max(r["step"] for r in rows)
    lines = ["| steps | lr | method | " + " | ".join(TIERS) + " |", "|---|---|---|" + "---|" * len(TIERS)]
    for first, to in ((1, EARLY), (1, last)):
        means = _run_means(rows, TIERS, first, to)
        for lr in lrs_in(rows):
            for method in methods_in(rows):
                runs_ = _of(means, lr, method)
                if runs_:
                    lines.append(f"| {first}-{to} | {lr:g} | `{method}` | "
                                 + " | ".join(ci_text([v[t] for v in runs_ if t in v]) for t in TIERS) + " |")
    return "\n".join(lines) + ("\n\nΣ A⁺ / Σ |A⁻| over each step's groups of a tier, after weighting: the mean over "
                               "the steps of each run that have a mixed group of the tier, then over seeds ± 95 %. "
                               "It is 1 where every group's advantages sum to zero.")


def anchor(tables) -> str:
    rows = tables["anchor"]
    last = max(r["step"] for r in rows)
    windows = ((1, 10), (last // 2 - 4, last // 2 + 5), (last - 9, last))
    lines = ["| lr | method | steps | anchor C_t⁻ | batch accuracy y_t | C_t⁻ − y_t |", "|---|---|---|---|---|---|"]
    for lr in lrs_in(rows):
        for method in methods_in(rows):
            for first, to in windows:
                runs_ = _of(_run_means(rows, ("anchor", "batch_acc"), first, to), lr, method)
                if runs_:
                    lines.append(f"| {lr:g} | `{method}` | {first}-{to} | {ci_text([v['anchor'] for v in runs_])} | "
                                 f"{ci_text([v['batch_acc'] for v in runs_])} | "
                                 f"{ci_text([v['anchor'] - v['batch_acc'] for v in runs_])} |")
    return "\n".join(lines) + ("\n\nThe mean over the window's steps of each run, then over seeds ± 95 %. C_t⁻ is the "
                               "anchor the step's weights are computed from; y_t the step's batch accuracy.")


def _finals(rows, method: str, outcome: str, step: int) -> dict[int, float]:
    """seed -> ``method``'s held-out accuracy on ``outcome`` at ``step`` (``TWO_HARDEST``: the mean of its tiers)."""
    tiers = HARD_TIERS if outcome == TWO_HARDEST else (outcome,)
    by_seed: dict[int, list[float]] = {}
    for r in rows:
        if r["method"] == method and r["step"] == step and r["tier"] in tiers:
            by_seed.setdefault(r["seed"], []).append(r["value"])
    return {seed: float(np.mean(v)) for seed, v in sorted(by_seed.items()) if len(v) == len(tiers)}


def verl(tables) -> str:
    trl, runs = tables["val_accuracy"], tables["verl_val_accuracy"]
    last, verl_last = max(r["step"] for r in trl), max(r["step"] for r in runs)
    lines = ["| method | outcome | TRL: mean (95 % CI) | TRL: lowest-highest seed | verl: each seed | verl: mean | "
             "verl seeds inside the TRL range |", "|---|---|---|---|---|---|---|"]
    for method in methods_in(runs):
        for outcome in (*tables["outcomes"], "hard"):
            spread, mine = _finals(trl, method, outcome, last), _finals(runs, method, outcome, verl_last)
            low, high = min(spread.values()), max(spread.values())
            inside = sum(low <= v <= high for v in mine.values())
            lines.append(f"| `{method}` | {outcome} | {ci_text(list(spread.values()))} | {low:.3f}-{high:.3f} | "
                         + ", ".join(f"{v:.3f}" for v in mine.values()) + f" | {np.mean(list(mine.values())):.3f} | "
                         f"{inside}/{len(mine)} |")
    start = [np.mean(list(_finals(rows, "grpo", ALL, 0).values())) for rows in (trl, runs)]  # the same model
    return "\n".join(lines) + (f"\n\nHeld-out accuracy at step {last} (TRL, {len(spread)} seeds) and step {verl_last} "
                               f"(verl, seeds {', '.join(map(str, mine))}). At step 0, from the same model, over all "
                               f"tiers: TRL {start[0]:.3f}, verl {start[1]:.3f} (each its own samples).")

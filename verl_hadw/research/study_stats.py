"""The CPU study's statistics: validation logs -> tables, t-intervals over seeds, paired tests, summary, curves.

A run's score on a tier is its ``final`` validation accuracy or its ``auc`` (the mean over the validations after
step 0); methods are compared paired by seed (``comparisons``: each against GRPO, HA-DW against its step-size
control, HA-DW over DGPO against DGPO). Used by ``research.study``, which re-exports them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from verl_hadw.toy import task_module
from verl_hadw.toy.task import TIERS

__all__ = [
    "ALL", "BASELINE", "PHI_METRIC", "val_key", "val_table", "train_table", "t_interval", "ci_text", "run_scores",
    "summarise", "comparisons", "paired_tests", "summary_markdown", "plot_curves",
]

BASELINE = "grpo"
PHI_METRIC = "hadw/phi_mean"
ALL = "all"  # the tier column's value for the mean over the four tiers


def val_key(tier: str, n: int, task: str = "toy") -> str:
    """verl's core validation metric of a tier of ``task``: the mean of its ``acc`` (the reward, 0/1) over n
    samples."""
    return f"val-core/{task_module(task).data_source(tier)}/acc/mean@{n}"


def val_table(plan, runs) -> list[dict]:
    """Rows ``method, seed, step, tier, val_accuracy`` (tier ``all``: the mean of the four tiers); ``plan``: the
    study's ``StudyPlan`` (its ``val_n``)."""
    rows = []
    for (method, seed), steps in runs.items():
        for step in sorted(steps):
            accs = {tier: steps[step].get(val_key(tier, plan.val_n, plan.task)) for tier in TIERS}
            if any(v is None for v in accs.values()):
                continue
            accs[ALL] = float(np.mean(list(accs.values())))
            rows += [dict(method=method, seed=seed, step=step, tier=t, val_accuracy=v) for t, v in accs.items()]
    return rows


def train_table(runs) -> list[dict]:
    return [
        dict(method=method, seed=seed, step=step, reward=values.get("critic/score/mean"),
             phi_mean=values.get(PHI_METRIC))
        for (method, seed), steps in runs.items()
        for step, values in sorted(steps.items())
        if step > 0 and "critic/score/mean" in values
    ]


def t_interval(values) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval over the values (seeds); half-width nan for one value."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return float(x.mean()), math.nan
    return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def _per_seed(rows, method, tier) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for r in rows:
        if r["method"] == method and r["tier"] == tier:
            out.setdefault(r["seed"], {})[r["step"]] = r["val_accuracy"]
    return out


def run_scores(rows, method, tier) -> dict[int, dict[str, float]]:
    """Per seed: ``final`` (the last validation) and ``auc`` (mean over the validations after step 0)."""
    scores = {}
    for seed, by_step in _per_seed(rows, method, tier).items():
        later = [v for s, v in sorted(by_step.items()) if s > 0]
        if later:
            scores[seed] = {"final": later[-1], "auc": float(np.mean(later))}
    return scores


def summarise(rows, methods, tiers=(*TIERS, ALL)) -> list[dict]:
    """Per method and tier: mean and 95 % t half-width over seeds of the final and the AUC accuracy."""
    out = []
    for method in methods:
        for tier in tiers:
            scores = run_scores(rows, method, tier)
            if not scores:
                continue
            row = dict(method=method, tier=tier, seeds=len(scores))
            for what in ("final", "auc"):
                row[what], row[f"{what}_ci"] = t_interval([s[what] for s in scores.values()])
            out.append(row)
    return out


def comparisons(methods) -> list[tuple[str, str]]:
    """Every method against GRPO, HA-DW against its step-size control, and HA-DW over DGPO against DGPO (what
    HA-DW adds to that base)."""
    pairs = [(m, BASELINE) for m in methods if m != BASELINE and BASELINE in methods]
    for first, second in (("hadw", "grpo_lr_phi"), ("hadw_dgpo", "dgpo")):
        if first in methods and second in methods:
            pairs.append((first, second))
    return pairs


def paired_tests(rows, methods, tiers=(*TIERS, ALL)) -> list[dict]:
    """Paired by seed: mean difference, its 95 % t-interval and the two-sided paired t-test p-value."""
    from scipy import stats

    out = []
    for a, b in comparisons(methods):
        for tier in tiers:
            sa, sb = run_scores(rows, a, tier), run_scores(rows, b, tier)
            seeds = sorted(set(sa) & set(sb))
            if len(seeds) < 2:
                continue
            for what in ("final", "auc"):
                diff = np.array([sa[s][what] - sb[s][what] for s in seeds])
                mean, half = t_interval(diff)
                p = float(stats.ttest_rel([sa[s][what] for s in seeds], [sb[s][what] for s in seeds]).pvalue)
                out.append(dict(method=a, versus=b, tier=tier, score=what, seeds=len(seeds), diff=mean, diff_ci=half,
                                p=p if not math.isnan(p) else 1.0, ahead=int((diff > 0).sum())))
    return out


def summary_markdown(summary, tests, phi: float | None = None) -> str:
    lines = ["| method | tier | seeds | final val acc (95 % CI) | AUC val acc (95 % CI) |", "|---|---|---|---|---|"]
    for r in summary:
        lines.append(f"| {r['method']} | {r['tier']} | {r['seeds']} | {r['final']:.3f} ± {r['final_ci']:.3f} "
                     f"| {r['auc']:.3f} ± {r['auc_ci']:.3f} |")
    lines += ["", "Paired by seed (difference = first − second; p: two-sided paired t-test; ahead: seeds where the "
              "first is higher):", "",
              "| comparison | tier | score | diff (95 % CI) | p | ahead |", "|---|---|---|---|---|---|"]
    for r in tests:
        mark = " *" if r["p"] < 0.05 else ""
        lines.append(f"| {r['method']} − {r['versus']} | {r['tier']} | {r['score']} | {r['diff']:+.3f} ± "
                     f"{r['diff_ci']:.3f} | {r['p']:.3f}{mark} | {r['ahead']}/{r['seeds']} |")
    if phi is not None:
        lines += ["", f"Measured mean Φ of the hadw runs (the grpo_lr_phi learning-rate factor): {phi:.4f}"]
    return "\n".join(lines) + "\n"


def plot_curves(rows, methods, path: Path, tiers=(*TIERS, ALL)) -> Path:
    """One panel per tier: mean validation accuracy over seeds with its 95 % t-interval band, per method."""
    from verl_hadw.toy.plotting import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(tiers), figsize=(3.4 * len(tiers), 3.2), sharex=True)
    for ax, tier in zip(np.atleast_1d(axes), tiers):
        for i, method in enumerate(methods):
            per_seed = _per_seed(rows, method, tier)
            steps = sorted({s for by in per_seed.values() for s in by})
            if not steps:
                continue
            stats_ = [t_interval([by[s] for by in per_seed.values() if s in by]) for s in steps]
            mean = np.array([m for m, _ in stats_])
            half = np.nan_to_num(np.array([h for _, h in stats_]))
            ax.plot(steps, mean, color=f"C{i}", label=method, marker=".")
            ax.fill_between(steps, mean - half, mean + half, color=f"C{i}", alpha=0.15)
        ax.set_title(f"tier: {tier}")
        ax.set_xlabel("training step")
        ax.set_ylim(0, 1)
    np.atleast_1d(axes)[0].set_ylabel("held-out accuracy (mean ± 95 % CI)")
    np.atleast_1d(axes)[-1].legend(fontsize=7)
    return save_figure(fig, path, dpi=110)


def ci_text(values) -> str:
    """``mean ± half-width`` of the values' 95 % t-interval, three decimals (the mean alone for one value)."""
    mean, half = t_interval(values)
    return f"{mean:.3f}" if math.isnan(half) else f"{mean:.3f} ± {half:.3f}"

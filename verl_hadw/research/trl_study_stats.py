"""The TRL study's statistics (``research.trl_study``): each run's score, the comparisons paired by seed (t-interval,
paired t-test, Wilcoxon signed-rank), Holm's correction per family, the smallest difference the design resolves, the
summary and the plots (docs/does-it-help.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from verl_hadw.research.study_stats import ALL, t_interval
from verl_hadw.toy.task import TIERS

__all__ = ["METHODS", "TOY_METHODS", "ARITH_METHODS", "COMPARISONS", "FAMILIES", "ARITH_FAMILIES", "HARD_TIERS",
           "EARLY", "TWO_HARDEST",
           "ALPHA", "run_scores", "paired", "holm", "smallest_difference", "comparisons_table", "lrs_in", "methods_in",
           "holm_mark", "summary_markdown", "plot_curves", "plot_advantage_share", "plot_mechanism"]

METHODS = ("grpo", "hadw", "hadw_authors", "dgpo", "hadw_dgpo", "grpo_lr_phi")  # every method, in the tables' order
TOY_METHODS = ("grpo", "hadw", "dgpo", "hadw_dgpo", "grpo_lr_phi")
ARITH_METHODS = ("grpo", "hadw", "hadw_authors", "dgpo", "grpo_lr_phi")
COMPARISONS = (("hadw", "grpo"), ("hadw_authors", "grpo"), ("dgpo", "grpo"), ("hadw_dgpo", "grpo"),
               ("grpo_lr_phi", "grpo"), ("hadw", "grpo_lr_phi"))
HARD_TIERS = ("hard", "hardest")  # where the papers say the weight should move
EARLY = 20  # the mechanism's early window: steps 1-20, before the methods' policies have drifted far apart
TWO_HARDEST = "+".join(HARD_TIERS)  # the tier column's value for the mean over them (the arith study's outcome)
FAMILIES = {  # family -> (score, tiers): Holm's correction runs within each
    "primary": ("final", (ALL,)),
    "auc": ("auc", (ALL,)),
    "final per tier": ("final", TIERS),
    "auc per tier": ("auc", TIERS),
}
# the arithmetic study's: two primary outcomes, Holm-corrected together (docs/does-it-help.md)
ARITH_FAMILIES = {
    "primary": ("final", (ALL, TWO_HARDEST)),
    "auc": ("auc", (ALL, TWO_HARDEST)),
    "final per tier": ("final", TIERS),
    "auc per tier": ("auc", TIERS),
}
ALPHA, POWER = 0.05, 0.8


def lrs_in(rows: list[dict]) -> list[float]:
    """The learning rates in ``rows``, largest first (the order of every table and plot)."""
    return sorted({r["lr"] for r in rows}, reverse=True)


def methods_in(rows: list[dict]) -> list[str]:
    """The methods in ``rows``, in ``METHODS``' order."""
    present = {r["method"] for r in rows}
    return [m for m in METHODS if m in present]


def holm_mark(p_holm: float, mark: str = " **★**") -> str:
    """``mark`` where a Holm-corrected p is below ``ALPHA``, else nothing."""
    return mark if p_holm < ALPHA else ""


def run_scores(rows: list[dict], method: str, lr: float, tier: str) -> dict[int, dict[str, float]]:
    """Per seed: ``final`` (the last validation) and ``auc`` (the mean of the validations after step 0)."""
    by_seed: dict[int, dict[int, float]] = {}
    for r in rows:
        if r["method"] == method and r["lr"] == lr and r["tier"] == tier:
            by_seed.setdefault(r["seed"], {})[r["step"]] = r["value"]
    scores = {}
    for seed, by_step in by_seed.items():
        later = [v for s, v in sorted(by_step.items()) if s > 0]
        if later:
            scores[seed] = {"final": later[-1], "auc": float(np.mean(later))}
    return scores


def paired(first: dict[int, float], second: dict[int, float]) -> dict | None:
    """The comparison of two methods' scores paired by seed (None: fewer than 2 seeds in common)."""
    from scipy import stats

    seeds = sorted(set(first) & set(second))
    if len(seeds) < 2:
        return None
    a, b = np.array([first[s] for s in seeds]), np.array([second[s] for s in seeds])
    diff = a - b
    sd = float(diff.std(ddof=1))
    half = float(stats.t.ppf(0.975, len(seeds) - 1) * sd / math.sqrt(len(seeds)))
    p_t = float(stats.ttest_rel(a, b).pvalue) if sd > 0 else (1.0 if diff.mean() == 0 else 0.0)
    # the normal approximation with the tie correction: accuracies tie often, and scipy's default then runs a random
    # permutation test (slow, and its p changes from one call to the next, so the page could not be locked)
    p_w = float(stats.wilcoxon(a, b, zero_method="zsplit", method="approx").pvalue) if np.any(diff != 0) else 1.0
    return dict(seeds=len(seeds), diff=float(diff.mean()), ci=half, sd=sd, p_t=p_t, p_w=p_w,
                ahead=int((diff > 0).sum()), behind=int((diff < 0).sum()))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (in the input's order): the k-th smallest times (m − k + 1), made
    non-decreasing, at most 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [1.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def smallest_difference(sd: float, seeds: int, tests: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean paired difference a two-sided paired t-test over ``seeds`` detects with ``power`` at level
    ``alpha / tests`` (Holm's first, strictest step), for a paired standard deviation ``sd``."""
    from scipy import stats

    df = seeds - 1
    return float((stats.t.ppf(1 - alpha / (2 * tests), df) + stats.t.ppf(power, df)) * sd / math.sqrt(seeds))


def comparisons_table(rows: list[dict], families: dict = FAMILIES) -> list[dict]:
    """Every comparison at every learning rate on every score and tier, with Holm's adjusted p (t-test) within each
    family (``FAMILIES``, or the arith study's) and, for the primary family, the smallest difference the design
    resolves."""
    lrs, methods = lrs_in(rows), methods_in(rows)
    out = []
    for family, (score, tiers) in families.items():
        members = []
        for lr in lrs:
            for first, second in COMPARISONS:
                if first not in methods or second not in methods:
                    continue
                for tier in tiers:
                    a = {s: v[score] for s, v in run_scores(rows, first, lr, tier).items()}
                    b = {s: v[score] for s, v in run_scores(rows, second, lr, tier).items()}
                    result = paired(a, b)
                    if result is not None:
                        members.append(dict(family=family, lr=lr, first=first, second=second, score=score,
                                            tier=tier, **result))
        for member, adjusted in zip(members, holm([m["p_t"] for m in members])):
            member["p_holm"] = adjusted
            member["resolves"] = smallest_difference(member["sd"], member["seeds"], len(members)) if (
                family == "primary" and member["seeds"] > 1) else math.nan
        out += members
    return out


def _means(rows: list[dict], lr: float, tier: str, score: str) -> dict[str, tuple[float, float, int]]:
    out = {}
    for method in methods_in(rows):
        values = [v[score] for v in run_scores(rows, method, lr, tier).values()]
        if values:
            out[method] = (*t_interval(values), len(values))
    return out


def summary_markdown(val_rows: list[dict], phi_rows: list[dict], families: dict = FAMILIES) -> str:
    """The tables the page shows: each method's held-out accuracy per learning rate, then the comparisons (the
    primary family first), then the measured Φ."""
    lines = ["| lr | method | seeds | final held-out acc, all tiers (95 % CI) | AUC, all tiers (95 % CI) |",
             "|---|---|---|---|---|"]
    for lr in lrs_in(val_rows):
        finals, aucs = _means(val_rows, lr, ALL, "final"), _means(val_rows, lr, ALL, "auc")
        for method, (mean, half, n) in finals.items():
            auc, auc_half, _ = aucs[method]
            lines.append(f"| {lr:g} | {method} | {n} | {mean:.3f} ± {half:.3f} | {auc:.3f} ± {auc_half:.3f} |")
    lines += ["", "Paired by seed (difference = first − second; 95 % t-interval; p: two-sided paired t-test, "
              "Wilcoxon signed-rank; Holm: the t-test's p adjusted within the family; ahead: seeds where the first "
              "is higher; resolves: the smallest difference this design detects with 80 % power at Holm's strictest "
              "level, for the observed paired spread):", "",
              "| family | lr | comparison | score | tier | diff (95 % CI) | p (t) | p (Wilcoxon) | p (Holm) | ahead "
              "| resolves |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in comparisons_table(val_rows, families):
        resolves = "" if math.isnan(r["resolves"]) else f"{r['resolves']:.3f}"
        mark = holm_mark(r["p_holm"], " *")
        lines.append(f"| {r['family']} | {r['lr']:g} | {r['first']} − {r['second']} | {r['score']} | {r['tier']} "
                     f"| {r['diff']:+.3f} ± {r['ci']:.3f} | {r['p_t']:.3g} | {r['p_w']:.3g} | {r['p_holm']:.3g}{mark} "
                     f"| {r['ahead']}/{r['seeds']} | {resolves} |")
    for lr in lrs_in(phi_rows):
        values = [r["value"] for r in phi_rows if r["lr"] == lr and r["method"] == "hadw"]
        if values:
            lines += ["", f"Mean Φ of the hadw runs at lr {lr:g} (grpo_lr_phi's learning-rate factor): "
                      f"{float(np.mean(values)):.4f}"]
    return "\n".join(lines) + "\n"


def _curve(rows, method, tier, lr):
    """(steps, mean over seeds, 95 % t half-width) of ``method``'s rows of ``tier`` at learning rate ``lr``."""
    mine = [r for r in rows if r["method"] == method and r["lr"] == lr and r["tier"] == tier]
    steps = sorted({r["step"] for r in mine})
    stats_ = [t_interval([r["value"] for r in mine if r["step"] == s]) for s in steps]
    return np.array(steps), np.array([m for m, _ in stats_]), np.nan_to_num(np.array([h for _, h in stats_]))


def _band_grid(rows: list[dict], path: Path, panels, lines, pick, title, ylabel: str, sharey: bool,
               marker: str | None) -> Path:
    """A row of panels per learning rate; in each, one line per entry of ``lines``: the mean over seeds with its
    95 % t-interval band. ``pick(panel, line)`` -> the (method, tier) that line plots; ``title(panel, lr)``."""
    from verl_hadw.toy.plotting import pyplot, save_figure

    plt = pyplot()
    lrs = lrs_in(rows) or [0.0]
    columns = max(len(panels), 1)
    fig, axes = plt.subplots(len(lrs), columns, figsize=(3.2 * columns, 2.9 * len(lrs)), squeeze=False, sharex=True,
                             sharey=sharey)
    for row, lr in zip(axes, lrs):
        for ax, panel in zip(row, panels):
            for i, line in enumerate(lines):
                steps, mean, half = _curve(rows, *pick(panel, line), lr)
                if len(steps):
                    ax.plot(steps, mean, color=f"C{i}", label=line, marker=marker)
                    ax.fill_between(steps, mean - half, mean + half, color=f"C{i}", alpha=0.15)
            ax.set_title(title(panel, lr), fontsize=9)
            ax.set_ylim(0, 1)
        row[0].set_ylabel(ylabel)
    for ax in axes[-1]:
        ax.set_xlabel("step")
    axes[0][-1].legend(fontsize=7)
    return save_figure(fig, path, dpi=100)


def plot_curves(val_rows: list[dict], path: Path) -> Path:
    """Held-out accuracy over training, mean over seeds with its 95 % t-interval band: a row per learning rate, a
    panel per tier (and all), a line per method."""
    return _band_grid(val_rows, path, (*TIERS, ALL), methods_in(val_rows), lambda tier, method: (method, tier),
                      lambda tier, lr: f"lr {lr:g}, tier: {tier}", "held-out accuracy", sharey=False, marker=".")


def plot_advantage_share(share_rows: list[dict], path: Path) -> Path:
    """Each tier's share of the advantage mass Σ|A| over training, mean over seeds with its 95 % band: a row per
    learning rate, a panel per method, a line per tier."""
    return _band_grid(share_rows, path, methods_in(share_rows), TIERS, lambda method, tier: (method, tier),
                      lambda method, lr: f"{method}, lr {lr:g}", "share of Σ|A|", sharey=True, marker=None)


def plot_mechanism(balance_rows: list[dict], anchor_rows: list[dict], path: Path) -> Path:
    """HA-DW's mechanism over training, mean over seeds with its 95 % band: a panel per method with an anchor (its
    Σ A⁺ / Σ|A⁻| per tier against GRPO's 1), then the anchor C_t⁻ beside the batch accuracy y_t of each."""
    from verl_hadw.toy.plotting import pyplot, save_figure

    plt = pyplot()
    weighted = methods_in(anchor_rows)
    fig, axes = plt.subplots(1, len(weighted) + 1, figsize=(3.6 * (len(weighted) + 1), 3.0), squeeze=False)
    lr = lrs_in(anchor_rows)[0]

    def band(ax, rows, method, tier, color, label, style="-"):
        steps, mean, half = _curve(rows, method, tier, lr)
        ax.plot(steps, mean, style, color=color, label=label, linewidth=1)
        ax.fill_between(steps, mean - half, mean + half, color=color, alpha=0.15)

    for ax, method in zip(axes[0], weighted):
        for i, tier in enumerate(TIERS):
            band(ax, balance_rows, method, tier, f"C{i}", tier)
        ax.axhline(1.0, color="grey", linestyle=":", label="GRPO")
        ax.set_title(f"{method}: Σ A⁺ / Σ|A⁻| per tier", fontsize=9)
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize=7)
    ax = axes[0][-1]
    for i, method in enumerate(weighted):
        band(ax, anchor_rows, method, "anchor", f"C{i}", f"{method}: C_t⁻")
        band(ax, anchor_rows, method, "batch_acc", f"C{i}", f"{method}: y_t", style="--")
    ax.set_title(f"anchor and batch accuracy, lr {lr:g}", fontsize=9)
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
    return save_figure(fig, path, dpi=100)

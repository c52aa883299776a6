"""Aggregate simulator runs over seeds, write CSV / Markdown / PNG, and the ``verl-hadw simulate`` command.

Spread is across seeds (``mean ± sd``, sample sd); comparisons with GRPO are paired by seed (same prompts, draws and
uniforms): mean ± sd of the per-seed differences and the number of seeds where the method is ahead. The files are
listed at :func:`write_outputs`.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from verl_hadw.research.sim.methods import METHODS, Method
from verl_hadw.toy.plotting import pyplot, save_figure

__all__ = ["stack", "summarise", "write_outputs", "summary_markdown", "key_comparisons", "comparisons_markdown"]

CURVE_FIELDS = ["acc_train", "acc_hard", "acc_heldout", "batch_acc", "anchor_prior", "anchor_posterior", "eta_t",
                "phi_mean", "adv_abs_mean", "valid_group_frac"]  # fmt: skip


# ------------------------------------------------------------------------------------------ aggregation
def stack(records: list[dict], field: str) -> dict[str, np.ndarray]:
    """{method: (seeds, steps + 1) array of ``field``}, seeds in ascending order."""
    out: dict[str, dict[int, list]] = {}
    for r in records:
        out.setdefault(r["method"], {}).setdefault(r["seed"], []).append(r[field])
    return {m: np.array([by_seed[s] for s in sorted(by_seed)], dtype=float) for m, by_seed in out.items()}


def _mean_sd(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else 0.0


def summarise(records: list[dict], methods: list[Method], reference: str = "grpo") -> list[dict]:
    """One row per method: final accuracies, learning speed (mean accuracy over steps), paired differences
    to ``reference``, update magnitude, mean Φ, and how the anchor follows the model's accuracy: ``anchor_lag``
    = mean over steps of (accuracy of the policy that produced the batch − C_t⁻), ``anchor_rmse`` the root
    mean square of that gap, ``anchor_moved`` = max − min of C_t⁻ over the run (≈ 0: frozen)."""
    fields = {f: stack(records, f) for f in ("acc_train", "acc_hard", "acc_heldout", "adv_abs_mean", "phi_mean",
                                              "anchor_prior", "anchor_posterior")}
    rows = []
    ref_available = reference in fields["acc_train"]
    for m in methods:
        if m.name not in fields["acc_train"]:
            continue
        row: dict = {"method": m.name, "label": m.label, "family": m.family, "G": m.group, "lambda": m.lambda_scale,
                     "lr_mult": m.lr_mult, "seeds": fields["acc_train"][m.name].shape[0]}
        for f in ("acc_train", "acc_hard", "acc_heldout"):
            final = fields[f][m.name][:, -1]
            row[f"{f}_final"], row[f"{f}_final_sd"] = _mean_sd(final)
            if ref_available:
                ref = fields[f][reference][:, -1]
                n = min(len(ref), len(final))
                diff = final[:n] - ref[:n]
                row[f"{f}_vs_{reference}"], row[f"{f}_vs_{reference}_sd"] = _mean_sd(diff)
                row[f"{f}_wins"] = int((diff > 0).sum())
        row["auc_train"], row["auc_train_sd"] = _mean_sd(fields["acc_train"][m.name][:, 1:].mean(axis=1))
        row["adv_abs_mean"] = _mean_sd(np.nanmean(fields["adv_abs_mean"][m.name][:, 1:], axis=1))[0]
        phi = fields["phi_mean"][m.name][:, 1:]
        row["phi_mean"] = _mean_sd(np.nanmean(phi, axis=1))[0] if not np.isnan(phi).all() else float("nan")
        prior = fields["anchor_prior"][m.name][:, 1:]
        if not np.isnan(prior).all():
            capability = fields["acc_train"][m.name][:, :-1]  # the policy that produced step t's batch
            row["anchor_lag"], row["anchor_lag_sd"] = _mean_sd((capability - prior).mean(axis=1))
            row["anchor_rmse"] = _mean_sd(np.sqrt(((capability - prior) ** 2).mean(axis=1)))[0]
            row["anchor_final_gap"] = _mean_sd(capability[:, -1] - prior[:, -1])[0]
            row["anchor_moved"] = _mean_sd(prior.max(axis=1) - prior.min(axis=1))[0]
        rows.append(row)
    return rows


# (method, baseline, question): the paper's comparisons and the controls, as paired differences.
KEY_COMPARISONS = [
    ("hadw", "grpo", "HA-DW vs GRPO at G=8 (Table 1)"),
    ("hadw", "grpo_G16", "HA-DW at G=8 vs GRPO at G=16 (Table 3)"),
    ("grpo_G16", "grpo", "GRPO G=16 vs G=8"),
    ("hadw", "grpo_lrx1.3", "HA-DW λ=1.3 vs GRPO with lr × 1.3 (step-size control)"),
    ("hadw_normphi", "grpo", "HA-DW with mean Φ = 1 vs GRPO (re-direction only)"),
    ("hadw_lam1", "grpo", "HA-DW λ=1 vs GRPO"),
    ("hadw", "hadw_lam1", "HA-DW λ=1.3 vs λ=1"),
    ("hadw", "hadw_fixed0.5", "dynamic (Kalman) vs fixed 0.5 anchor (Table 2)"),
    ("hadw", "hadw_ma", "Kalman vs moving-average anchor (App. F)"),
    ("hadw", "hadw_eta1", "η=16 vs η=1 (frozen anchor)"),
    ("hadw", "hadw_sigacc_eta16", "σ from the anchor vs from the accuracy (η=16)"),
    ("dgpo", "grpo", "DGPO vs GRPO"),
    ("hadw_dgpo", "dgpo", "HA-DW over DGPO vs DGPO"),
]


def compare(records: list[dict], method: str, baseline: str, field: str = "acc_train") -> tuple[float, float, int, int]:
    """Paired final-step difference ``method - baseline`` over the seeds both ran: (mean, sd, wins, n)."""
    data = stack(records, field)
    a, b = data[method][:, -1], data[baseline][:, -1]
    n = min(len(a), len(b))
    diff = a[:n] - b[:n]
    mean, sd = _mean_sd(diff)
    return mean, sd, int((diff > 0).sum()), n


def key_comparisons(records: list[dict]) -> list[dict]:
    """``KEY_COMPARISONS`` whose two methods both ran: paired differences of the final accuracies."""
    present = {r["method"] for r in records}
    rows = []
    for method, baseline, question in KEY_COMPARISONS:
        if method in present and baseline in present:
            row = {"comparison": question, "method": method, "baseline": baseline}
            for field in ("acc_train", "acc_hard", "acc_heldout"):
                mean, sd, wins, n = compare(records, method, baseline, field)
                row.update({f"{field}_diff": mean, f"{field}_diff_sd": sd, f"{field}_wins": wins, "seeds": n})
            rows.append(row)
    return rows


def comparisons_markdown(rows: list[dict]) -> str:
    lines = ["| comparison | Δ final acc (wins) | Δ hard-tercile acc (wins) | Δ held-out acc (wins) |",
             "|---|---|---|---|"]
    for r in rows:
        columns = [f"{_pm(r[f'{f}_diff'], r[f'{f}_diff_sd'])} ({r[f'{f}_wins']}/{r['seeds']})"
                 for f in ("acc_train", "acc_hard", "acc_heldout")]
        lines.append(f"| {r['comparison']} | " + " | ".join(columns) + " |")
    return "\n".join(lines)


def _pm(mean: float, sd: float, digits: int = 3) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def summary_markdown(rows: list[dict], reference: str = "grpo") -> str:
    head = (f"| method | G | λ | lr× | final acc | final hard-tercile acc | held-out acc | mean acc over steps | "
            f"Δ acc vs {reference} (wins) | Δ hard vs {reference} (wins) | mean abs(A) | mean Φ | anchor lag "
            f"| anchor rmse |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        final = " | ".join(_pm(r[f"{f}_final"], r[f"{f}_final_sd"]) for f in ("acc_train", "acc_hard", "acc_heldout"))
        vs = "| – | – "
        if f"acc_train_vs_{reference}" in r:
            vs = "".join(
                f"| {_pm(r[f'{f}_vs_{reference}'], r[f'{f}_vs_{reference}_sd'])} ({r[f'{f}_wins']}/{r['seeds']}) "
                for f in ("acc_train", "acc_hard")
            )
        lines.append(
            f"| {r['method']} | {r['G']} | {r['lambda']:g} | {r['lr_mult']:g} "
            f"| {final} | {_pm(r['auc_train'], r['auc_train_sd'])} "
            + vs
            + f"| {r['adv_abs_mean']:.3f} | {_pm(r['phi_mean'], 0.0).split(' ')[0]} "
            f"| {_pm(r.get('anchor_lag', float('nan')), r.get('anchor_lag_sd', float('nan')))} "
            f"| {_pm(r.get('anchor_rmse', float('nan')), 0.0).split(' ')[0]} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- files
def _write_csv(path: Path, rows: list[dict], fields: list[str]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def _curve_rows(records: list[dict], methods: list[Method]) -> list[dict]:
    stacks = {f: stack(records, f) for f in CURVE_FIELDS}
    rows = []
    for m in methods:
        if m.name not in stacks["acc_train"]:
            continue
        steps = stacks["acc_train"][m.name].shape[1]
        for t in range(steps):
            row = {"method": m.name, "step": t}
            for f in CURVE_FIELDS:
                row[f"{f}_mean"], row[f"{f}_sd"] = _mean_sd(stacks[f][m.name][:, t])
            rows.append(row)
    return rows


def _band(ax, x, arr, label, **kw):
    mean = np.nanmean(arr, axis=0)
    sd = np.nanstd(arr, axis=0, ddof=1) if arr.shape[0] > 1 else np.zeros_like(mean)
    (line,) = ax.plot(x, mean, label=label, **kw)
    ax.fill_between(x, mean - sd, mean + sd, color=line.get_color(), alpha=0.15, lw=0)


def plot_curves(records, methods, path: Path, title: str) -> Path | None:
    names = [m for m in methods if m.family in ("main", "control")]
    if not names:
        return None
    plt = pyplot()
    fields = [("acc_train", "accuracy (all training prompts)"), ("acc_hard", "hard-tercile accuracy"),
              ("acc_heldout", "held-out accuracy (shared skill)")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for (field, ylabel), ax in zip(fields, axes):
        data = stack(records, field)
        for i, m in enumerate(names):
            arr = data[m.name]
            _band(ax, np.arange(arr.shape[1]), arr, m.label, color=f"C{i}", ls="--" if m.family == "control" else "-")
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path, dpi=110)


def plot_lambda(rows, path: Path, title: str) -> Path | None:
    by_name = {r["method"]: r for r in rows}
    lam_rows = sorted([r for r in rows if r["family"] == "lambda" or r["method"] == "hadw"], key=lambda r: r["lambda"])
    if len(lam_rows) < 2:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    panels = ((axes[0], "acc_train", "final accuracy"), (axes[1], "acc_hard", "final hard-tercile accuracy"))
    for ax, field, ylabel in panels:
        lam = [r["lambda"] for r in lam_rows]
        ax.errorbar(lam, [r[f"{field}_final"] for r in lam_rows], [r[f"{field}_final_sd"] for r in lam_rows],
                    marker="o", capsize=3, label="HA-DW (λ sweep)")
        lr_rows = sorted([r for r in rows if r["method"] == "grpo" or r["method"].startswith("grpo_lrx")],
                         key=lambda r: r["lr_mult"])
        if len(lr_rows) > 1:  # GRPO with lr × m, drawn at x = m: the pure step-size curve
            ax.errorbar([r["lr_mult"] for r in lr_rows], [r[f"{field}_final"] for r in lr_rows],
                        [r[f"{field}_final_sd"] for r in lr_rows], marker="^", color="k", capsize=3, ls="--",
                        label="GRPO with lr × x (step size only)")
        if "grpo" in by_name:
            ax.axhline(by_name["grpo"][f"{field}_final"], color="k", ls=":", lw=1, label=METHODS["grpo"].label)
        if "hadw_normphi" in by_name:
            r = by_name["hadw_normphi"]
            ax.errorbar([1.3], [r[f"{field}_final"]], [r[f"{field}_final_sd"]], marker="s", color="C3", capsize=3,
                        ls="none", label=METHODS["hadw_normphi"].label)
        ax.set_xlabel("λ_scale (HA-DW) or learning-rate multiplier (GRPO)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path, dpi=110)


def plot_anchor(records, methods, path: Path, title: str) -> Path | None:
    hadw = [m for m in methods
            if m.estimator == "hadw" and m.family in ("main", "eta", "anchor") and m.hadw.get("base") != "dgpo"]
    if not hadw:
        return None
    plt = pyplot()
    prior, capability, batch = stack(records, "anchor_prior"), stack(records, "acc_train"), stack(records, "batch_acc")
    kalman = [m for m in hadw if m.family in ("main", "eta")]
    others = [m for m in hadw if m.family == "anchor" or m.name == "hadw"]
    groups = [("Kalman anchor, σ from the anchor (Eq. 10) and from the accuracy", kalman),
              ("Fixed / moving-average / released-code anchors", others)]
    fig, axes = plt.subplots(1, 2, figsize=(15, 5), sharey=True)
    for ax, (subtitle, ms) in zip(axes, groups):
        ref = capability[ms[0].name][0] if ms else None
        if ref is not None:
            ax.plot(np.arange(1, len(ref)), ref[:-1], color="k", lw=2, label="model accuracy (seed 0, HA-DW default)")
            ax.plot(np.arange(len(ref)), batch[ms[0].name][0], color="0.6", lw=0.6, label="batch accuracy y_t (seed 0)")
        for i, m in enumerate(ms):
            arr = prior[m.name]
            ax.plot(np.arange(arr.shape[1]), arr[0], color=f"C{i}", lw=1.2, label=f"C⁻: {m.label}")
        ax.set_title(subtitle, fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("anchor prior C_t⁻ (seed 0)")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path, dpi=110)


def plot_summary(rows, path: Path, title: str, reference: str = "grpo") -> Path | None:
    rows = [r for r in rows if f"acc_train_vs_{reference}" in r and r["method"] != reference]
    if not rows:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5))
    y = np.arange(len(rows))[::-1]
    for offset, field, label in ((0.18, "acc_train", "all prompts"), (-0.18, "acc_hard", "hard tercile")):
        ax.barh(y + offset, [r[f"{field}_vs_{reference}"] for r in rows], height=0.36,
                xerr=[r[f"{field}_vs_{reference}_sd"] for r in rows], capsize=2, label=label)
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=7)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel(f"final accuracy − {reference} (paired by seed, mean ± sd)")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path, dpi=110)


def write_outputs(records, methods, cfg, out_dir, plots: bool = True) -> tuple[list[dict], list[Path]]:
    """Write into ``out_dir``: ``steps.csv`` (every step of every run), ``curves.csv`` (per method and step: mean and
    sd over seeds), ``summary.csv`` (one row per method), ``comparisons.csv`` (``KEY_COMPARISONS``: the paper's
    comparisons and the controls as paired differences), ``summary.md`` (both tables), and ``curves.png``,
    ``lambda.png``, ``anchor.png``, ``summary.png``; returns (summary rows, written paths)."""
    from verl_hadw.research.sim.runner import RECORD_FIELDS

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = summarise(records, methods)
    paths = [out / "steps.csv", out / "curves.csv", out / "summary.csv", out / "summary.md"]
    _write_csv(paths[0], records, RECORD_FIELDS)
    curve_rows = _curve_rows(records, methods)
    _write_csv(paths[1], curve_rows, list(curve_rows[0]) if curve_rows else ["method", "step"])
    summary_fields = list(dict.fromkeys(k for r in rows for k in r))
    _write_csv(paths[2], rows, summary_fields)
    comparisons = key_comparisons(records)
    paths.append(out / "comparisons.csv")
    _write_csv(paths[-1], comparisons, list(comparisons[0]) if comparisons else ["comparison"])
    paths[3].write_text(summary_markdown(rows) + "\n\n" + comparisons_markdown(comparisons) + "\n")
    if plots:
        seeds = rows[0]["seeds"] if rows else 0
        tag = (f"{cfg.optimizer.upper()}, {cfg.steps} steps, {cfg.batch_prompts} prompts/step, "
               f"mean ± sd over {seeds} seeds")
        for made in (
            plot_curves(records, methods, out / "curves.png", f"Learning curves ({tag})"),
            plot_lambda(rows, out / "lambda.png", f"λ_scale sweep and step-size controls ({tag})"),
            plot_anchor(records, methods, out / "anchor.png", f"Anchor trajectories ({cfg.optimizer.upper()})"),
            plot_summary(rows, out / "summary.png", f"Final accuracy vs GRPO ({tag})"),
        ):
            if made is not None:
                paths.append(made)
    return rows, paths

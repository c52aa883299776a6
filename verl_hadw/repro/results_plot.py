"""``verl-hadw results``'s plot: validation accuracy per benchmark and step, the paper's numbers dashed."""

from __future__ import annotations

import math
from pathlib import Path

from verl_hadw.repro.catalogue import BENCHMARK_NAMES, BENCHMARKS, TABLES
from verl_hadw.repro.results import RunResult, average, experiment
from verl_hadw.toy.plotting import pyplot, save_figure

__all__ = ["plot"]


def plot(results: dict[str, RunResult], path: str | Path) -> Path:
    """Validation accuracy vs step: one panel per benchmark (and AVG), one line per run, the paper's number
    dashed in the run's colour."""
    plt = pyplot()
    order = [b for paper in ("hadw", "dgpo") for b in BENCHMARKS[paper]]
    names = sorted({ds for r in results.values() for ds in (*r.curves.columns, *r.final)},
                   key=lambda d: (order.index(d) if d in order else 99, d))
    paper_values = {}
    for table in TABLES:
        for row in table.rows:
            exp = experiment(row.run)
            for ds, value in zip(BENCHMARKS[table.paper], row.paper):
                if value is not None:
                    paper_values.setdefault((exp, ds), value)
    panels = names + ["AVG"]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, result) in enumerate(sorted(results.items())):
        color = colors[i % len(colors)]
        for j, ds in enumerate(panels):
            ax = axes[j // cols][j % cols]
            bench = BENCHMARKS.get(name.split("_", 1)[0])
            if ds == "AVG":
                # the paper's AVG: the mean over its benchmarks, at steps where all of them were validated
                have = bench is not None and all(b in result.curves for b in bench)
                series = result.curves[list(bench)].dropna().mean(axis=1) if have else None
                final = average([result.final.get(b) for b in bench]) if bench else float("nan")
            else:
                series = result.curves[ds].dropna() if ds in result.curves else None
                final = result.final.get(ds, float("nan"))
            if series is not None and len(series):
                ax.plot(series.index, series.values, marker="o", ms=3, color=color, label=name)
            if result.source == "eval" and not math.isnan(final):
                # the final evaluation pass (<run>/eval/): one star at the evaluated step
                ax.plot([result.step], [final], marker="*", ms=12, color=color, ls="none")
            if ds == "AVG" and bench is not None:
                row = next((r for t in TABLES for r in t.rows if experiment(r.run) == name and r.paper_avg), None)
                if row is not None:
                    ax.axhline(row.paper_avg, color=color, ls="--", lw=1)
            elif (name, ds) in paper_values:
                ax.axhline(paper_values[(name, ds)], color=color, ls="--", lw=1)
    for j, ds in enumerate(panels):
        ax = axes[j // cols][j % cols]
        ax.set_title(BENCHMARK_NAMES.get(ds, ds) + (" (over the paper's benchmarks)" if ds == "AVG" else ""))
        ax.set_xlabel("step")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
    for j in range(len(panels), rows * cols):
        axes[j // cols][j % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=8)
    fig.suptitle("Validation accuracy (dashed: the paper's number; star: final evaluation pass)")
    return save_figure(fig, path, dpi=120, rect=(0, 0.06 + 0.02 * math.ceil(len(labels) / 3), 1, 0.96))

"""``verl-hadw results``: verl's validation metrics -> the papers' tables, side by side, and a plot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verl_hadw.repro import results as _results
from verl_hadw.repro.results import ResultsError, RunResult, other_runs_table, paper_tables, read_run, render
from verl_hadw.repro.results_plot import plot


def results_main(args: argparse.Namespace) -> int:
    try:
        results: dict[str, RunResult] = {}
        for d in args.run_dirs:
            result = read_run(d, args.step)
            if result.name in results:
                raise ResultsError(f"two run directories are named {result.name!r}: {results[result.name].path}, {d}")
            results[result.name] = result
    except ResultsError as exc:
        print(f"verl-hadw results: {exc}", file=sys.stderr)
        return 2
    print(render(results))
    if args.csv:
        import pandas as pd

        frames = [frame.assign(table=table.key) for table, frame in paper_tables(results)]
        others = other_runs_table(results)
        if others is not None:
            frames.append(others.assign(table="other"))
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        pd.concat(frames, ignore_index=True).to_csv(args.csv, index=False)
        print(f"\n[results] table written to {args.csv}")
    if not args.no_plot:
        print(f"[results] plot written to {plot(results, args.plot)}")
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "results",
        help="paper-style tables (ours beside the paper's numbers) and a plot from verl run logs",
        description=_results.__doc__.split("\n\n")[0],
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (e.g. runs/hadw/<experiment>)")
    p.add_argument("--step", type=int, help="report the last validation at or before this step (default: last)")
    p.add_argument("--plot", default="results.png", help="plot path (default: results.png)")
    p.add_argument("--no-plot", action="store_true", help="do not write the plot")
    p.add_argument("--csv", help="also write the tables as CSV")
    p.set_defaults(func=results_main)

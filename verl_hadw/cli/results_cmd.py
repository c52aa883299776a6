"""``verl-hadw results``: verl's validation metrics -> the papers' tables, side by side, and a plot."""

from __future__ import annotations

import argparse
from pathlib import Path

from verl_hadw.cli.arguments import CommandError, InputDir, OutputFile, count, writing
from verl_hadw.repro import results as _results
from verl_hadw.repro.results import ResultsError, RunResult, other_runs_table, paper_tables, read_run, render
from verl_hadw.repro.results_plot import plot

PLOT_SUFFIXES = (".png", ".pdf", ".svg")  # what the plot is saved as, by its suffix


def results_main(args: argparse.Namespace) -> int:
    results: dict[str, RunResult] = {}
    for d in args.run_dirs:
        try:
            result = read_run(d, args.step)
        except ResultsError as exc:
            raise CommandError("argument RUN_DIR", str(exc)) from None
        if result.name in results:
            raise CommandError("argument RUN_DIR", f"two run directories are named {result.name!r}: "
                               f"{results[result.name].path}, {d}")
        results[result.name] = result
    print(render(results))
    if args.csv:
        import pandas as pd

        frames = [frame.assign(table=table.key) for table, frame in paper_tables(results)]
        others = other_runs_table(results)
        if others is not None:
            frames.append(others.assign(table="other"))
        with writing("--csv", args.csv):
            Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
            pd.concat(frames, ignore_index=True).to_csv(args.csv, index=False)
        print(f"\n[results] table written to {args.csv}")
    if not args.no_plot:
        with writing("--plot", args.plot):
            written = plot(results, args.plot)
        print(f"[results] plot written to {written}")
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "results",
        help="paper-style tables (ours beside the paper's numbers) and a plot from verl run logs",
        description=_results.__doc__.split("\n\n")[0],
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", type=InputDir(),
                   help="run directories (e.g. runs/hadw/<experiment>)")
    p.add_argument("--step", type=count(0), help="report the last validation at or before this step (default: last)")
    p.add_argument("--plot", default="results.png", type=OutputFile(PLOT_SUFFIXES),
                   help=f"plot path, {' '.join(PLOT_SUFFIXES)} (default: results.png)")
    p.add_argument("--no-plot", action="store_true", help="do not write the plot")
    p.add_argument("--csv", type=OutputFile(), help="also write the tables as CSV")
    p.set_defaults(func=results_main)

"""``verl-hadw theory``: the paper's bias tables (Tables 4-6, Corollary 1) beside ours, and PNG plots."""

from __future__ import annotations

import argparse
import warnings

from verl_hadw.cli.arguments import OutputDir, writing


def theory(args: argparse.Namespace) -> int:
    from verl_hadw.research.theory_report import theory_report

    # the λ table imports verl (for the estimator's Φ): silence its optional-engine notices, as pytest.ini does
    warnings.filterwarnings("ignore", message=r".* engine is not available", category=UserWarning)
    with writing("--out", args.out):
        report = theory_report(out_dir=None if args.no_plots else args.out, plots=not args.no_plots)
    print(report)
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser("theory", help="bias theory: the paper's Tables 4-6 and Corollary 1 beside ours, PNG plots")
    p.add_argument("--out", default="runs/theory", type=OutputDir(),
                   help="directory for bias.png and dgpo_update_magnitude.png")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=theory)

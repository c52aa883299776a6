"""``verl-hadw options``: every ``algorithm.hadw`` / ``algorithm.dgpo`` option with its default and doc."""

from __future__ import annotations

import argparse


def options(_args: argparse.Namespace) -> int:
    from verl_hadw.core.options import options_yaml

    print(options_yaml())
    return 0


def add_subcommand(sub) -> None:
    sub.add_parser("options", help="print every algorithm.hadw / algorithm.dgpo option (defaults, docs)").set_defaults(
        func=options
    )

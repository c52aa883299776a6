"""``verl-hadw``: one small module per subcommand; each imports its heavy dependencies only when run.

``doctor`` (is the plugin wired into verl?), ``demo`` (synthetic batches through verl's compute_advantage),
``theory``, ``simulate`` and ``study`` (research extra), ``configs``, ``data`` and ``results`` (repro extra).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module under verl_hadw.cli, the extra that brings its dependencies)
SUBCOMMANDS = {
    "doctor": ("doctor", None),
    "options": ("options", None),
    "demo": ("demo", None),
    "theory": ("theory", "research"),
    "simulate": ("simulate", "research"),
    "study": ("study", "research"),
    "configs": ("configs", "repro"),
    "data": ("data", "repro"),
    "results": ("results", "repro"),
    "smoke-check": ("smoke", "repro"),
}
# the import names of each extra's packages, to say which extra to install when one is missing
EXTRA_MODULES = {"research": ("scipy", "matplotlib"), "repro": ("datasets", "math_verify", "matplotlib", "tensorboard")}


class MissingExtraError(SystemExit):
    pass


def require_extra(extra: str | None) -> None:
    """Exit with a message naming the pip extra when one of its packages is not importable."""
    if extra is None:
        return
    missing = [m for m in EXTRA_MODULES[extra] if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            f"verl-hadw: this subcommand needs the '{extra}' extra ({', '.join(missing)} missing): "
            f"pip install 'verl-hadw[{extra}]'"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="verl-hadw", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for module in dict.fromkeys(m for m, _ in SUBCOMMANDS.values()):
        importlib.import_module(f"verl_hadw.cli.{module}").add_subcommand(sub)
    args = parser.parse_args(argv)
    require_extra(SUBCOMMANDS[args.command][1])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

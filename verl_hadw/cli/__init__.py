"""``verl-hadw``: one small module per subcommand; each imports its heavy dependencies only when run.

``doctor`` (is the plugin wired into verl?), ``demo`` (synthetic batches through verl's compute_advantage),
``theory``, ``simulate`` and ``study`` (research extra), ``configs``, ``data`` and ``results`` (repro extra).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from pathlib import Path

# subcommand -> (module under verl_hadw.cli, the extra that brings its dependencies)
SUBCOMMANDS = {
    "doctor": ("doctor_cmd", None),
    "options": ("options_cmd", None),
    "demo": ("demo_cmd", None),
    "theory": ("theory_cmd", "research"),
    "simulate": ("simulate_cmd", "research"),
    "study": ("study_cmd", "research"),
    "configs": ("configs_cmd", "repro"),
    "data": ("data_cmd", "repro"),
    "results": ("results_cmd", "repro"),
    "smoke-check": ("smoke_check_cmd", "repro"),
}


class MissingExtraError(SystemExit):
    """A subcommand needs a pip extra that is not installed."""


# the import names of each extra's packages, to say which extra to install when one is missing
EXTRA_MODULES = {"research": ("scipy", "matplotlib"), "repro": ("datasets", "math_verify", "matplotlib", "tensorboard")}


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


def _summary(module: str) -> str:
    """The first docstring line of ``verl_hadw.cli.<module>``, read without importing it (for ``--help``)."""
    spec = importlib.util.find_spec(f"verl_hadw.cli.{module}")
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    return doc.split("\n")[0].split(": ", 1)[-1]


class Parser(argparse.ArgumentParser):
    """argparse, but a refusal is the one line ``verl-hadw <cmd>: error: <message>`` (exit 2), without the usage
    block above it (``--help`` shows that)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """verl-hadw's parser and the full parser of the subcommand ``argv`` names (None when it names none): only
    that subcommand's module is imported (after its extra is checked); the others appear in ``--help`` by their
    docstring's first line."""
    parser = Parser(prog="verl-hadw", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    for name, (module, extra) in SUBCOMMANDS.items():
        if name == chosen:
            require_extra(extra)
            importlib.import_module(f"verl_hadw.cli.{module}").add_subcommand(sub)
        else:
            sub.add_parser(name, help=_summary(module), add_help=False)
    return parser, sub.choices.get(chosen)


def run(args: argparse.Namespace) -> int:
    """The subcommand itself, once every argument has passed its checks."""
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. Its arguments are checked first (``verl_hadw.cli.arguments``); a refused argument, or a
    file error while it runs, ends in one line naming the argument and status 2 (argparse's own errors exit 2
    with the same line)."""
    from verl_hadw.cli.arguments import CommandError, check_arguments, os_error_argument

    argv = sys.argv[1:] if argv is None else list(argv)
    parser, subparser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        check_arguments(subparser, args)
        return run(args)
    except CommandError as exc:
        message = str(exc)
    except OSError as exc:
        message = str(os_error_argument(subparser, args, exc))
    print(f"{subparser.prog}: error: {' '.join(message.split())}", file=sys.stderr)  # one line, even Hydra's
    return 2


if __name__ == "__main__":
    sys.exit(main())

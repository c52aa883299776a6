"""The kinds of value a ``verl-hadw`` argument takes, checked before a subcommand starts any work.

Each argument declares its kind through a ``type=`` helper below (or argparse ``choices``): the helper checks the
spelling while argparse parses, its ``check`` the world after parsing (the file exists, the directory can be made).
A refusal is one line, ``verl-hadw <cmd>: error: argument <arg>: <problem>``, exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import stat
import tempfile
from pathlib import Path

TEXT_SAMPLE = 64 * 1024  # bytes read to tell text from binary


class CommandError(Exception):
    """A refused argument (or environment variable): ``argument`` names it, ``problem`` says what is wrong."""

    def __init__(self, argument: str, problem: str):
        super().__init__(f"{argument}: {problem}")
        self.argument, self.problem = argument, problem


def action_name(action: argparse.Action) -> str:
    """How argparse names an argument in its errors: ``--plot``, ``--out/-o``, or a positional's metavar."""
    if action.option_strings:
        return "/".join(action.option_strings)
    return action.metavar if isinstance(action.metavar, str) else action.dest


class Kind:
    """A ``type=`` helper: ``__call__`` checks the spelling at parse time, ``check`` the world before the run."""

    kinds: tuple[str, ...] = ()
    __name__ = "value"  # argparse names the type in "invalid <name> value"

    def __call__(self, text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError("an empty value")
        return text

    def check(self, value: str) -> str | None:
        """The problem with ``value`` (a path to create, a file to read), or None when it is fine."""
        return None

    def wrap(self, value: str) -> str:
        """How a bare path or name is written as this argument's value (``NAME=PATH`` arguments add a name)."""
        return value

    def path_of(self, value: str) -> str:
        """The path inside a value (the inverse of ``wrap``)."""
        return value


def _blocked(path: Path) -> str | None:
    """'X is not a directory' when an existing ancestor of ``path`` is a file (or a device, a FIFO)."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return f"{parent} is not a directory"
    return None


def _missing(path: Path) -> str:
    return _blocked(path) or f"no such file or directory: {path}"


def _creatable_dir(directory: Path) -> str | None:
    """The reason ``directory`` cannot be made or written into, tried by making a temporary directory in the
    nearest existing ancestor (``os.access`` says yes to root on /proc)."""
    problem = _blocked(directory)
    if problem:
        return problem
    if directory.exists() and not directory.is_dir():
        return f"{directory} is not a directory"
    existing = next(p for p in (directory, *directory.parents) if p.exists())
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".verl-hadw-probe-", dir=existing))
    except OSError as exc:
        verb = "write into" if existing == directory else "create"
        return f"cannot {verb} {directory}: {exc.strerror}"
    return None


class InputFile(Kind):
    """An existing regular file, read as UTF-8 text unless ``text=False`` (no device, FIFO or directory)."""

    __name__ = "file"

    def __init__(self, text: bool = True):
        self.text = text
        self.kinds = ("input_file", "text_file") if text else ("input_file",)

    def check(self, value: str) -> str | None:
        path = Path(value).expanduser()
        try:
            if not path.exists():
                return _missing(path)
            if path.is_dir():
                return f"{value} is a directory, not a file"
            if not stat.S_ISREG(path.stat().st_mode):
                return f"{value} is not a regular file (a device, FIFO or socket)"
            with open(path, "rb") as f:
                sample = f.read(TEXT_SAMPLE)
        except OSError as exc:
            return f"cannot read {value}: {exc.strerror}"
        if self.text and (b"\0" in sample or sample.decode("utf-8", "replace").count("\ufffd") > len(sample) // 100):
            return f"{value} is a binary file, not text"
        return None


class InputDir(Kind):
    """An existing directory."""

    __name__ = "directory"
    kinds = ("input_dir",)

    def check(self, value: str) -> str | None:
        path = Path(value).expanduser()
        try:
            if not path.exists():
                return _missing(path)
            if not path.is_dir():
                return f"{value} is not a directory"
            os.listdir(path)
        except OSError as exc:
            return f"cannot read {value}: {exc.strerror}"
        return None


class InputPath(InputFile):
    """An existing file (any content) or directory."""

    __name__ = "path"
    kinds = ("input_path",)

    def __init__(self):
        super().__init__(text=False)
        self.kinds = ("input_path",)

    def check(self, value: str) -> str | None:
        path = Path(value).expanduser()
        return InputDir().check(value) if path.is_dir() else super().check(value)


class OutputFile(Kind):
    """A file to write (its directory is made): not a directory, under a directory that can be made or written
    into, with one of ``suffixes`` when given."""

    __name__ = "output file"
    kinds = ("output_file",)

    def __init__(self, suffixes: tuple[str, ...] = ()):
        self.suffixes = suffixes

    def __call__(self, text: str) -> str:
        text = super().__call__(text)
        if self.suffixes and Path(text).suffix.lower() not in self.suffixes:
            raise argparse.ArgumentTypeError(f"{text!r} does not end in {', '.join(self.suffixes)}")
        return text

    def check(self, value: str) -> str | None:
        path = Path(value).expanduser()
        try:
            if path.is_dir():
                return f"{value} is a directory; give a file name"
            if path.exists():
                return _blocked(path) or (None if os.access(path, os.W_OK) else f"{value} is not writable")
            return _creatable_dir(path.parent)
        except OSError as exc:
            return f"cannot write {value}: {exc.strerror}"


class OutputDir(Kind):
    """A directory to write into: it exists or can be made."""

    __name__ = "output directory"
    kinds = ("output_dir",)

    def check(self, value: str) -> str | None:
        try:
            return _creatable_dir(Path(value).expanduser())
        except OSError as exc:
            return f"cannot write {value}: {exc.strerror}"


class Choice(Kind):
    """One of a set known only at run time (runs of the catalogue, suites): ``names()`` lists them; ``parse``
    (optional) turns the text into the value or raises ValueError."""

    __name__ = "choice"
    kinds = ("choice",)

    def __init__(self, names, parse=None, at_parse_time: bool = True):
        self.names, self.parse, self.at_parse_time = names, parse, at_parse_time

    def _problem(self, text: str) -> str | None:
        try:
            if self.parse is not None:
                self.parse(text)
                return None
        except ValueError as exc:
            return str(exc)
        if text in self.names():
            return None
        import difflib

        close = difflib.get_close_matches(text, self.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{text!r} is not one of {', '.join(self.names())}{hint}"

    def __call__(self, text: str) -> str:
        text = super().__call__(text)
        problem = self._problem(text) if self.at_parse_time else None
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text

    def check(self, value: str) -> str | None:
        return None if self.at_parse_time else self._problem(value)


class Text(Kind):
    """Free text that is neither a path nor a choice (Hydra overrides, a glob, a config key)."""

    __name__ = "text"
    kinds = ("text",)


class Number(Kind):
    """A finite int (``integer=True``) or float, at least ``minimum``, above ``above``, at most ``maximum``."""

    kinds = ("number",)

    def __init__(self, integer: bool = True, minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None):
        self.integer, self.minimum, self.maximum, self.above = integer, minimum, maximum, above
        self.__name__ = "int" if integer else "float"

    def __call__(self, text: str):
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole' if self.integer else 'a'} number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if self.minimum is not None and value < self.minimum:
            raise argparse.ArgumentTypeError(f"{text} is below the minimum, {self.minimum}")
        if self.above is not None and not value > self.above:
            raise argparse.ArgumentTypeError(f"{text} must be above {self.above}")
        if self.maximum is not None and value > self.maximum:
            raise argparse.ArgumentTypeError(f"{text} is above the maximum, {self.maximum}")
        return value


def count(minimum: int = 1) -> Number:
    """A whole number of things (steps, seeds, workers): at least ``minimum``."""
    return Number(integer=True, minimum=minimum)


@contextlib.contextmanager
def writing(argument: str, path):
    """Writes to the path of ``argument``: an OSError (a full disk has no file name) names the argument."""
    try:
        yield
    except OSError as exc:
        raise CommandError(f"argument {argument}", f"writing {path}: {exc.strerror or exc}") from None


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Run every declared ``check`` on the parsed values (defaults included): the first problem is a CommandError
    naming its argument. Nothing has run yet."""
    for action in parser._actions:
        kind, value = action.type, getattr(args, action.dest, None)
        if not isinstance(kind, Kind) or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            problem = kind.check(item)
            if problem:
                raise CommandError(f"argument {action_name(action)}", problem)


def os_error_argument(parser: argparse.ArgumentParser, args: argparse.Namespace, exc: OSError) -> CommandError:
    """An OSError raised while a subcommand ran, as a CommandError naming the path argument it concerns (the
    argument whose path is the error's file, or contains it, or lies under it)."""
    filename = Path(os.fsdecode(exc.filename)).expanduser().absolute() if exc.filename else None
    problem = f"{exc.filename}: {exc.strerror}" if exc.filename else (exc.strerror or str(exc))
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if filename is None or not isinstance(action.type, Kind) or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            path = Path(action.type.path_of(str(item))).expanduser().absolute()
            if path == filename or path in filename.parents or filename in path.parents:
                return CommandError(f"argument {action_name(action)}", problem)
    return CommandError("a file it uses", problem)

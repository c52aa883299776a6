"""verl's console log lines, ``step:N - key:value - ...``, as numbers: the one parser of them in the package.

Reads the ``console`` logger's step lines as Ray forwards them (``(TaskRunner pid=N)`` prefix, ANSI colours), values
as plain numbers or scalar reprs (``np.float64(0.5)``, ``tensor(0.5)``), and joins back the lines Ray cut in two.
Used by the CPU demo and end-to-end tests (``toy.launch``), ``verl-hadw results`` and the smoke check.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

__all__ = ["iter_console", "parse_steps"]

STEP_LINE = re.compile(r"(?:^|\s)step:(?P<step>\d+) - (?P<rest>.*)$")  # not training/global_step:N inside a line
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RAY_PREFIX = re.compile(r"^\((?P<who>[^()]* pid=\d+[^()]*)\)\s?")  # (TaskRunner pid=123) or (X pid=1, ip=...)
PIECE = re.compile(r"[ -]{0,3}\S+(?: - \S+)*")  # the rest of a cut step line: key:value parts, no spaces inside
# a value: 0.5, 1e-06, nan, or a scalar repr such as np.float64(0.5) / tensor(0.5)
NUMBER = re.compile(
    r"\s*(?:[A-Za-z_][\w.]*\()?\s*(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan)\s*\)?\s*"
)


def _records(lines: Iterable[str]) -> list[tuple[int, str]]:
    """(line number, text) of each step line, with the pieces Ray cut off joined back.

    Ray's log monitor forwards what a worker has written so far, so verl's step line (several kB with validation
    metrics) can come in two: ``... - globa``, then, maybe after other actors' lines, a line with the same
    ``(Actor pid=N)`` prefix, ``l_seqlen/mean:2784.0 - actor/entropy:3.3 - ...``. Such a piece (no step of its own,
    only ``key:value`` parts without spaces) is joined to its step line, so no metric of the step is lost.
    """
    records: list[list] = []
    open_step: dict[str, int] = {}  # Ray prefix -> index of its latest record, while that is a step line
    for i, line in enumerate(lines):
        text = ANSI.sub("", line).rstrip("\n")
        prefix = RAY_PREFIX.match(text)
        who, body = (prefix.group("who"), text[prefix.end():]) if prefix else (None, text)
        is_step = STEP_LINE.search(body) is not None
        if who in open_step and not is_step and PIECE.fullmatch(body):
            records[open_step[who]][1] += body
            continue
        if who is not None and body.strip():  # an actor's next line: its step line (if any) has ended
            open_step.pop(who, None)
        if is_step:
            records.append([i, body])
            if who is not None:
                open_step[who] = len(records) - 1
    return [(i, body) for i, body in records]


def iter_console(lines: Iterable[str]) -> Iterator[tuple[int, int, str, float]]:
    """(line number, step, key, value) for every numeric value of every step line."""
    for i, line in _records(lines):
        match = STEP_LINE.search(line)
        if not match:
            continue
        step = int(match.group("step"))
        for part in match.group("rest").split(" - "):
            key, sep, value = part.partition(":")
            number = NUMBER.fullmatch(value) if sep else None
            if number is not None and key.strip():
                yield i, step, key.strip(), float(number.group("num"))


def parse_steps(log: str) -> dict[int, dict[str, float]]:
    """Per-step metrics of a whole log (later lines win)."""
    steps: dict[int, dict[str, float]] = {}
    for _, step, key, value in iter_console(log.splitlines()):
        steps.setdefault(step, {})[key] = value
    return steps

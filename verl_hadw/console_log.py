"""verl's console log lines, ``step:N - key:value - ...``, as numbers: the one parser of them in the package.

verl's ``console`` logger prints one such line per step (through Ray, prefixed ``(TaskRunner pid=N)``, maybe with
ANSI colours). Values may be plain numbers or scalar reprs (``np.float64(0.5)``, ``tensor(0.5)``); others are
skipped. Used by the CPU demo and end-to-end tests (``toy.launch``), ``verl-hadw results`` and the smoke check.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

__all__ = ["iter_console", "parse_steps"]

STEP_LINE = re.compile(r"step:(?P<step>\d+) - (?P<rest>.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# a value: 0.5, 1e-06, nan, or a scalar repr such as np.float64(0.5) / tensor(0.5)
NUMBER = re.compile(
    r"\s*(?:[A-Za-z_][\w.]*\()?\s*(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan)\s*\)?\s*"
)


def iter_console(lines: Iterable[str]) -> Iterator[tuple[int, int, str, float]]:
    """(line number, step, key, value) for every numeric value of every step line."""
    for i, line in enumerate(lines):
        match = STEP_LINE.search(ANSI.sub("", line).rstrip("\n"))
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

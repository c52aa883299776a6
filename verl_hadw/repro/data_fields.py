"""One source record of a math dataset -> question, gold answer, level, subject and id (used by ``repro.data``).

Copies of the same set name their columns differently (``problem`` / ``question``, ``answer`` / ``solution``) and
write answers in several ways (``\\boxed{}`` in a solution, lists, ``$...$``, AIME's ``"025"``): the gold answer
comes out as the one string the reward checker compares.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Iterable

from verl_hadw.repro.data_sources import DataSourceError

__all__ = ["last_boxed", "normalize_answer", "normalize_gold", "parse_level", "extract_fields"]

PROBLEM_KEYS = ("problem", "question", "Problem", "Question")
ANSWER_KEYS = ("answer", "final_answer", "Answer", "expected_answer")
SOLUTION_KEYS = ("solution", "Solution")
ID_KEYS = ("unique_id", "id", "ID", "idx")


BOXED_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` (braces balanced), or of the brace-less
    ``\\boxed 2`` form (up to the closing ``$``, as verl's ``last_boxed_only_string``); None if absent or unclosed.

    At least as tolerant as verl's ``last_boxed_only_string`` + ``remove_boxed`` (MATH train writes ``$\\boxed 2$``
    in ``algebra/24014.json`` and ``25040.json``), and it also takes ``\\fbox{...}``, where ``remove_boxed`` asserts.
    """
    matches = list(BOXED_RE.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():]
    stripped = rest.lstrip()
    if not stripped.startswith("{"):  # \boxed 2$ : the argument runs to the closing $ (or the line's end)
        answer = re.split(r"[$\n]", stripped, maxsplit=1)[0].strip()
        return answer or None
    depth = 0
    for i, char in enumerate(stripped):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return stripped[1:i]
    return None


def normalize_answer(value: Any) -> str | None:
    """A gold answer as one string: lists joined by ', ', surrounding ``$`` removed; None if empty."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            parsed = None
        if isinstance(parsed, list):
            value = parsed
    if isinstance(value, (list, tuple)):
        parts = [normalize_answer(v) for v in value]
        parts = [p for p in parts if p]
        return ", ".join(parts) if parts else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    while len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text[1:-1].strip()
    return text or None


# AIME answers are integers 0-999 by the contest's rules; copies store them as "025", 25 or 25.0. The string
# checker (backend auto -> verl_math) compares strings, so the gold is written one way: "25".
INTEGER_ANSWER_SETS = frozenset({"aime24", "aime25"})


def normalize_gold(name: str, answer: str) -> str:
    """The gold as the checker should see it: integer answers of ``INTEGER_ANSWER_SETS`` without leading zeros."""
    if name in INTEGER_ANSWER_SETS and re.fullmatch(r"[+-]?\d+", answer):
        return str(int(answer))
    return answer


def parse_level(value: Any) -> int | None:
    """MATH level: 3, "3" or "Level 3" -> 3; "Level ?", NaN or missing -> None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (int, float)):
        return int(value) if 1 <= int(value) <= 5 else None
    match = re.search(r"([1-5])", str(value))
    return int(match.group(1)) if match else None


def _first(record: dict, keys: Iterable[str]) -> Any:
    for key in keys:
        value = record.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):  # pandas stores gaps as NaN
            continue
        if not (isinstance(value, str) and not value.strip()):
            return value
    return None


def extract_fields(name: str, record: dict, position: int) -> dict:
    """question, answer, level, subject, id of one source record; raises DataSourceError naming the fields."""
    question = _first(record, PROBLEM_KEYS)
    answer = normalize_answer(_first(record, ANSWER_KEYS))
    if answer is None:
        solution = _first(record, SOLUTION_KEYS)
        if solution is not None:
            # MATH train has no answer column (its gold answer is the solution's last \boxed{}); some Minerva
            # copies keep the bare final answer in "solution".
            text = str(solution)
            answer = normalize_answer(last_boxed(text) if BOXED_RE.search(text) else text)
    if question is None or answer is None:
        raise DataSourceError(
            f"{name}: record {position} has no {'question' if question is None else 'answer'}: looked for "
            f"{PROBLEM_KEYS if question is None else ANSWER_KEYS + SOLUTION_KEYS}; record keys: {sorted(record)}"
        )
    identifier = _first(record, ID_KEYS)
    return {
        "question": str(question).strip(),
        "answer": normalize_gold(name, answer),
        "level": parse_level(record.get("level", record.get("Level"))),
        "subject": _first(record, ("subject", "type", "Subject")),
        "id": str(identifier) if identifier is not None else f"{name}-{position}",
    }

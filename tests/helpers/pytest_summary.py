"""What a pytest run printed in its summary, read by the framework environments' readers: an environment passes only
when its tests all passed, none failed, erred, was skipped, xfailed or xpassed."""

from __future__ import annotations

import re

__all__ = ["NOT_PASSED", "failures", "not_passed", "passed_count"]

NOT_PASSED = re.compile(r"\b(\d+) (failed|errors?|skipped|xfailed|xpassed)\b")


def not_passed(output: str) -> list[str]:
    """Every "N failed" / "N error(s)" / "N skipped" / "N xfailed" / "N xpassed" pytest printed (empty: none)."""
    return [m.group(0) for m in NOT_PASSED.finditer(output)]


def failures(output: str, limit: int = 12000) -> str:
    """What pytest printed of its failures and errors (each test's traceback and assertion), else the output's tail;
    the first and last ``limit // 2`` characters of a longer text (an environment's reader shows it when it fails)."""
    sections = re.findall(r"^=+ (?:FAILURES|ERRORS) =+\n.*?(?=^=+ [^=\n]+ =+$)", output, re.M | re.S)
    text = "\n".join(sections) or output[-limit:]
    return text if len(text) <= limit else f"{text[:limit // 2]}\n[...]\n{text[-limit // 2:]}"


def passed_count(output: str) -> int:
    """The N of the last "N passed" summary (0 when there is none)."""
    counts = re.findall(r"^=*\s*(\d+) passed", output, re.M)
    return int(counts[-1]) if counts else 0

"""The TRL example runs as the docs show it: the exact commands of docs/trl.md and the README, each once,
in a fresh process from the repository root, printing each step's reward and anchor."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
from repo_paths import ROOT

COMMAND = re.compile(r"^python examples/trl_hadw\.py\b.*$", re.M)


def documented_commands() -> list[str]:
    found = []
    for page in (ROOT / "docs" / "trl.md", ROOT / "README.md"):
        found += [c for c in COMMAND.findall(page.read_text(encoding="utf-8")) if c not in found]
    return found


@pytest.mark.slow  # a TRL run in a fresh process: seconds, not the quick loop's
def test_the_documented_example_command_runs():
    commands = documented_commands()
    assert commands, "docs/trl.md shows no `python examples/trl_hadw.py` command"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert COMMAND.search(readme), "the README shows no `python examples/trl_hadw.py` command line"
    env = {**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    for command in commands:
        argv = [sys.executable, *shlex.split(command)[1:]]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, f"{command}:\n{proc.stderr[-3000:]}"
        steps = re.findall(r"^step +(\d+) +reward ([\d.]+) +anchor C- ([\d.]+) -> C\+ ([\d.]+)", proc.stdout, re.M)
        assert [int(s[0]) for s in steps] == list(range(1, 17)), proc.stdout[-2000:]
        assert all(now[2] == before[3] for before, now in zip(steps, steps[1:]))  # Eq. 12: C_t⁻ = C_{t-1}⁺
        assert len({s[3] for s in steps}) > 1  # the anchor moved
        assert "anchor after 16 generation batches" in proc.stdout

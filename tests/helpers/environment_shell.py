"""What the framework environments' scripts (``trl_environment.py``, ``swift_environment.py``) run commands with: ``sh``
(a command in the environment's own environment, offline, failing with its output) and ``freeze`` (``pip freeze`` as a
name -> version map), written once for both."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

__all__ = ["sh", "freeze"]


def sh(*cmd, cwd=None, env=None, timeout=1800) -> str:
    """Run ``cmd`` outside this checkout's environment (no PYTHONPATH or VIRTUAL_ENV), offline; its stdout, or an
    AssertionError with its output's tails."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    base.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", WANDB_MODE="disabled", **(env or {}))
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=base, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def freeze(python: Path) -> dict[str, str]:
    """name -> version (or the line, for a non-``==`` entry) of ``pip freeze``."""
    out = {}
    for line in sh(python, "-m", "pip", "freeze", "--all").splitlines():
        name, sep, version = line.partition("==")
        if not sep:  # "name @ file:///..." (a local install)
            name, _, version = line.partition(" @ ")
        out[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return out

"""What the framework environments' scripts (``trl_environment.py``, ``swift_environment.py``,
``axolotl_environment.py``) run commands with: ``sh`` (a command in the environment's own environment, offline,
failing with its output), ``freeze`` (``pip freeze`` as a name -> version map), a copy of the checkout to build from,
the extra installed and its freeze diff checked, and the freeze as pins; written once for all."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_summary import failures

__all__ = ["sh", "freeze", "checkout_copy", "install_extra", "pins", "lay", "run_tests"]


def sh(*cmd, cwd=None, env=None, timeout=1800) -> str:
    """Run ``cmd`` outside this checkout's environment (no PYTHONPATH or VIRTUAL_ENV), offline; its stdout, or an
    AssertionError with what pytest printed of its failures (``pytest_summary.failures``: the output's tail for any
    other command) and the tail of its stderr."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    base.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", WANDB_MODE="disabled", **(env or {}))
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=base, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{failures(proc.stdout)}\n{proc.stderr[-3000:]}"
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


def checkout_copy(root: Path, target: Path) -> Path:
    """A copy of the checkout ``root`` at ``target``, without what is the checkout's own (git, venvs, builds, runs):
    pip builds in the source tree, and another environment may build from ``root`` at the same time."""
    top = {".git", ".venv", "build", "site", "outputs", "runs", "data"}
    shutil.copytree(root, target, ignore=lambda folder, names: [
        n for n in names if n == "__pycache__" or n.endswith(".egg-info") or (Path(folder) == root and n in top)])
    return target


def install_extra(python: Path, source: Path, extra: str, tag: str) -> dict[str, str]:
    """``pip install <source>[<extra>]`` as a user installs it, no constraints (none may need one); prints ``pip
    freeze`` before and after (in CI's output, passed or not), checks that it added verl-hadw and nothing else and
    changed nothing installed; the freeze after."""
    before = freeze(python)
    sh(python, "-m", "pip", "install", "-q", "--no-compile", f"{source}[{extra}]")
    after = freeze(python)
    print(f"\n{tag} pip freeze before: " + " ".join(f"{k}=={v}" for k, v in sorted(before.items())))
    print(f"{tag} pip freeze after:  " + " ".join(f"{k}=={v}" for k, v in sorted(after.items())))
    changed = {k: (v, after.get(k)) for k, v in before.items() if after.get(k) != v}
    assert changed == {}, f"installed versions changed: {changed}"
    added = sorted(after.keys() - before.keys())
    print(f"{tag} added: {added}", flush=True)
    assert added == ["verl-hadw"], added
    return after


def pins(after: dict[str, str], path: Path) -> Path:
    """``after`` (a freeze) as a constraints file: what a test runner installed beside it may not change."""
    path.write_text("".join(f"{k}=={v}\n" for k, v in after.items() if re.fullmatch(r"[0-9][0-9a-z.+]*", v)))
    return path


def lay(venv: Path, *requirements: str, constraints: Path) -> Path:
    """A framework user's environment as it was before our extra, laid by uv from its cache (seconds, where pip takes
    ~100 s unpacking torch), with pip in it (``--seed``): our extra then goes in with pip, as a user installs it.
    The environment's python."""
    uv = Path(sys.executable).with_name("uv")
    sh(uv, "venv", "-q", "--seed", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    sh(uv, "pip", "install", "-q", "--python", python, "-c", constraints, *requirements)
    return python


def run_tests(venv: Path, installed: dict[str, str], root: Path, folders: list[str], reader: Path, workdir: Path,
              *options: str, env: dict | None = None) -> str:
    """pytest (pinned to what is ``installed``, the environment's freeze) in the environment, on the ``tests/``
    ``folders`` present, by path (the installed package, not the checkout's), but ``reader`` (the environment's reader,
    a test of the main environment); its output."""
    sh(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", "-c",
       pins(installed, workdir / "installed.txt"), "pytest")
    paths = [str((root / "tests" / name).relative_to(root)) for name in folders if (root / "tests" / name).is_dir()]
    out = sh(venv / "bin" / "pytest", "-q", "-rA", "-s", "-p", "no:cacheprovider", "--basetemp", workdir / "pytest",
             *options, "--ignore", reader.relative_to(root), *paths, cwd=root, env=env)
    return out


def report(tag: str, out: str, shown: tuple[str, ...], workdir: Path, timings: dict[str, float]) -> None:
    """An environment's end, for its reader: the lines of pytest's ``out`` that start with ``shown`` and its summary,
    where the runs' records are kept, the timings, and that every check passed."""
    print("\n".join(line for line in out.splitlines() if line.startswith(shown) or re.match(r"^\d+ passed", line)))
    print(f"{tag} records: {workdir / 'records'}")
    print(f"{tag} timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print(f"{tag} every check passed", flush=True)

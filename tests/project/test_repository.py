"""What git tracks: sources and docs only, nothing compiled, nothing of one machine, nothing large outside the study."""

import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

LARGE = 1 << 20  # bytes; the study's tables and plots (docs/study/) are the one exception
COMPILED = (".pyc", ".pyo", ".so", ".o", ".whl", ".egg")


def tracked() -> list[str]:
    return subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split("\0")[:-1]


def machine_paths() -> list[str]:
    """This checkout's and this interpreter's absolute paths: text that only holds on this machine."""
    paths = {str(ROOT), sys.base_prefix, sys.prefix, str(Path.home())}
    return sorted(p for p in paths if p.count("/") >= 2)


@pytest.fixture(scope="module")
def files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.fail("the tests run from a git checkout (the packaging and docs tests read it too)")
    return tracked()


def test_git_tracks_nothing_compiled(files):
    compiled = [f for f in files if f.endswith(COMPILED) or "__pycache__/" in f or f.startswith("pycache/")]
    assert compiled == [], f"compiled files are tracked; git rm --cached them and ignore them: {compiled[:5]}"


def test_git_tracks_no_file_over_a_megabyte_outside_the_study(files):
    large = [f"{f} ({size} bytes)" for f in files if not f.startswith("docs/study/")
             and (ROOT / f).is_file() and (size := (ROOT / f).stat().st_size) > LARGE]
    assert large == []


def test_git_tracks_no_machines_absolute_path(files):
    """Neither in a file's name (a tree copied from /root/...) nor in its text (a path printed by one run)."""
    roots = machine_paths()
    named = [f for f in files if any(r.lstrip("/") in f for r in roots) or f.startswith(("root/", "home/", "usr/"))]
    said = []
    for f in files:
        path = ROOT / f
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= LARGE:
            text = path.read_bytes()
            said += [f"{f}: {r}" for r in roots if r.encode() in text]
    assert named == [] and said == [], (named, said)

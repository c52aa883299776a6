"""Every step of ``scripts/test_cpu.sh`` (what CI runs) can fail the run: each test plants, in a copy of the checkout,
the fault one step exists to catch, runs the script there, and sees it exit non-zero at that step (and print the
total time when pytest ran). The docs build is the test ``tests/project/test_docs_build.py``, which plants its own
faults.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

VENV = Path(sys.prefix) if (Path(sys.prefix) / "pyvenv.cfg").exists() else None  # the venv running the tests

pytestmark = pytest.mark.slow


def checkout_copy(tmp_path: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored: a clean clone once committed), in ``tmp_path/repo``."""
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run(listing, cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    repo = tmp_path / "repo"
    for name in filter(None, (f.decode() for f in files)):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    return repo


def run_script(repo: Path, *args: str, venv: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, VERL_HADW_VENV=str(venv or VENV))
    env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run(["bash", "scripts/test_cpu.sh", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture
def repo(tmp_path):
    assert VENV is not None and (VENV / ".verl-hadw-install").exists(), "run from scripts/test_cpu.sh's venv"
    # the copy's script would otherwise reinstall into this venv, pointing its editable install at the copy
    check = subprocess.run(["bash", "scripts/install_cpu.sh", "--check"], cwd=ROOT,
                           env=dict(os.environ, VERL_HADW_VENV=str(VENV)))
    assert check.returncode == 0, (
        f"{VENV} was installed from another setup.py or constraints: run bash scripts/install_cpu.sh first")
    return checkout_copy(tmp_path)


def test_a_failing_test_fails_the_run_and_the_total_time_is_printed(repo):
    (repo / "tests" / "test_planted.py").write_text("def test_planted():\n    assert 1 == 2\n")
    proc = run_script(repo, "tests/test_planted.py")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 failed" in proc.stdout and "All checks passed" in proc.stdout + proc.stderr  # lint ran and passed
    assert "[test_cpu] pytest exit 1;" in proc.stdout and " s in all (install, lint, doctor, tests)" in proc.stdout


def test_a_lint_error_fails_the_run_before_the_tests(repo):
    (repo / "verl_hadw" / "planted.py").write_text("import os\n")
    proc = run_script(repo, "tests/project/test_ci_steps.py")
    assert proc.returncode != 0
    assert "F401" in proc.stdout + proc.stderr and "[test_cpu]" not in proc.stdout  # pytest never started


def test_a_plugin_that_does_not_register_fails_the_doctor_step(repo):
    (repo / "verl_hadw" / "verl" / "entry_point.py").write_text(
        'raise ImportError("planted: the entry point cannot import")\n')  # what verl.plugins names
    proc = run_script(repo, "tests/project/test_ci_steps.py")
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "[FAIL] registration after a plain 'import verl'" in proc.stdout and "[test_cpu]" not in proc.stdout


def test_an_install_that_fails_fails_the_run(repo, tmp_path):
    (repo / "setup.py").write_text("raise SystemExit('planted: setup.py is broken')\n")
    # a venv of its own: the install runs
    proc = run_script(repo, "tests/project/test_ci_steps.py", venv=tmp_path / "venv")
    assert proc.returncode != 0 and "planted: setup.py is broken" in proc.stdout + proc.stderr
    assert "All checks passed" not in proc.stdout + proc.stderr  # nothing after the install ran


def test_the_install_check_tells_this_checkouts_install_from_another(tmp_path):
    """``install_cpu.sh --check`` (what ``repo`` relies on): 0 for a venv stamped from this setup.py and constraints,
    1 for another stamp or none; it installs and creates nothing."""
    def check(venv: Path) -> int:
        env = dict(os.environ, VERL_HADW_VENV=str(venv))
        return subprocess.run(["bash", "scripts/install_cpu.sh", "--check"], cwd=ROOT, env=env).returncode

    venv = tmp_path / "venv"
    assert check(venv) == 1 and not venv.exists()
    venv.mkdir()
    (venv / ".verl-hadw-install").write_text("0123456789abcdef\n")
    assert check(venv) == 1
    (venv / ".verl-hadw-install").write_text((VENV / ".verl-hadw-install").read_text())
    assert check(venv) == 0 and sorted(p.name for p in venv.iterdir()) == [".verl-hadw-install"]

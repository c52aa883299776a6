"""Every step of CI (``bash scripts/test_cpu.sh``: nox's sessions, noxfile.py) can fail the run: each test plants, in
a copy of the checkout, the fault one step exists to catch, runs the script there on one session, and sees it exit
non-zero with nox's summary naming the session that failed.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from repo_paths import ROOT

pytestmark = pytest.mark.slow
TOOLS = ROOT / ".venv-nox"  # nox and uv, as scripts/test_cpu.sh installed them


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


def run_script(repo: Path, *args: str) -> str:
    """``bash scripts/test_cpu.sh ARGS`` in ``repo``; fails unless it exits non-zero. Its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHON"))}
    env["VERL_HADW_NOX_VENV"] = str(TOOLS)
    proc = subprocess.run(["bash", "scripts/test_cpu.sh", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert f"[test_cpu] nox exit {proc.returncode};" in out
    return out


@pytest.fixture
def repo(tmp_path):
    assert (TOOLS / "bin" / "nox").exists(), "run bash scripts/test_cpu.sh once: it installs nox and uv"
    return checkout_copy(tmp_path)


def test_a_lint_error_fails_the_lint_session(repo):
    (repo / "verl_hadw" / "planted.py").write_text("import os\n")
    out = run_script(repo, "-s", "lint")
    assert "F401" in out and "Session lint failed" in out


def test_a_failing_test_fails_its_session(repo):
    (repo / "tests" / "core" / "test_planted.py").write_text("def test_planted():\n    assert 1 == 2\n")
    out = run_script(repo, "-s", "trl-1.0.0", "--", "tests/core/test_planted.py")
    assert "1 failed" in out and "Session trl-1.0.0 failed" in out


def test_an_extra_that_adds_more_than_verl_hadw_fails_its_session(repo):
    setup = repo / "setup.py"
    text = setup.read_text()
    assert '"trl": [f"trl{META[\'TRL_RANGE\']}", TRANSFORMERS]' in text
    setup.write_text(text.replace('"trl": [f"trl{META[\'TRL_RANGE\']}", TRANSFORMERS]',
                                  '"trl": [f"trl{META[\'TRL_RANGE\']}", TRANSFORMERS, "six"]'))
    out = run_script(repo, "-s", "trl-1.0.0", "--", "tests/core/test_core_alone.py")
    assert "the [trl] extra must add verl-hadw alone: it added ['six', 'verl-hadw']" in out
    assert "passed" not in out.split("freeze diff", 1)[1]  # no test ran


def test_a_plugin_that_does_not_register_fails_the_main_session_before_its_tests(repo):
    (repo / "verl_hadw" / "verl" / "entry_point.py").write_text(
        'raise ImportError("planted: the entry point cannot import")\n')  # what verl.plugins names
    out = run_script(repo, "-s", "tests", "--", "tests/core/test_core_alone.py")
    assert "[FAIL] registration after a plain 'import verl'" in out and "Session tests failed" in out
    assert " passed" not in out  # pytest never started


def test_an_install_that_fails_fails_the_session(repo):
    (repo / "setup.py").write_text("raise SystemExit('planted: setup.py is broken')\n")
    out = run_script(repo, "-s", "trl-1.0.0")
    assert "planted: setup.py is broken" in out and "Session trl-1.0.0 failed" in out


def test_the_install_check_tells_this_checkouts_install_from_another(tmp_path):
    """``install_cpu.sh --check`` (the demo's install, scripts/demo_cpu.sh): 0 for a venv stamped from this setup.py
    and constraints, 1 for another stamp or none; it installs and creates nothing."""
    def check(venv: Path) -> int:
        env = dict(os.environ, VERL_HADW_VENV=str(venv))
        return subprocess.run(["bash", "scripts/install_cpu.sh", "--check"], cwd=ROOT, env=env).returncode

    venv = tmp_path / "venv"
    assert check(venv) == 1 and not venv.exists()
    venv.mkdir()
    (venv / ".verl-hadw-install").write_text("0123456789abcdef\n")
    assert check(venv) == 1
    import hashlib

    stamp = hashlib.sha256((ROOT / "setup.py").read_bytes() + (ROOT / "constraints-cpu.txt").read_bytes())
    (venv / ".verl-hadw-install").write_text(stamp.hexdigest()[:16] + "\n")
    assert check(venv) == 0 and sorted(p.name for p in venv.iterdir()) == [".verl-hadw-install"]

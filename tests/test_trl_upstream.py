"""TRL's own GRPOTrainer tests pass under ``HadwGRPOTrainer``: CI's subset (``tests/trl_upstream/run.py --subset ci``,
one or two upstream tests per TRL feature the override meets), on local stand-in models and data.

TRL's test files are TRL's and stay in TRL's repository: the test needs a clone of it, named by ``TRL_CHECKOUT`` (a
work tree or bare git directory), and takes its tests at ``TRL_TESTS_REV`` (default: the tag of the installed TRL,
``v<version>``). Without a clone it is skipped, saying so. The whole file, with TRL's own trainer beside ours, and
the counts per TRL release: docs/trl.md ("TRL's own tests").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.trl_upstream

ROOT = Path(__file__).resolve().parents[1]


def test_trls_own_grpo_tests_ci_subset_pass_under_hadw(tmp_path):
    checkout = os.environ.get("TRL_CHECKOUT")
    if not checkout:
        pytest.skip("TRL_CHECKOUT (a clone of huggingface/trl) is not set: TRL's own tests are not in this repository")
    from verl_hadw.trl.trl_version import installed_trl

    rev = os.environ.get("TRL_TESTS_REV", f"v{installed_trl()}")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "trl_upstream" / "run.py"), "--trl-git", checkout, "--rev", rev,
         "--subset", "ci", "--trainers", "hadw", "--jobs", "1", "--work", str(tmp_path)],
        capture_output=True, text=True, timeout=1800,
    )
    print(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

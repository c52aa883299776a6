"""A TRL user's script type-checks (mypy): ``HadwGRPOConfig``'s fields are declared in its body, so a type checker
sees each ``hadw_*`` / ``dgpo_*`` field with its type, and flags a wrong one."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import verl_hadw

CONFIG = """[mypy]
follow_imports = silent
[mypy-trl.*,transformers.*,torch.*,accelerate.*,datasets.*,numpy.*]
follow_imports = skip
ignore_missing_imports = True
"""


def mypy(tmp_path, script: str) -> subprocess.CompletedProcess:
    (tmp_path / "mypy.ini").write_text(CONFIG)
    (tmp_path / "user_script.py").write_text(f"from verl_hadw.trl import HadwGRPOConfig\n\n{script}\n")
    # from the user's own folder; an editable install is found through an import hook mypy cannot follow (mypy's
    # docs: give it the source folder), an installed one through its py.typed
    installed_at = Path(verl_hadw.__file__).parents[1]
    env = {**os.environ, **({} if installed_at.name == "site-packages" else {"MYPYPATH": str(installed_at)})}
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", "cache",
                           "user_script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # mypy over the user's script and verl_hadw: seconds
def test_a_users_config_type_checks_and_a_wrong_type_is_flagged(tmp_path):
    good = mypy(tmp_path, 'args = HadwGRPOConfig(output_dir="out", hadw_lambda_scale=1.3, dgpo_temperature=2.0, '
                          'hadw_base="dgpo", hadw_anchor_init=0.3, accuracy_reward_index=0)')
    assert good.returncode == 0, good.stdout + good.stderr
    bad = mypy(tmp_path, 'args = HadwGRPOConfig(output_dir="out", hadw_lambda_scale="high", hadw_base="gdpo")')
    assert bad.returncode == 1, bad.stdout + bad.stderr
    wrong = 'Argument "hadw_lambda_scale" to "HadwGRPOConfig" has incompatible type "str"; expected "float"'
    assert wrong in bad.stdout
    assert 'Argument "hadw_base" to "HadwGRPOConfig" has incompatible type' in bad.stdout

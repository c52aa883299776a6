"""The Axolotl environment (``tests/helpers/axolotl_environment.py``, run by the session's stage as the
``axolotl_env`` launch beside the other tests): the ``[axolotl]`` extra adds verl-hadw to an environment where
Axolotl 0.19 went first and changes nothing else; the Axolotl adapter's tests and those of ``tests/hf_trainer/`` pass
there. The HA-DW / DGPO runs' generation batches, replayed through TRL's adapter and verl's estimator here
(``replay.py``), give the advantages Axolotl trained on."""

import re
from pathlib import Path

import pytest
from e2e_runs import AXOLOTL
from pytest_summary import failures, not_passed, passed_count
from replay import RUNS, kept_calls, replay
from repo_paths import ROOT, TESTS

from verl_hadw import AXOLOTL_RANGE

pytestmark = pytest.mark.slow


def test_the_environment_is_the_range():
    assert AXOLOTL_RANGE == f">={AXOLOTL},<0.20"  # 0.19.0: the newest release on the registry


@pytest.mark.e2e("axolotl_env")
def test_the_axolotl_extra_changes_nothing_an_axolotl_user_has_and_the_adapters_tests_pass(e2e, capsys):
    run = e2e.result("axolotl_env")
    with capsys.disabled():  # the freezes, Axolotl's hadw/* log lines and the timings in CI's output
        print("\n" + "\n".join(line for line in run.output.splitlines() if line.startswith(("[axolotl", "PASSED"))))
    assert run.code == 0, failures(run.output)
    assert f"[axolotl {AXOLOTL}] added: ['verl-hadw']" in run.output
    passed = set(re.findall(r"^PASSED (tests/[\w/]+\.py)::", run.output, re.M))
    expected = {str(p.relative_to(ROOT)) for folder in ("axolotl", "hf_trainer")
                for p in (TESTS / folder).glob("test_*.py") if p.name != Path(__file__).name}
    assert passed == expected, (sorted(expected - passed), run.output[-3000:])
    assert len(re.findall(r"^\[axolotl train\] 'hadw/anchor_prior'", run.output, re.M)) == 3
    assert passed_count(run.output) > 0 and not_passed(run.output) == []  # none failed, erred, skipped, x-ed
    assert f"[axolotl {AXOLOTL}] every check passed" in run.output


@pytest.mark.e2e("axolotl_env")
@pytest.mark.parametrize("name", list(RUNS))
def test_the_same_batch_gives_the_same_advantages_through_axolotl_trl_and_verl(e2e, tmp_path, name):
    """Each generation batch Axolotl trained on, replayed in order from a fresh anchor through TRL's adapter and
    verl's estimator, from what TRL inside Axolotl held (its completions scored again, its masks' loss tokens, whose
    sum is its num_items_in_batch), not from the Axolotl adapter's own values."""
    calls = kept_calls(e2e.result("axolotl_env").output, name)
    assert [c["step"] for c in calls] == [1, 2, 3]
    assert all(sum(c["mask_tokens"]) == c["num_items_in_batch"] for c in calls)
    assert replay(calls, name, tmp_path) == 3

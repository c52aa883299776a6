"""The ms-swift environments (``tests/helpers/swift_environment.py``, run by the session's stage as the
``swift_env_oldest`` and ``swift_env_newest`` launches beside the other tests): at each end of ``SWIFT_RANGE``, the
``[swift]`` extra adds verl-hadw to an environment where ms-swift went first and changes nothing else; the swift
adapter's tests (every test file of ``tests/swift/`` but this reader: end to end through swift's pipeline and
``verl-hadw-swift rlhf`` on two CPU ranks), the core's (``tests/core/``) and those of ``tests/hf_trainer/`` once it
has tests pass there. The HA-DW / DGPO runs' generation batches, replayed through TRL's
adapter and verl's estimator here, give the advantages swift trained on."""

import re
from pathlib import Path

import pytest
from e2e_runs import SWIFT_NEWEST, SWIFT_OLDEST
from pytest_summary import failures, not_passed, passed_count
from replay import RUNS, kept_calls, replay
from repo_paths import ROOT, TESTS
from swift_environment import PACKED

from verl_hadw import SWIFT_RANGE

pytestmark = pytest.mark.slow


def test_the_environments_are_the_ends_of_the_range():
    assert SWIFT_RANGE == f">={SWIFT_OLDEST},<4.7" and SWIFT_NEWEST.startswith("4.6.")


@pytest.mark.e2e("swift_env_oldest", "swift_env_newest")
@pytest.mark.parametrize("launch", ["swift_env_oldest", "swift_env_newest"])
def test_the_swift_extra_changes_nothing_a_swift_user_has_and_the_adapters_tests_pass(e2e, capsys, launch):
    run = e2e.result(launch)
    version = SWIFT_OLDEST if launch.endswith("oldest") else SWIFT_NEWEST
    with capsys.disabled():  # the freezes, the command line, its hadw/* log lines and the timings in CI's output
        print("\n" + "\n".join(line for line in run.output.splitlines() if line.startswith(("[swift", "PASSED"))))
    assert run.code == 0, failures(run.output)
    assert f"[swift {version}] added: ['verl-hadw']" in run.output
    passed = set(re.findall(r"^PASSED (tests/[\w/]+\.py)::", run.output, re.M))
    left_out = {Path(__file__).name} | ({PACKED.name} if launch.endswith("oldest") else set())  # its --lean
    expected = {str(p.relative_to(ROOT)) for folder in ("core", "swift", "hf_trainer")
                for p in (TESTS / folder).glob("test_*.py") if p.name not in left_out}
    assert passed == expected, (sorted(expected - passed), run.output[-3000:])
    for test in ("test_resume_from_step_2_continues_the_uninterrupted_run_bit_for_bit",
                 "test_the_command_line_trains_hadw_and_every_rank_holds_the_same_anchor",
                 "test_switched_off_it_is_swifts_grpo_bit_for_bit[dapo]",
                 "test_switched_off_it_is_swifts_grpo_bit_for_bit_where_completions_are_unscored[dapo]"):
        assert f"PASSED tests/swift/test_swift_training.py::{test}" in run.output, run.output[-3000:]
    ranks = 1 if launch.endswith("oldest") else 2  # the oldest's environment is lean
    assert f"[swift environment] ranks {ranks}: anchors after each step" in run.output
    assert passed_count(run.output) > 0 and not_passed(run.output) == []  # none failed, erred, skipped, x-ed
    assert f"[swift {version}] every check passed" in run.output


@pytest.mark.e2e("swift_env_newest")
@pytest.mark.parametrize("name", list(RUNS))
def test_the_same_batch_gives_the_same_advantages_through_swift_trl_and_verl(e2e, tmp_path, name):
    """Each generation batch swift trained on, replayed in order from a fresh anchor through TRL's adapter and verl's
    estimator (``replay.py``), starting from what swift itself held (not from the swift adapter's own intermediate
    values): the rewards scored again from swift's completions, the loss tokens of swift's masks, whose sum is swift's
    num_items_in_batch. The three runs use the same options (the toy run's: GRPO's std, the default anchor)."""
    calls = kept_calls(e2e.result("swift_env_newest").output, name)
    assert calls and all(c["training"] for c in calls)
    for call in calls:
        assert sum(call["mask_tokens"]) == call["num_items_in_batch"][0]  # swift's own count
    assert replay(calls, name, tmp_path) == len(calls)

"""The matrix's lowest-TRL environment (``tests/helpers/trl_environment.py``, run by the session's stage as the
``trl_env`` launch beside the other tests: it waits on pip most of its time). In a fresh virtualenv holding the lowest
TRL of ``TRL_RANGE``: the ``[trl]`` extra changes no installed version and brings none of verl, Ray, vLLM or wandb;
the TRL adapter's own tests (every test file of ``tests/trl/`` but this reader), the core's (``tests/core/``) and
those of ``tests/hf_trainer/`` once it has tests pass there, the documented example and the resume bit for bit among
them."""

import re
from pathlib import Path

import pytest
from pytest_summary import failures, not_passed, passed_count
from repo_paths import ROOT, TESTS

pytestmark = pytest.mark.slow


@pytest.mark.e2e("trl_env")
def test_the_trl_extra_changes_nothing_a_trl_user_has_and_the_lowest_trl_passes_the_adapters_tests(e2e, capsys):
    run = e2e.result("trl_env")
    with capsys.disabled():  # the freezes and timings in CI's output
        print("\n" + "\n".join(line for line in run.output.splitlines() if line.startswith("[trl install]")))
    assert run.code == 0, failures(run.output)
    assert "[trl install] added: ['verl-hadw']" in run.output
    passed = set(re.findall(r"^PASSED (tests/(?:core|trl|hf_trainer)/test_\w+\.py)::", run.output, re.M))
    expected = {str(p.relative_to(ROOT)) for folder in ("core", "trl", "hf_trainer")
                for p in (TESTS / folder).glob("test_*.py") if p.name != Path(__file__).name}
    assert passed == expected, (sorted(expected - passed), run.output[-3000:])
    for test in ("test_trl_example.py::test_the_documented_example_command_runs",
                 "test_trl_training.py::test_resume_continues_the_anchor_bit_for_bit"):
        assert f"PASSED tests/trl/{test}" in run.output, run.output[-3000:]
    assert passed_count(run.output) > 0 and not_passed(run.output) == []  # none failed, erred, skipped, x-ed
    assert "[trl install] every check passed" in run.output

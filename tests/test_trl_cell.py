"""The matrix's lowest-TRL cell (``tests/trl_install_cell.py``, run by the session's stage as the ``trl_cell`` launch
beside the other tests: it waits on pip most of its time). In a fresh virtualenv holding the lowest TRL of
``TRL_RANGE``: the ``[trl]`` extra changes no installed version and brings none of verl, Ray, vLLM or wandb;
``examples/trl_hadw.py`` trains; a run saved and resumed equals the run that never stopped, bit for bit."""

import re

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.e2e("trl_cell")
def test_the_trl_extra_changes_nothing_a_trl_user_has_and_the_lowest_trl_trains_and_resumes(e2e, capsys):
    run = e2e.result("trl_cell")
    with capsys.disabled():  # the freezes and timings in CI's output
        print("\n" + "\n".join(line for line in run.output.splitlines() if line.startswith("[trl install]")))
    assert run.code == 0, run.output[-6000:]
    assert "[trl install] added: ['verl-hadw']" in run.output
    assert re.search(r"^resume bit for bit: [1-9]\d* batches$", run.output, re.M), run.output[-3000:]
    assert "[trl install] every check passed" in run.output

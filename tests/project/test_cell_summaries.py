"""The framework cells' readers pass a cell only when every test passed (tests/machinery/pytest_summary.py): a failed,
erred, skipped, xfailed or xpassed test in a cell's summary fails its reader."""

import pytest
from pytest_summary import not_passed, passed_count


@pytest.mark.parametrize("summary, said", [
    ("34 passed, 2 warnings in 3.2s", []),
    ("33 passed, 1 failed in 3.2s", ["1 failed"]),
    ("33 passed, 2 errors in 3.2s", ["2 errors"]),
    ("== 33 passed, 1 error in 3.2s ==", ["1 error"]),
    ("33 passed, 1 skipped in 3.2s", ["1 skipped"]),
    ("33 passed, 1 xfailed in 3.2s", ["1 xfailed"]),
    ("33 passed, 1 xpassed in 3.2s", ["1 xpassed"]),
    ("30 passed, 1 failed, 1 xfailed, 2 xpassed, 1 skipped in 9s", ["1 failed", "1 xfailed", "2 xpassed", "1 skipped"]),
])
def test_a_cell_summary_is_read_for_every_test_that_did_not_pass(summary, said):
    output = f"PASSED tests/core/test_core_anchor.py::test_x\n{summary}\n"
    assert not_passed(output) == said
    assert passed_count(output) == int(summary.strip("= ").split()[0])


def test_a_run_without_a_summary_passed_nothing():
    assert passed_count("ImportError: no module named trl\n") == 0

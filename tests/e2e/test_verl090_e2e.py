"""verl 0.9.0's real ``main_ppo`` (v1 trainer, CPU): the anchor saved and restored without a checkpoint callback,
and verl's ``gdpo`` with ``algorithm.dgpo.*`` set stopped by the shipped YAMLs' Hydra start-up check before Ray
starts (without that check, at the first advantage: tests/helpers/by_hand_e2e.py).

verl 0.9.0 has no ``trainer.checkpoint_callback_class`` (verl 0.9.1 added it): the demo config names the callback
anyway, verl ignores it, and the estimator saves the anchor as per-step snapshots (``legacy_snapshots``). A run
resumed from a copy of the 3-step run's step-2 checkpoint (and snapshot) must log step 3's metrics bit for bit.

The launches run verl 0.9.0's wheel on ``PYTHONPATH`` ahead of the test venv's verl 0.9.1 (``e2e_runs.verl090``:
the two versions declare the same requirements, ``pip check`` confirms them met): CI's verl 0.9.0 environment, rebuilt
by every stage.
"""

import json
import os
import re

import pytest
from e2e_runs import GDPO_TYPO, V090_SAVE, V090_STEPS, VERL_ADAPTER_TESTS
from e2e_stage import RAY_STARTED
from pytest_summary import failures, not_passed

from verl_hadw.toy.launch import stable_metrics
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR

pytestmark = pytest.mark.slow
launches = pytest.mark.e2e

ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/phi_mean"]
IGNORED = ("trainer.checkpoint_callback_class=verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback is ignored: "
           "verl 0.9.0 has no checkpoint callbacks")


@launches("v090_straight", "v090_resumed")
def test_resume_on_verl_0_9_0_continues_the_run_exactly(e2e):
    straight, resumed = e2e.result("v090_straight"), e2e.result("v090_resumed")
    assert IGNORED in straight.log and IGNORED in resumed.log  # verl 0.9.0's runs, told at the first estimator call
    assert "Resuming from" not in straight.log
    folder = resumed.out / f"global_step_{V090_SAVE}"
    assert f"Resuming from {folder}, setting global step to {V090_SAVE}" in resumed.log
    assert sorted(straight.steps) == list(range(1, V090_STEPS + 1))
    snapshots = sorted(os.listdir(straight.out / SNAPSHOT_DIR))
    assert snapshots == [f"step_{V090_SAVE}.json", f"step_{V090_STEPS}.json"]  # step 1 pruned: never checkpointed
    saved = json.loads((straight.out / SNAPSHOT_DIR / f"step_{V090_SAVE}.json").read_text())
    assert saved["global_step"] == V090_SAVE and saved["state"]["open_step"] == V090_SAVE
    assert sorted(resumed.steps) == list(range(V090_SAVE + 1, V090_STEPS + 1))
    for step in resumed.steps:
        expected = stable_metrics(straight.steps[step])
        assert set(ANCHOR) | {"actor/grad_norm", "critic/score/mean"} <= set(expected)
        assert stable_metrics(resumed.steps[step]) == expected, step
    last = f"step_{V090_STEPS}.json"  # the anchor after the last step, saved by both runs: the same file
    assert (resumed.out / SNAPSHOT_DIR / last).read_text() == (straight.out / SNAPSHOT_DIR / last).read_text()


@launches("v090_startup_check")
def test_the_hydra_start_up_check_stops_gdpo_dgpo_keys_before_ray_on_verl_0_9_0(e2e):
    run = e2e.result("v090_startup_check")
    assert run.code == 1
    assert f"verl-hadw start-up check (hydra.callbacks.verl_hadw): ConfigError: {GDPO_TYPO}" in run.log
    assert RAY_STARTED not in run.log and not run.steps


@pytest.mark.e2e("v090_adapter_tests")
def test_the_verl_adapters_own_tests_pass_on_verl_0_9_0(e2e):
    """The matrix's verl 0.9.0 environment runs the verl adapter's own tests too (``VERL_ADAPTER_TESTS``), not only the
    launches: every file passes there, but the tests of verl 0.9.1's checkpoint hook."""
    run = e2e.result("v090_adapter_tests")
    assert run.output.startswith("[v090 adapter tests] verl 0.9.0\n"), run.output[:2000]
    assert run.code == 0, failures(run.output)
    passed = set(re.findall(r"^PASSED \S*\btests/verl/(test_\w+\.py)::", run.output, re.M))  # relative path
    assert passed == set(VERL_ADAPTER_TESTS), (sorted(set(VERL_ADAPTER_TESTS) - passed), run.output[-3000:])
    assert re.search(r"^\d+ passed, \d+ deselected", run.output, re.M), run.output[-2000:]
    assert not_passed(run.output) == [], run.output[-3000:]  # no failed, error, skipped, xfailed or xpassed

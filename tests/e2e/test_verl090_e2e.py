"""verl 0.9.0's real ``main_ppo`` (v1 trainer, CPU): the anchor saved and restored without a checkpoint callback,
and verl's ``gdpo`` with ``algorithm.dgpo.*`` set stopped by the shipped YAMLs' Hydra start-up check before Ray
starts (without that check, at the first advantage: tests/helpers/by_hand_e2e.py).

verl 0.9.0 has no ``trainer.checkpoint_callback_class`` (verl 0.9.1 added it): the demo config names the callback
anyway, verl ignores it, and the estimator saves the anchor as per-step snapshots (``legacy_snapshots``). A run
resumed from a copy of the 3-step run's step-2 checkpoint (and snapshot) must log step 3's metrics bit for bit.

The launches run the installed verl: this file is collected only where that is verl 0.9.0 (tests/conftest.py; the
verl-0.9.0 nox session), and its tests check that the runs were verl 0.9.0's.
"""

import importlib.metadata
import json
import os

import pytest
from launches import GDPO_TYPO, RAY_STARTED, V090_SAVE, V090_STEPS

from verl_hadw.toy.launch import stable_metrics
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR

pytestmark = pytest.mark.slow

ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/phi_mean"]
IGNORED = ("trainer.checkpoint_callback_class=verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback is ignored: "
           "verl 0.9.0 has no checkpoint callbacks")


def test_resume_on_verl_0_9_0_continues_the_run_exactly(v090_straight_run, v090_resumed_run):
    straight, resumed = v090_straight_run, v090_resumed_run
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


def test_the_hydra_start_up_check_stops_gdpo_dgpo_keys_before_ray_on_verl_0_9_0(v090_startup_check_run):
    """The demo config's Hydra start-up check stops the run in main_ppo's own process, before Ray, on verl 0.9.0:
    this interpreter's verl, which the launch runs (its log, stopped before verl's trainer, does not say)."""
    assert importlib.metadata.version("verl") == "0.9.0"
    run = v090_startup_check_run
    assert run.code == 1
    assert f"verl-hadw start-up check (hydra.callbacks.verl_hadw): ConfigError: {GDPO_TYPO}" in run.log
    assert RAY_STARTED not in run.log and not run.steps

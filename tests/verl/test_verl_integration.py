"""Through verl's own code: compute_advantage (both trainers), registration by entry point, Tracking."""

import subprocess
import sys

import pytest
import torch
from batches import algo, make_inputs
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.skip.skip_manager import SkipManager
from verl.utils.tracking import Tracking

from verl_hadw.verl import process_state
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.config.run_options import parse_run
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage

SCORES = [1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0, 0]
GROUPS = ["a"] * 4 + ["b"] * 4 + ["c"] * 2 + ["d"] * 2 + ["pad"]
LENGTHS = [3, 2, 6, 1, 4, 4, 5, 6, 2, 3, 3, 2, 0]


def data_proto():
    rewards, mask, index = make_inputs(SCORES, GROUPS, LENGTHS)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": index}
    )


def verl_algorithm(estimator, **hadw):
    return OmegaConf.create(algo(estimator, **hadw))


@pytest.mark.parametrize("estimator", ["hadw", "dgpo"])
def test_estimators_are_registered(estimator):
    fn = get_adv_estimator_fn(estimator)
    assert fn is {"hadw": compute_hadw_outcome_advantage, "dgpo": compute_dgpo_outcome_advantage}[estimator]


@pytest.mark.parametrize("estimator, extra", [("hadw", {}), ("dgpo", {}), ("hadw", {"base": "dgpo"})])
def test_legacy_compute_advantage_equals_direct_call(estimator, extra):
    config = verl_algorithm(estimator, state_key="via-verl", **extra)
    out = compute_advantage(data_proto(), estimator, config=config)
    process_state.reset()
    rewards, mask, index = make_inputs(SCORES, GROUPS, LENGTHS)
    direct, _ = get_adv_estimator_fn(estimator)(
        token_level_rewards=rewards,
        response_mask=mask,
        index=index,
        config=verl_algorithm(estimator, state_key="via-verl", **extra),
    )
    assert torch.equal(out.batch["advantages"], direct) and torch.equal(out.batch["returns"], direct)
    assert out.batch["advantages"].abs().sum() > 0 and torch.all(out.batch["advantages"][-1] == 0)


@pytest.mark.parametrize("estimator", ["hadw", "dgpo"])
def test_v1_multi_trajectory_path(estimator):
    data = data_proto()
    batch_keys = [f"{g}_0_0" for g in GROUPS]  # {uid}_{session}_{index}, as the v1 agent loop writes them
    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=batch_keys, adv_estimator=estimator, config=verl_algorithm(estimator, state_key="v1")
    )
    process_state.reset()
    ref = compute_advantage(data_proto(), estimator, config=verl_algorithm(estimator, state_key="v1"))
    assert torch.equal(out.batch["advantages"], ref.batch["advantages"])


def test_trainer_step_k_calls_share_prior_through_verl():
    config = verl_algorithm("hadw", state_key="k-calls", anchor={"init": 0.3})
    priors = []
    for step in (1, 2):
        SkipManager.set_step(step)
        for _ in range(4):  # separate_async: K mini-batches per step
            compute_advantage(data_proto(), "hadw", config=config)
            priors.append(process_state.PROCESS.pending_metrics.peek(step)["hadw/anchor_prior"])
    assert priors[:4] == [0.3] * 4 and len(set(priors[4:])) == 1 and priors[4] != 0.3
    state = anchor_client.state_dict(parse_run(config).hadw)
    assert state["committed_steps"] == 1 and state["count"] == 4 * 12 and state["calls"] == [0, 1, 2, 3]


def test_dgpo_alone_files_the_k_calls_of_a_trainer_step_under_that_step():
    """DGPO without HA-DW (``process_state.stateless_step``): the K mini-batch calls of a separate_async step add up
    under verl's step, every group once per call (the async launches train HA-DW over DGPO,
    tests/e2e/test_e2e_modes.py)."""
    config = verl_algorithm("dgpo", state_key="dgpo-k-calls")
    for step in (1, 2):
        SkipManager.set_step(step)
        for _ in range(2):  # separate_async: parameter_sync_step mini-batches per step
            compute_advantage(data_proto(), "dgpo", config=config)
        counts = process_state.PROCESS.pending_metrics.peek(step)
        assert counts["dgpo/valid_groups"] + counts["dgpo/zero_var_groups"] == 2 * 4, step  # groups a-d, twice
    assert not any(k.startswith("hadw/") for k in counts)


def test_metrics_join_verls_console_log_line(capsys):
    from verl_hadw.verl.metrics import install_tracking_hook

    assert install_tracking_hook() and install_tracking_hook()  # idempotent
    tracker = Tracking(project_name="p", experiment_name="e", default_backend=["console"])
    SkipManager.set_step(1)
    compute_advantage(data_proto(), "hadw", config=verl_algorithm("hadw", base="dgpo", state_key="log"))
    tracker.log(data={"actor/pg_loss": 0.5}, step=1)
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("step:1 ")][0]
    for name in [
        "actor/pg_loss",
        "hadw/anchor_prior",
        "hadw/anchor_posterior",
        "hadw/batch_acc",
        "hadw/eta_t",
        "hadw/sigma_t",
        "hadw/phi_mean",
        "hadw/phi_std",
        "hadw/phi_min",
        "hadw/phi_max",
        "hadw/frac_amplified",
        "hadw/actor_recoveries",
        "dgpo/valid_groups",
        "dgpo/zero_var_groups",
        "dgpo/valid_token_ratio",
        "dgpo/weight_min",
        "dgpo/weight_max",
    ]:
        assert f"{name}:" in line, name
    assert "hadw/batch_acc:0.5 " in line + " "  # 6 of 12 valid responses (the padding row is not one)
    tracker.log(data={"actor/pg_loss": 0.4}, step=2)
    assert "hadw/" not in capsys.readouterr().out  # step 2 recorded nothing: nothing carried over


@pytest.mark.slow
def test_plain_import_verl_registers_in_a_fresh_process():
    code = (
        "import sys, verl\n"
        "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
        "print(get_adv_estimator_fn('hadw').__name__, get_adv_estimator_fn('dgpo').__name__)\n"
        "print('ray' in sys.modules and __import__('ray').is_initialized())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["compute_hadw_outcome_advantage", "compute_dgpo_outcome_advantage", "False"]


def test_core_modules_import_without_torch_ray_or_files():
    code = (
        "import builtins, sys\n"
        "opened = []\n"
        "real_open = builtins.open\n"
        "builtins.open = lambda *a, **k: (opened.append(a[0]), real_open(*a, **k))[1]\n"
        "import verl_hadw.core.options, verl_hadw.core.anchor\n"
        "print(sorted(m for m in ('torch', 'ray', 'verl') if m in sys.modules), opened)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] []"


@pytest.mark.slow
def test_doctor_reports_a_working_install(capsys):
    """In this process (a fresh one runs the doctor in every CI run: scripts/test_cpu.sh,
    tests/project/test_ci_steps.py)."""
    import verl

    from verl_hadw.cli import main

    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"[ok] verl version: {verl.__version__}" in out  # 0.9.1 here, 0.9.0 in the verl 0.9.0 environment
    assert "hadw -> verl_hadw.verl.estimators.compute_hadw_outcome_advantage" in out
    assert "all good" in out


def _full_config(**trainer):
    return OmegaConf.create({"algorithm": {"adv_estimator": "hadw", "hadw": {"state_key": "unsaved"}},
                             "trainer": {"default_local_dir": "/tmp/unused", "resume_mode": "disable", **trainer}})


@pytest.mark.parametrize("trainer, warns", [
    ({"save_freq": 5}, True),  # v1 (verl's default), checkpoints on, no callback: the anchor is never saved
    ({"save_freq": 5, "use_v1": True, "checkpoint_callback_class": None}, True),
    ({"save_freq": -1}, False),  # no checkpoints: nothing to resume from
    ({"save_freq": 5, "use_v1": False}, False),  # the legacy trainer: the estimator writes snapshots itself
    ({"save_freq": 5, "checkpoint_callback_class": "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"}, False),
])
@pytest.mark.verl091  # on verl 0.9.0 snapshots save the anchor: tests/verl/test_verl_versions.py
def test_hadw_on_the_v1_trainer_saving_checkpoints_without_the_callback_warns_at_its_first_call(trainer, warns):
    import warnings

    cfg = _full_config(**trainer)
    rewards, mask, index = make_inputs([1, 0, 1, 1], ["a", "a", "b", "b"])
    SkipManager.set_step(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            compute_hadw_outcome_advantage(token_level_rewards=rewards, response_mask=mask, index=index,
                                           config=cfg.algorithm)
    said = [str(w.message) for w in caught if "saved in no checkpoint" in str(w.message)]
    assert len(said) == (1 if warns else 0), said  # once, at the first call
    if warns:
        assert "checkpoints every 5 steps without the plugin's checkpoint callback" in said[0]
        assert ("Set trainer.checkpoint_callback_class=verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"
                in said[0])

"""End to end: verl's v1 async trainer modes and DAPO's dynamic sampling through the real ``main_ppo`` on CPU.

Each run is what ``bash scripts/demo_cpu.sh trainer.v1.trainer_mode=<mode>`` runs (``verl_hadw.toy.launch`` adds
what the mode needs, ``verl_hadw.toy.modes``), at 8 prompts a step (``e2e_runs``); assertions read verl's console
log and the anchor files verl's checkpoints carry. ``separate_async`` makes SEPARATE_SYNC_STEPS estimator calls
per training step.
"""

import json

import pytest
from e2e_runs import PROMPTS, checkpoint_copy, main_ppo

from verl_hadw.anchor.file_format import STATE_FILE
from verl_hadw.toy.launch import command
from verl_hadw.toy.modes import SEPARATE_SYNC_STEPS, mode_overrides, requested_mode

HADW_METRICS = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/phi_mean"]
DGPO_METRICS = ["dgpo/valid_groups", "dgpo/zero_var_groups", "dgpo/valid_token_ratio"]
MODES = ["colocate_async", "separate_async"]
CALLS = {"colocate_async": 1, "separate_async": SEPARATE_SYNC_STEPS}  # estimator calls per training step
ROLLOUTS = 4  # rollout.n of the demo config
STRAIGHT, HALF = 4, 2


# ------------------------------------------------------------------------------ the launcher's additions (fast)
def test_sync_needs_nothing_and_unknown_modes_are_named():
    from verl_hadw.toy.launch import config_dir

    assert mode_overrides(["algorithm.adv_estimator=dgpo"], config_dir()) == []
    both = ["trainer.v1.trainer_mode=sync", "trainer.v1.trainer_mode=colocate_async"]
    assert requested_mode(both) == "colocate_async"
    with pytest.raises(ValueError, match="colocate_async, separate_async"):
        requested_mode(["trainer.v1.trainer_mode=fully_async"])


def test_separate_async_gets_a_rollout_pool_a_cpu_weight_sync_and_a_consistent_mini_batch():
    from verl_hadw.toy.launch import config_dir

    user = ["trainer.v1.trainer_mode=separate_async", "data.train_batch_size=12"]
    extra = dict(item.split("=", 1) for item in mode_overrides(user, config_dir()))
    assert extra["trainer.v1.sampler.custom_sampler.path"] == "null"  # verl's async replay buffer
    assert int(extra["trainer.v1.separate_async.parameter_sync_step"]) == SEPARATE_SYNC_STEPS
    assert int(extra["actor_rollout_ref.actor.ppo_mini_batch_size"]) * SEPARATE_SYNC_STEPS == 12  # verl's assert
    assert extra["actor_rollout_ref.rollout.checkpoint_engine.backend"] == "hfcpu_ray"
    rows = 6 * 4  # responses per mini-batch: 6 prompts x rollout.n=4; verl splits them into whole micro-batches
    assert 24 % int(extra["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]) == 0
    assert rows % int(extra["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"]) == 0
    assert extra["ray_kwargs.ray_init.num_gpus"] == "2"  # the trainer's logical GPU and the rollout pool's
    # the user's own overrides come after the additions, so they win
    cmd = command([*user, "actor_rollout_ref.actor.ppo_mini_batch_size=3"])
    mini = "actor_rollout_ref.actor.ppo_mini_batch_size="
    assert cmd.index(mini + "3") > cmd.index(mini + "6")


# ------------------------------------------------------------------------------------------- main_ppo runs
@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return str(tmp_path_factory.mktemp("assets"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


def anchor_file(workdir, name, step) -> dict:
    return json.loads((workdir / name / f"global_step_{step}" / STATE_FILE).read_text())


def assert_anchor_steps(steps, first, last):
    """One anchor step per training step: every step logged, and each prior is the previous posterior (Eq. 12)."""
    assert sorted(steps) == list(range(first, last + 1))
    for step in range(first, last + 1):
        missing = [m for m in HADW_METRICS if m not in steps[step]]
        assert not missing, f"step {step} lacks {missing}"
    for step in range(first + 1, last + 1):
        assert steps[step]["hadw/anchor_prior"] == steps[step - 1]["hadw/anchor_posterior"], step


def assert_saved_anchor(saved, step, mode, batch_acc):
    """The anchor file of global_step_N: N-1 committed steps, step N open with all of its calls and responses."""
    state = saved["state"]
    assert saved["global_step"] == step and state["open_step"] == step
    assert state["committed_steps"] == step - 1  # not K * (N - 1): the K calls of a step are one anchor step
    assert sorted(state["calls"]) == list(range(CALLS[mode]))
    assert state["count"] == PROMPTS * ROLLOUTS  # y_t over all of the step's responses, all K calls
    assert state["correct"] / state["count"] == batch_acc


@pytest.fixture(scope="module", params=MODES)
def straight(request, assets, workdir):
    """The uninterrupted run of the mode: 4 steps, checkpoints at steps 2 and 4."""
    mode = request.param
    name = f"{mode}_straight"
    out = main_ppo(
        assets, workdir, name, f"trainer.v1.trainer_mode={mode}", f"trainer.total_training_steps={STRAIGHT}",
        f"trainer.save_freq={HALF}",
    )
    return mode, name, out


@pytest.mark.slow
def test_async_mode_hadw_advances_the_anchor_once_per_step(straight, workdir):
    mode, name, (_, log, steps) = straight
    assert f"'trainer_mode': '{mode}'" in log and "warmup prompts" in log  # verl's async path ran
    assert_anchor_steps(steps, 1, STRAIGHT)
    for step in (HALF, STRAIGHT):
        assert_saved_anchor(anchor_file(workdir, name, step), step, mode, steps[step]["hadw/batch_acc"])


@pytest.mark.slow
def test_async_mode_resume_continues_the_anchor(straight, assets, workdir):
    """Resumed from the uninterrupted run's step-2 checkpoint: the anchor continues exactly where it was saved.
    The later steps' rollouts are not those of the uninterrupted run (an async batch depends on rollout timing,
    and verl restores the in-flight prompts, not the generation); the README says what resumes in these modes."""
    mode, name, (_, _, reference) = straight
    resumed = f"{mode}_resumed"
    checkpoint_copy(workdir, name, resumed, HALF)
    _, log, second = main_ppo(
        assets, workdir, resumed, f"trainer.v1.trainer_mode={mode}", f"trainer.save_freq={HALF}",
        f"trainer.total_training_steps={STRAIGHT}", "trainer.resume_mode=auto", experiment=name,
    )
    assert_anchor_steps(second, HALF + 1, STRAIGHT)
    # the anchor continues where the saved one stopped: step N/2+1's prior is step N/2's posterior
    assert second[HALF + 1]["hadw/anchor_prior"] == reference[HALF]["hadw/anchor_posterior"]
    assert_saved_anchor(anchor_file(workdir, resumed, STRAIGHT), STRAIGHT, mode, second[STRAIGHT]["hadw/batch_acc"])
    # verl restored its async state: the in-flight prompts of the checkpoint (TransferQueue)
    assert (workdir / resumed / f"global_step_{HALF}" / "transfer_queue").is_dir()
    assert "Restored" in log and "prompt groups from TransferQueue" in log


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_async_mode_dgpo(mode, assets, workdir):
    _, _, steps = main_ppo(
        assets, workdir, f"{mode}_dgpo", f"trainer.v1.trainer_mode={mode}", "algorithm.adv_estimator=dgpo",
        "trainer.total_training_steps=2",
    )
    assert sorted(steps) == [1, 2]
    for step, values in steps.items():
        assert all(m in values for m in DGPO_METRICS), step
        assert not any(k.startswith("hadw/") for k in values)
    # the K calls of a separate_async step add up: every group of the step is counted once
    assert all(v["dgpo/valid_groups"] + v["dgpo/zero_var_groups"] == PROMPTS for v in steps.values())


@pytest.mark.slow
def test_hadw_with_dynamic_sampling_is_refused_before_training(assets, workdir):
    code, log, steps = main_ppo(
        assets, workdir, "filter_groups", "algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=acc",
        expect_ok=False,
    )
    assert code != 0
    assert "algorithm.adv_estimator=hadw cannot run with algorithm.filter_groups.enable=true" in log
    assert "biased toward 0.5" in log
    assert not steps and "Training Progress" not in log

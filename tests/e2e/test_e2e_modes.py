"""End to end: verl's v1 async trainer modes and DAPO's dynamic sampling through the real ``main_ppo`` on CPU.

``separate_async`` rides on the GPU smoke script's CPU run (the ``smoke_run`` launch, tests/helpers/launches.py:
HA-DW over DGPO, steps 1-2 saved at 2, then resumed to 3); ``colocate_async`` on ``colocate_dgpo_run`` (DGPO alone, 2
steps); ``refused_run`` is one start with two start-up problems. Each is what ``bash scripts/demo_cpu.sh
trainer.v1.trainer_mode=<mode>`` runs (``verl_hadw.toy.launch`` adds what the mode needs, ``verl_hadw.toy.modes``),
at 8 prompts a step; assertions read verl's console log and the anchor files verl's checkpoints carry.
``separate_async`` makes SEPARATE_SYNC_STEPS estimator calls per training step.
"""

import json

import pytest
from launches import HALF, PROMPTS, RAY_STARTED, SMOKE_MODE, SMOKE_RESUME_STEPS, SMOKE_STEPS

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.launch import command, parse_steps
from verl_hadw.toy.modes import SEPARATE_SYNC_STEPS, mode_overrides, requested_mode

HADW_METRICS = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/phi_mean"]
DGPO_METRICS = ["dgpo/valid_groups", "dgpo/zero_var_groups", "dgpo/valid_token_ratio"]
CALLS = {"colocate_async": 1, "separate_async": SEPARATE_SYNC_STEPS}  # estimator calls per training step
ROLLOUTS = 4  # rollout.n of the demo config


# ------------------------------------------------------------------------------ the launcher's additions (fast)
def test_sync_needs_nothing_and_unknown_modes_are_named():
    from verl_hadw.toy.launch import config_dir

    assert mode_overrides(["algorithm.adv_estimator=dgpo"], config_dir()) == []
    both = ["trainer.v1.trainer_mode=sync", "trainer.v1.trainer_mode=colocate_async"]
    assert requested_mode(both) == "colocate_async"
    with pytest.raises(ValueError, match="colocate_async, separate_async"):
        requested_mode(["trainer.v1.trainer_mode=fully_async"])


@pytest.mark.slow  # composes the demo config twice
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
def anchor_file(checkpoints, step) -> dict:
    return json.loads((checkpoints / f"global_step_{step}" / STATE_FILE).read_text())


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


def smoke_phases(smoke):
    """The smoke launch's two runs: (folder, train log, resume log, train steps, resume steps)."""
    assert smoke.code == 0, smoke.output[-4000:]
    train, resume = ((smoke.smoke / name).read_text() for name in ("train.log", "resume.log"))
    return smoke.smoke, train, resume, parse_steps(train), parse_steps(resume)


@pytest.mark.slow
def test_separate_async_hadw_advances_the_anchor_once_per_step(smoke_run):
    """Steps 1-2 of the smoke's first run, in separate_async: verl's async path ran, one anchor step per training
    step over its K calls, and the anchor file of the step-2 checkpoint holds both calls of that step."""
    folder, train, _, first, _ = smoke_phases(smoke_run)
    assert f"'trainer_mode': '{SMOKE_MODE}'" in train and "warmup prompts" in train  # verl's async path ran
    assert_anchor_steps(first, 1, SMOKE_STEPS)
    saved = anchor_file(folder / "checkpoints", SMOKE_STEPS)
    assert_saved_anchor(saved, SMOKE_STEPS, SMOKE_MODE, first[SMOKE_STEPS]["hadw/batch_acc"])


@pytest.mark.slow
def test_separate_async_resume_continues_the_anchor(smoke_run):
    """Resumed from the step-2 checkpoint (the smoke's second run): the anchor continues exactly where it was saved.
    The later steps' rollouts are not those of an uninterrupted run (an async batch depends on rollout timing, and
    verl restores the in-flight prompts, not the generation); the docs' verl-on-CPU page says what resumes in these
    modes. colocate_async calls the estimator once a step, and that resume is the sync demo's (test_e2e_cpu.py's
    test_resume_continues_the_run_exactly, bit for bit)."""
    folder, _, resume, first, second = smoke_phases(smoke_run)
    assert f"'trainer_mode': '{SMOKE_MODE}'" in resume
    assert f"Resuming from {folder / 'checkpoints' / f'global_step_{SMOKE_STEPS}'}" in resume
    assert_anchor_steps(second, SMOKE_STEPS + 1, SMOKE_RESUME_STEPS)
    # the anchor continues where the saved one stopped: step 3's prior is step 2's posterior
    assert second[SMOKE_STEPS + 1]["hadw/anchor_prior"] == first[SMOKE_STEPS]["hadw/anchor_posterior"]
    saved = anchor_file(folder / "checkpoints", SMOKE_RESUME_STEPS)
    assert_saved_anchor(saved, SMOKE_RESUME_STEPS, SMOKE_MODE, second[SMOKE_RESUME_STEPS]["hadw/batch_acc"])
    # verl restored its async state: the in-flight prompts of the checkpoint (TransferQueue)
    assert (folder / "checkpoints" / f"global_step_{SMOKE_STEPS}" / "transfer_queue").is_dir()
    assert "Restored" in resume and "prompt groups from TransferQueue" in resume


@pytest.mark.slow
def test_separate_async_dgpo(smoke_run):
    """The smoke runs train HA-DW over DGPO (tests/helpers/launches.py's SMOKE_OVERRIDES): DGPO's metrics on every step,
    and the K calls of a separate_async step add up, every group of the step counted once. DGPO alone files its K calls
    under the same trainer step (``process_state.stateless_step``: test_verl_integration.py's
    test_dgpo_alone_files_the_k_calls_of_a_trainer_step_under_that_step) and logs no HA-DW metric (the
    ``colocate_dgpo_run`` launch, test_e2e_cpu.py::test_v1_dgpo)."""
    _, _, _, first, second = smoke_phases(smoke_run)
    steps = {**first, **second}
    assert sorted(steps) == list(range(1, SMOKE_RESUME_STEPS + 1))
    for step, values in steps.items():
        assert all(m in values for m in DGPO_METRICS), step
        assert values["dgpo/valid_groups"] + values["dgpo/zero_var_groups"] == PROMPTS, step


@pytest.mark.slow
def test_colocate_async_dgpo(colocate_dgpo_run):
    """DGPO alone in colocate_async (the ``colocate_dgpo_run`` launch): verl's async path ran, DGPO's metrics are on
    every step, and each step counts every group of its prompts once (one estimator call a step in this mode)."""
    run = colocate_dgpo_run
    assert "'trainer_mode': 'colocate_async'" in run.log and "warmup prompts" in run.log  # verl's async path ran
    assert sorted(run.steps) == list(range(1, HALF + 1))
    for step, values in run.steps.items():
        assert all(m in values for m in DGPO_METRICS), step
        assert values["dgpo/valid_groups"] + values["dgpo/zero_var_groups"] == PROMPTS, step


@pytest.mark.slow
def test_hadw_with_dynamic_sampling_is_refused_before_training(refused_run):
    run = refused_run
    assert run.code != 0
    assert "algorithm.adv_estimator=hadw cannot run with algorithm.filter_groups.enable=true" in run.log
    assert "biased toward 0.5" in run.log
    assert RAY_STARTED not in run.log and not run.steps and "Training Progress" not in run.log  # before Ray

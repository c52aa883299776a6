"""End to end: verl's real ``python -m verl.trainer.main_ppo`` on CPU with the toy task (about 1 minute a run).

Each run is the user's command (`verl_hadw.toy.launch` only sets verl's extension-point environment and
passes ``configs/cpu/demo.yaml``); assertions read verl's own console log lines.
"""

import pytest

from verl_hadw.toy.launch import parse_steps, run

HADW_METRICS = [
    "hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t",
    "hadw/phi_mean", "hadw/phi_std", "hadw/phi_min", "hadw/phi_max", "hadw/frac_amplified", "hadw/actor_recoveries",
]
DGPO_METRICS = ["dgpo/valid_groups", "dgpo/zero_var_groups", "dgpo/valid_token_ratio", "dgpo/weight_min", "dgpo/weight_max"]
ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t"]


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return str(tmp_path_factory.mktemp("assets"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


def main_ppo(assets, workdir, name, *overrides, expect_ok=True):
    code, log = run(
        assets,
        [f"trainer.experiment_name={name}", f"trainer.default_local_dir={workdir}/{name}", *overrides],
        cwd=str(workdir),
    )
    (workdir / f"{name}.log").write_text(log)
    if expect_ok:
        assert code == 0, log[-5000:]
    return code, log, parse_steps(log)


def assert_step_lines(steps, n, metrics):
    assert sorted(steps) == list(range(1, n + 1))
    nonzero_steps = 0
    for step, values in steps.items():
        missing = [m for m in metrics if m not in values]
        assert not missing, f"step {step} lacks {missing}"
        if values["critic/advantages/max"] > 0 or values["critic/advantages/min"] < 0:
            nonzero_steps += 1
            continue
        # All-zero advantages are right only when every group was degenerate (all correct or all wrong):
        # DGPO then counts no valid group, and HA-DW's Φ is λ for every response (D = 0).
        if "dgpo/valid_groups" in values:
            assert values["dgpo/valid_groups"] == 0, f"step {step}: valid groups but all-zero advantages"
        if "hadw/phi_max" in values:
            assert values["hadw/phi_max"] == values["hadw/phi_min"], f"step {step}: all-zero advantages"
    assert nonzero_steps >= 1


@pytest.fixture(scope="module")
def hadw_four_steps(assets, workdir):
    """The uninterrupted reference: 4 steps, checkpoints at steps 2 and 4."""
    return main_ppo(assets, workdir, "straight", "trainer.total_training_steps=4", "trainer.save_freq=2")


def test_v1_hadw(hadw_four_steps, workdir):
    _, log, steps = hadw_four_steps
    assert_step_lines(steps, 4, HADW_METRICS)
    assert steps[2]["hadw/anchor_prior"] == steps[1]["hadw/anchor_posterior"]  # Eq. 12 across real steps
    assert (workdir / "straight" / "global_step_2" / "verl_hadw_anchor.json").exists()
    assert (workdir / "straight" / "global_step_4" / "verl_hadw_anchor.json").exists()
    assert steps[1]["training/rollout_probs_diff_max"] < 1e-2  # the hfcpu rollout samples the actor's weights


def test_v1_dgpo(assets, workdir):
    _, _, steps = main_ppo(assets, workdir, "dgpo", "algorithm.adv_estimator=dgpo", "trainer.total_training_steps=2")
    assert_step_lines(steps, 2, DGPO_METRICS)
    assert not any(k.startswith("hadw/") for k in steps[1])


def test_v1_hadw_over_dgpo(assets, workdir):
    _, _, steps = main_ppo(assets, workdir, "hadw_dgpo", "+algorithm.hadw.base=dgpo", "trainer.total_training_steps=2")
    assert_step_lines(steps, 2, HADW_METRICS + DGPO_METRICS)


def test_legacy_trainer_hadw(assets, workdir):
    _, log, steps = main_ppo(assets, workdir, "legacy", "trainer.use_v1=false", "trainer.total_training_steps=2")
    assert "main_ppo_v0" in log or "TaskRunner pid" in log
    assert_step_lines(steps, 2, HADW_METRICS)


def test_resume_continues_the_anchor_exactly(assets, workdir, hadw_four_steps):
    straight = hadw_four_steps[2]
    main_ppo(assets, workdir, "resumed", "trainer.total_training_steps=2", "trainer.save_freq=2")
    _, log, resumed = main_ppo(
        assets, workdir, "resumed", "trainer.total_training_steps=4", "trainer.save_freq=2", "trainer.resume_mode=auto"
    )
    assert sorted(resumed) == [3, 4]
    assert "HA-DW anchor restored" in log or "Resuming from" in log
    for step in (3, 4):
        assert {k: resumed[step][k] for k in ANCHOR} == {k: straight[step][k] for k in ANCHOR}, step


def test_typo_fails_fast_naming_the_key(assets, workdir):
    code, log, steps = main_ppo(assets, workdir, "typo", "+algorithm.hadw.lamda_scale=1.3", expect_ok=False)
    assert code != 0
    assert "Unknown key 'algorithm.hadw.lamda_scale'. Did you mean 'algorithm.hadw.lambda_scale'?" in log
    assert not steps and "Training Progress" not in log

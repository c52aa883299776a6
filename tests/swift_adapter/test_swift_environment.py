"""The ms-swift environments (``tests/helpers/swift_environment.py``, run by the session's stage as the
``swift_env_oldest`` and ``swift_env_newest`` launches beside the other tests): at each end of ``SWIFT_RANGE``, the
``[swift]`` extra adds verl-hadw to an environment where ms-swift went first and changes nothing else; the swift
adapter's tests (every test file of ``tests/swift_adapter/`` but this reader: end to end through swift's pipeline and
``verl-hadw-swift rlhf`` on two CPU ranks), the core's (``tests/core/``) and those of ``tests/hf_trainer/`` once it
has tests pass there. The HA-DW / DGPO runs' generation batches, replayed through TRL's
adapter and verl's estimator here, give the advantages swift trained on."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from e2e_runs import SWIFT_NEWEST, SWIFT_OLDEST
from pytest_summary import not_passed, passed_count
from repo_paths import ROOT, TESTS
from swift_environment import PACKED
from trl_helpers import config, trainer

from verl_hadw import SWIFT_RANGE
from verl_hadw.toy.task import compute_score
from verl_hadw.verl_adapter.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage
from verl_hadw.verl_adapter.process_state import reset

pytestmark = pytest.mark.slow
RUNS = {  # the environment's kept runs -> (TRL config overrides, verl's estimator)
    "hadw": ({}, compute_hadw_outcome_advantage),
    "dgpo": ({"adv_estimator": "dgpo"}, compute_dgpo_outcome_advantage),
    "hadw_over_dgpo": ({"hadw_base": "dgpo"}, compute_hadw_outcome_advantage),
}


def test_the_environments_are_the_ends_of_the_range():
    assert SWIFT_RANGE == f">={SWIFT_OLDEST},<4.7" and SWIFT_NEWEST.startswith("4.6.")


@pytest.mark.e2e("swift_env_oldest", "swift_env_newest")
@pytest.mark.parametrize("launch", ["swift_env_oldest", "swift_env_newest"])
def test_the_swift_extra_changes_nothing_a_swift_user_has_and_the_adapters_tests_pass(e2e, capsys, launch):
    run = e2e.result(launch)
    version = SWIFT_OLDEST if launch.endswith("oldest") else SWIFT_NEWEST
    with capsys.disabled():  # the freezes, the command line, its hadw/* log lines and the timings in CI's output
        print("\n" + "\n".join(line for line in run.output.splitlines() if line.startswith(("[swift", "PASSED"))))
    assert run.code == 0, run.output[-6000:]
    assert f"[swift {version}] added: ['verl-hadw']" in run.output
    passed = set(re.findall(r"^PASSED (tests/[\w/]+\.py)::", run.output, re.M))
    left_out = {Path(__file__).name} | ({PACKED.name} if launch.endswith("oldest") else set())  # its --lean
    expected = {str(p.relative_to(ROOT)) for folder in ("core", "swift_adapter", "hf_trainer")
                for p in (TESTS / folder).glob("test_*.py") if p.name not in left_out}
    assert passed == expected, (sorted(expected - passed), run.output[-3000:])
    for test in ("test_resume_from_step_2_continues_the_uninterrupted_run_bit_for_bit",
                 "test_the_command_line_trains_hadw_and_every_rank_holds_the_same_anchor",
                 "test_switched_off_it_is_swifts_grpo_bit_for_bit[dapo]"):
        assert f"PASSED tests/swift_adapter/test_swift_training.py::{test}" in run.output, run.output[-3000:]
    ranks = 1 if launch.endswith("oldest") else 2  # the oldest's environment is lean
    assert f"[swift environment] ranks {ranks}: anchors after each step" in run.output
    assert passed_count(run.output) > 0 and not_passed(run.output) == []  # none failed, erred, skipped, x-ed
    assert f"[swift {version}] every check passed" in run.output


def swift_calls(run, name: str) -> list[dict]:
    (folder,) = re.findall(r"^\[swift [\d.]+\] records: (.+)$", run.output, re.M)
    return [json.loads(line) for line in (Path(folder) / name / "rank0.jsonl").read_text().splitlines()]


def verl_advantages(t, estimator, call) -> torch.Tensor:
    """verl's registered estimator on one swift generation batch (the same groups; token masks of its lengths)."""
    node = t.args.algorithm_node()
    if estimator is compute_dgpo_outcome_advantage or node["hadw"]["base"] == "grpo":  # only what it reads
        node.pop("hadw" if estimator is compute_dgpo_outcome_advantage else "dgpo")
    rewards, lengths = torch.tensor(call["rewards"])[:, 0], torch.tensor(call["lengths"]).long()
    mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).float()
    token_rewards = torch.zeros(mask.shape)
    token_rewards[:, 0] = rewards
    uid = np.array([f"prompt-{i // t.num_generations}" for i in range(rewards.numel())], dtype=object)
    adv, _ = estimator(token_rewards, mask, uid, config=node)
    return adv[:, 0]


@pytest.mark.e2e("swift_env_newest")
@pytest.mark.parametrize("name", list(RUNS))
def test_the_same_batch_gives_the_same_advantages_through_swift_trl_and_verl(e2e, tmp_path, name):
    """Each generation batch swift trained on, replayed in order from a fresh anchor through TRL's adapter and verl's
    estimator, starting from what swift itself held (not from the swift adapter's own intermediate values):
    the rewards scored again from swift's completions, the loss tokens of swift's masks, whose sum is swift's
    num_items_in_batch. TRL's adapter runs the same function as swift's (``generation_advantages``): equal exactly;
    verl's estimator: within 1e-6. The three runs use the same options (the toy run's: GRPO's std, the default
    anchor)."""
    overrides, estimator = RUNS[name]
    calls = swift_calls(e2e.result("swift_env_newest"), name)
    assert calls and all(c["training"] for c in calls)
    t = trainer(config(tmp_path, **overrides))  # TRL's adapter, fresh anchor
    reset()  # verl's estimator: a fresh anchor too
    try:
        for call in calls:
            swift = torch.tensor(call["advantages"])
            scored = zip(call["completions"], call["solutions"], strict=True)
            rewards = [[compute_score("toy", c, s)] for c, s in scored]
            tokens = call["mask_tokens"]
            assert sum(tokens) == call["num_items_in_batch"][0]  # swift's own count
            held = {**call, "rewards": rewards, "lengths": tokens}
            t.state.global_step = call["step"] - 1  # the step TRL's adapter observes: global_step + 1
            trl, _ = t.hadw_advantages(torch.tensor(rewards), torch.tensor(tokens, dtype=torch.float32))
            assert torch.equal(trl, swift), (trl - swift).abs().max()
            torch.testing.assert_close(verl_advantages(t, estimator, held), swift, rtol=1e-6, atol=1e-6)
            if t.hadw_anchor is not None:
                assert t.hadw_anchor.state.to_dict()["posteriors"] == call["anchor"]["posteriors"]
    finally:
        reset()

"""The reward on the prepared data: verl's MATH checker and math-verify on fixture cases, every prepared row
scored through verl's own reward loader as the configs name it, the backend choice."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest
from data_fixtures import FIXTURES, SOURCES, block_hub, read_rows

from verl_hadw.repro import catalogue as K
from verl_hadw.repro import data, reward


class InlineExecutor:
    """Stands in for verl's math-verify process pool: runs the same function in this process (the pool only
    adds a timeout; spawning it costs ~20 s of imports on this machine)."""

    def submit(self, fn, *args, **kwargs):
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@pytest.fixture
def inline_math_verify(monkeypatch):
    from verl.utils.reward_score import math_verify as verl_math_verify

    monkeypatch.setattr(verl_math_verify, "_get_pool", lambda: InlineExecutor())


@pytest.fixture
def no_hub(monkeypatch):
    return block_hub(monkeypatch)


CASES = [json.loads(line) for line in (FIXTURES / "reward_cases.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("case", CASES, ids=[c["why"] for c in CASES])
def test_reward_backends_on_fixture_cases(case, inline_math_verify):
    for backend in ("verl_math", "math_verify"):
        result = reward.compute_score("x", case["response"], case["ground_truth"], backend=backend)
        assert result == {"score": float(case[backend]), "acc": float(case[backend])}, backend


def test_reward_per_dataset_through_verls_loader(tmp_path, no_hub, inline_math_verify):
    """verl loads the reward the way the configs name it (pkg://verl_hadw.repro.reward + reward_kwargs); every
    prepared fixture row is right when the response boxes its answer and wrong otherwise."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from verl_hadw.repro.compose import compose_run

    data.prepare(tmp_path, ["hadw", "dgpo"], dict(s.split("=", 1) for s in SOURCES), log=lambda *_: None)
    for run, paper in (("hadw_t1_qwen3_4b_dapo", "hadw"), ("dgpo_t1_grpo", "dgpo")):
        score = get_custom_reward_fn(compose_run(run))
        for stem in ["math_train", *K.eval_files(paper)]:
            name = stem.split(".")[0]
            for row in read_rows(tmp_path / paper / f"{stem}.parquet"):
                gt = row["reward_model"]["ground_truth"]
                right = score(data_source=name, solution_str=f"Reasoning... \\boxed{{{gt}}}", ground_truth=gt,
                              extra_info=row["extra_info"])
                wrong = score(data_source=name, solution_str="\\boxed{-12345}", ground_truth=gt,
                              extra_info=row["extra_info"])
                signed = paper == "hadw"  # the HA-DW DAPO run: +1/-1 rewards
                assert (right["score"], right["acc"]) == (1.0, 1.0), (run, name, gt)
                assert (wrong["score"], wrong["acc"]) == ((-1.0 if signed else 0.0), 0.0), (run, name, gt)
                level = row["extra_info"]["level"]
                if name == "math500":
                    band = reward.level_band(level)
                    assert right[f"acc_level{level}"] == 1.0 and right[f"acc_{band}"] == 1.0
                else:
                    assert set(right) == {"score", "acc"}


def test_reward_backend_choice_and_errors():
    assert reward.backend_for("math500") == "verl_math" and reward.backend_for("aime25") == "verl_math"
    assert reward.backend_for("minerva") == "math_verify" and reward.backend_for("olympiadbench") == "math_verify"
    assert reward.backend_for("math500", "math_verify") == "math_verify"
    with pytest.raises(ValueError, match="backend='sympy' is not valid"):
        reward.compute_score("math500", "\\boxed{1}", "1", backend="sympy")
    with pytest.raises(ValueError, match="empty reward_model.ground_truth"):
        reward.compute_score("math500", "\\boxed{1}", "  ")
    assert [reward.level_band(k) for k in range(1, 6)] == ["easy", "mid", "mid", "hard", "hard"]


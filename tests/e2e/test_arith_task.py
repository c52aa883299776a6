"""The arithmetic task (verl_hadw.toy.arith): its problems, its held-out split, its exact-match grading, and the
starting model's pretraining (verl_hadw.toy.arith_model) on a stand-in recipe."""

from __future__ import annotations

import pytest

from verl_hadw.toy import arith
from verl_hadw.toy import arith_model as model_module


@pytest.mark.parametrize("tier", arith.TIERS)
def test_every_answer_is_right_and_held_out_and_dev_problems_are_never_trained_on(tier):
    train, test, dev = (arith.problems(tier, split) for split in ("train", "test", "dev"))
    assert len(test) == arith.HELD_OUT[tier] and len(dev) == arith.DEV[tier]
    assert len({q for q, _ in train + test + dev}) == len(train) + len(test) + len(dev)  # disjoint
    for question, answer in train + test + dev:
        left, op, right = question[:-1].partition("+" if "+" in question else "*")
        assert int(answer) == (int(left) + int(right) if op == "+" else int(left) * int(right))
    assert max(len(a) for _, a in train + test) >= 2  # answers of several tokens
    (lo_a, hi_a), _, (lo_b, hi_b), carry = arith.OPERANDS[tier]
    every = [(a, b) for a in range(lo_a, hi_a + 1) for b in range(lo_b, hi_b + 1)]
    tier_pairs = [1 for a, b in every if carry is None or (a % 10 + b % 10 > 9) == carry]
    assert len(train) + len(test) + len(dev) == len(tier_pairs)
    if carry is not None:  # the tier's carry, as its name says
        assert all((int(q.split("+")[0]) % 10 + int(q[:-1].split("+")[1]) % 10 > 9) == carry for q, _ in train)


def test_rows_are_verl_rows_and_the_held_out_set_is_the_same_for_every_seed():
    rows = arith.make_rows(8, 3, "train")
    assert [r["extra_info"]["tier"] for r in rows] == list(arith.TIERS) * 2
    assert {r["data_source"] for r in rows} == {f"arith_{t}" for t in arith.TIERS}
    held_out = [r["prompt"] for r in arith.make_rows(120, 1, "test", first=100_000)]
    assert held_out == [r["prompt"] for r in arith.make_rows(120, 2, "test")]
    easy = [r["prompt"][0]["content"] for r in arith.make_rows(400, 1, "test") if r["extra_info"]["tier"] == "easy"]
    assert sorted(easy) == sorted(q for q, _ in arith.problems("easy", "test"))  # each easy held-out problem once


@pytest.mark.parametrize("response, score", [
    ("55", 1.0), (" 55\n", 1.0), ("55 ", 1.0),
    ("56", 0.0), ("5", 0.0), ("555", 0.0), ("55x", 0.0), ("5 5", 0.0), ("", 0.0), ("+55", 0.0), ("055", 0.0),
    (None, 0.0), (b"55", 0.0), (55, 0.0),
])
def test_the_reward_is_an_exact_match_and_anything_malformed_scores_zero(response, score):
    assert arith.compute_score("arith_medium", response, "55") == score


def test_pretraining_is_deterministic_and_the_grading_counts_each_answer_against_its_problem(tmp_path):
    """Two pretrainings of one recipe give the same weights (sha256); ``held_out_accuracy`` equals grading each
    sampled answer by hand against the problem it answers."""
    import torch

    recipe = model_module.QUICK_RECIPE
    first, tokenizer = model_module.pretrain(tmp_path / "a", recipe, log=lambda m: None)
    model_module.pretrain(tmp_path / "b", recipe, log=lambda m: None)
    assert model_module.weights_sha256(tmp_path / "a") == model_module.weights_sha256(tmp_path / "b")
    n = 3
    accuracy = model_module.held_out_accuracy(first, tokenizer, n=n, seed=5, batch=64)
    by_hand = {}
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(5)
        first.eval()
        for tier in arith.TIERS:
            right = []
            for start in range(0, len(arith.problems(tier, "test")), 64):
                chunk = arith.problems(tier, "test")[start:start + 64]
                prompts = [model_module._encode(tokenizer, q)[0] for q, _ in chunk]
                width = max(map(len, prompts))
                ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts])
                mask = (ids != tokenizer.pad_token_id).long()
                out = first.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                                     top_p=1.0, num_return_sequences=n, max_new_tokens=6,
                                     pad_token_id=tokenizer.pad_token_id)
                for k, (question, answer) in enumerate(chunk):
                    for j in range(n):
                        text = tokenizer.decode(out[k * n + j, width:], skip_special_tokens=True)
                        right.append(text.strip() == answer)
            by_hand[tier] = sum(right) / len(right)
    assert accuracy == by_hand
    assert set(accuracy) == set(arith.TIERS)


def test_weights_other_than_the_recorded_ones_are_refused_by_name(tmp_path):
    model_module.pretrain(tmp_path, model_module.QUICK_RECIPE, log=lambda m: None)
    with pytest.raises(RuntimeError, match="not the recorded .*--no-verify"):
        model_module.ensure_model(tmp_path)
    assert model_module.ensure_model(tmp_path, verify=False) == tmp_path

"""The arithmetic task: sums and products of integers in four tiers of difficulty, rewarded by exact match.

A prompt such as ``47+8=`` is solved by a response that is exactly the answer (``55``), blanks around it aside.
Each tier is its own verl ``data_source`` (``arith_<tier>``); held-out problems never appear in training.
This file must stay dependency-free: verl loads ``compute_score`` by file path.
"""

from __future__ import annotations

import random

TIERS = ("easy", "medium", "hard", "hardest")
# (left operand range, operator, right operand range, carry in the units) of each tier: two digits plus one without a
# carry, then with one, two digits plus two, and the harder operation, two digits times one digit
OPERANDS = {"easy": ((10, 99), "+", (0, 9), False), "medium": ((10, 99), "+", (0, 9), True),
            "hard": ((10, 99), "+", (10, 99), None), "hardest": ((10, 99), "*", (2, 9), None)}
HELD_OUT = {"easy": 100, "medium": 100, "hard": 400, "hardest": 200}  # problems of each tier never trained on
DEV = {"easy": 50, "medium": 50, "hard": 100, "hardest": 100}  # neither trained on nor held out: the pretraining's pick
CHARS = "0123456789+*="  # every character of a prompt or an answer


def data_source(tier: str) -> str:
    return f"arith_{tier}"


def problems(tier: str, split: str) -> list[tuple[str, str]]:
    """The tier's ``(question, answer)`` pairs of ``split`` in a fixed order: ``test`` (``HELD_OUT[tier]`` drawn once
    with a fixed seed), ``dev`` (the next ``DEV[tier]``) and ``train`` (the rest) are disjoint."""
    (lo_a, hi_a), op, (lo_b, hi_b), carry = OPERANDS[tier]
    pairs = [(f"{a}{op}{b}=", str(a + b if op == "+" else a * b))
             for a in range(lo_a, hi_a + 1) for b in range(lo_b, hi_b + 1)
             if carry is None or (a % 10 + b % 10 > 9) == carry]
    random.Random(f"arith-{tier}").shuffle(pairs)
    held, dev = HELD_OUT[tier], HELD_OUT[tier] + DEV[tier]
    splits = {"test": pairs[:held], "dev": pairs[held:dev], "train": pairs[dev:]}
    if split not in splits:
        raise ValueError(f"split must be one of {', '.join(splits)}, got {split!r}")
    return splits[split]


def make_rows(n: int, seed: int, split: str, first: int = 0) -> list[dict]:
    """``n`` verl dataset rows cycling through the tiers, each a problem of ``split`` drawn with ``seed``.

    ``split="test"`` with ``n`` a multiple of the tiers gives each tier's held-out problems in a fixed order
    (``seed`` unused): the same held-out set for every run.
    """
    rng = random.Random(seed)
    pools = {tier: problems(tier, split) for tier in TIERS}
    rows = []
    for i in range(first, first + n):
        tier = TIERS[i % len(TIERS)]
        pool = pools[tier]
        question, answer = pool[((i - first) // len(TIERS)) % len(pool)] if split == "test" else rng.choice(pool)
        rows.append({
            "data_source": data_source(tier),
            "prompt": [{"role": "user", "content": question}],
            "ability": "arith",
            "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"split": split, "index": i, "tier": tier},
        })
    return rows


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """1.0 if the response is exactly the answer (blanks around it aside), else 0.0; anything malformed is 0.0."""
    if not isinstance(solution_str, str):
        return 0.0
    return 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0

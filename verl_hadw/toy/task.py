"""The toy task: "answer with one digit from a given set", with graded difficulty and a binary reward.

A prompt such as ``#17 pick a digit from 2-6`` is solved by a response whose first non-blank character is
a digit in that set. Difficulty is graded by the size k of the set (1 to 9 digits): a random character-level
policy succeeds with probability about k / vocabulary size, i.e. a few percent on hard prompts and ~20 % on
easy ones, and a tiny model can learn it in a few GRPO steps, so the HA-DW anchor and the hard/easy split
have something to track. This file must stay dependency-free: verl loads ``compute_score`` by file path.
"""

from __future__ import annotations

import random

DATA_SOURCE = "verl_hadw/toy_digits"


def make_prompt(index: int, low: int, high: int) -> str:
    return f"#{index} pick a digit from {low}-{high}"


def make_rows(n: int, seed: int, split: str) -> list[dict]:
    """``n`` verl dataset rows with sets of 1..9 digits (uniform over sizes, so many hard prompts)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        size = rng.randint(1, 9)
        low = rng.randint(0, 10 - size)
        high = low + size - 1
        allowed = "".join(str(d) for d in range(low, high + 1))
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": make_prompt(i, low, high)}],
                "ability": "toy",
                "reward_model": {"style": "rule", "ground_truth": allowed},
                "extra_info": {"split": split, "index": i, "set_size": size},
            }
        )
    return rows


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """1.0 if the response's first non-blank character is one of the allowed digits, else 0.0."""
    text = solution_str.strip()
    return 1.0 if text and text[0] in ground_truth else 0.0

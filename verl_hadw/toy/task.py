"""The toy task: "answer with one character from a given set", graded difficulty, binary reward.

A prompt such as ``#17 pick a digit from 2-6`` is solved by a response whose first non-blank character is
in the named set. Difficulty is graded by the set's size k: a letter (26), a digit (10), a vowel (5) or a
digit from a range (1 to 9). The tiny model starts near-uniform over its 48 tokens, so it succeeds with
probability about k / 48: ~54 % on "letter" prompts, a few percent on narrow ranges; mean accuracy starts
near 0.2 and rises within a few dozen GRPO steps, so the HA-DW anchor and the hard/easy split have something
to track. This file must stay dependency-free: verl loads ``compute_score`` by file path.
"""

from __future__ import annotations

import random
import string

DATA_SOURCE = "verl_hadw/toy_chars"
FAMILIES = {  # name -> allowed characters; "range" prompts draw a digit range instead
    "letter": string.ascii_lowercase,
    "digit": string.digits,
    "vowel": "aeiou",
}


def make_rows(n: int, seed: int, split: str) -> list[dict]:
    """``n`` verl dataset rows: 1/4 letter, 1/4 digit, 1/8 vowel, 3/8 digit-range prompts (many hard ones)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        family = rng.choice(["letter", "letter", "digit", "digit", "vowel", "range", "range", "range"])
        if family == "range":
            size = rng.randint(1, 9)
            low = rng.randint(0, 10 - size)
            allowed = "".join(str(d) for d in range(low, low + size))
            text = f"#{i} pick a digit from {low}-{low + size - 1}"
        else:
            allowed = FAMILIES[family]
            text = f"#{i} pick a {family}"
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": text}],
                "ability": "toy",
                "reward_model": {"style": "rule", "ground_truth": allowed},
                "extra_info": {"split": split, "index": i, "family": family, "set_size": len(allowed)},
            }
        )
    return rows


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """1.0 if the response's first non-blank character is one of the allowed digits, else 0.0."""
    text = solution_str.strip()
    return 1.0 if text and text[0] in ground_truth else 0.0

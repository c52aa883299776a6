"""The toy task: "answer with one character from a given set", four difficulty tiers, binary reward (docs/demo.md).

A prompt such as ``#17 pick a vowel`` is solved by a response whose first non-blank character is in the named set.
Each tier is its own verl ``data_source`` (``toy_<tier>``), so verl's validation logs accuracy per tier.
This file must stay dependency-free: verl loads ``compute_score`` by file path.
"""

from __future__ import annotations

import random
import string

# Graded by the size k of the answer set against the tiny model's 48 tokens (a near-uniform random policy is right
# with probability about k / 48): easy a letter (k = 26, ~54 %), medium a digit (10, ~21 %), hard a vowel (5, ~10 %),
# hardest a digit from a range of 2 or 3 (~5 %). In equal shares the mean reward starts near 0.22; answering vowels
# whatever the prompt earns 0.5, which a 60k-parameter model finds in a few dozen GRPO steps.
TIERS = ("easy", "medium", "hard", "hardest")
FAMILIES = {"easy": ("letter", string.ascii_lowercase), "medium": ("digit", string.digits), "hard": ("vowel", "aeiou")}


def data_source(tier: str) -> str:
    return f"toy_{tier}"


def make_rows(n: int, seed: int, split: str, first: int = 0) -> list[dict]:
    """``n`` verl dataset rows cycling through the tiers (the ``hardest`` ranges drawn with ``seed``).

    Prompts are numbered from ``first`` (``#first``, ...): a held-out split starting after the training rows
    shares no prompt text with them.
    """
    rng = random.Random(seed)
    rows = []
    for i in range(first, first + n):
        tier = TIERS[i % len(TIERS)]
        if tier == "hardest":
            size = rng.randint(2, 3)
            low = rng.randint(0, 10 - size)
            allowed = "".join(str(d) for d in range(low, low + size))
            text = f"#{i} pick a digit from {low}-{low + size - 1}"
        else:
            family, allowed = FAMILIES[tier]
            text = f"#{i} pick a {family}"
        rows.append(
            {
                "data_source": data_source(tier),
                "prompt": [{"role": "user", "content": text}],
                "ability": "toy",
                "reward_model": {"style": "rule", "ground_truth": allowed},
                "extra_info": {"split": split, "index": i, "tier": tier, "set_size": len(allowed)},
            }
        )
    return rows


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """1.0 if the response's first non-blank character is one of the allowed characters, else 0.0."""
    text = solution_str.strip()
    return 1.0 if text and text[0] in ground_truth else 0.0

"""Shared pieces of tests/research/test_sim.py (tests/ has no __init__.py; tests/helpers is on sys.path: import as
``from sim_helpers import ...``)."""

from __future__ import annotations

import math

from verl_hadw.research.sim.config import SimConfig

# A small simulation: 16 prompts × G = 8 per step (128 rows, padded to 144), a few steps, ~0.1 s per run.
SMALL = SimConfig(steps=12, prompts=256, heldout=64, batch_prompts=16)


def same_records(a: list[dict], b: list[dict]) -> bool:
    """Equal record lists, NaN == NaN."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        for k in x:
            u, v = x[k], y[k]
            if isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v):
                continue
            if u != v:
                return False
    return True

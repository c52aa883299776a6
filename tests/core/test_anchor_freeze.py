"""The default anchor cannot freeze for good; the literal Eq. 10-11 (``anchor.eta_min: 0``) can.

With σ_t taken over the anchor's own last m values (Eq. 10), two equal first batch accuracies, or m all-correct /
all-wrong steps, give σ_t = 0 and η_t = 0 from then on. The default floor ``eta_min`` keeps C_t following y_t.
"""

from __future__ import annotations

import numpy as np
import pytest

from verl_hadw.core.anchor import AnchorState
from verl_hadw.core.options import AnchorConfig

LITERAL = AnchorConfig(eta_min=0.0)


def posteriors(cfg: AnchorConfig, ys, count: int = 32) -> list[float]:
    state = AnchorState(config=cfg)
    return [state.observe(t, 0, y * count, count).posterior for t, y in enumerate(ys, start=1)]


def test_the_default_has_a_floor_and_the_literal_switch_is_zero():
    assert AnchorConfig().eta_min == 0.05
    assert AnchorConfig().sigma_source == "anchor"  # Eq. 10's σ itself is unchanged; only η_t is floored


# Each start is a known freeze trigger: equal first accuracies, several all-correct or all-wrong steps.
STARTS = {
    "two equal accuracies": [0.5, 0.5],
    "all wrong for 12 steps": [0.0] * 12,
    "all correct for 12 steps": [1.0] * 12,
    "all wrong then all correct": [0.0] * 5 + [1.0] * 5,
}


@pytest.mark.parametrize("start", STARTS.values(), ids=list(STARTS))
def test_default_follows_the_batch_accuracy_whatever_the_first_steps(start):
    later = [0.75] * 120
    default = posteriors(AnchorConfig(), start + later)
    assert abs(default[-1] - 0.75) < 1e-3  # caught up with the accuracy
    assert max(default[-100:]) - min(default[-100:]) > 1e-3 or abs(default[-100] - 0.75) < 1e-3
    literal = posteriors(LITERAL, start + later)
    if len(set(start)) == 1:  # a constant start gives σ_t = 0: the literal anchor never moves again
        assert literal[-1] == literal[len(start) - 1] and abs(literal[-1] - 0.75) > 0.2


def test_literal_eq10_freezes_in_about_one_run_in_nine_at_32_responses_and_the_default_never():
    """Binomial batch accuracies on a rising curve: the freeze simulation of benchmarks/anchor_freeze.py, small."""
    p = 0.35 + 0.35 * (1.0 - np.exp(-np.arange(120) / 80.0))
    stuck = {"default": 0, "literal": 0}
    ties = 0
    seeds = 200
    for seed in range(seeds):
        ys = np.random.default_rng(seed).binomial(32, p) / 32
        ties += int(ys[0] == ys[1])
        for name, cfg in (("default", AnchorConfig()), ("literal", LITERAL)):
            tail = np.array(posteriors(cfg, list(ys)))[5:]
            stuck[name] += int(tail.max() - tail.min() < 1e-3)
    assert stuck["default"] == 0
    assert stuck["literal"] == ties and 0.05 < ties / seeds < 0.2  # every tie froze the literal anchor for good

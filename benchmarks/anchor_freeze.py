"""Can the HA-DW anchor freeze for good? The measurement behind the default ``anchor.eta_min``.

With the literal Eq. 10, σ_t is the spread of the anchor's own last m values. When the first two batch accuracies
are equal (or m steps in a row are all-correct or all-wrong), σ_t = 0, so η_t = η·σ_t = 0 and C_t never moves
again: HA-DW silently becomes a fixed-anchor method. A floor η_t ≥ eta_min (Eq. 11 clamped) keeps it moving.

This script feeds the package's own ``AnchorState`` (the code verl runs) with binomial batch accuracies
y_t = K_t / B, K_t ~ Binomial(B, p_t), on a saturating learning curve p_t = 0.35 + 0.35 (1 - e^{-t/80})
(300 steps), for B = 32 (the CPU demo) and B = 2048 (the paper: 256 prompts x 8 rollouts), over many seeds,
and reports per configuration:

* ``stuck``: share of runs in which, from some step t ≥ 3 on, the anchor moved < 1e-3 in total while the true
  accuracy p moved > 0.05 (the anchor stays stuck while the accuracy moves; target 0);
* ``lag``: the delay k (steps) minimising Σ (C_t - p_{t-k})² over steps 120-300, median over the runs;
* ``err``: median over runs of the mean |C_t - p_t| over steps 120-300;
* ``P(y1=y2)``: share of runs whose first two batch accuracies are equal (the classic freeze trigger).

Run: ``python benchmarks/anchor_freeze.py`` (1,000 seeds per batch size, about 3 minutes on one core).
"""

from __future__ import annotations

import argparse

import numpy as np

from verl_hadw.core.anchor import AnchorState
from verl_hadw.core.options import AnchorConfig

STEPS = 300
FIT_FROM = 120
STUCK_MOVE = 1e-3
STUCK_ACCURACY_MOVE = 0.05


def true_accuracy(steps: int = STEPS) -> np.ndarray:
    t = np.arange(steps)
    return 0.35 + 0.35 * (1.0 - np.exp(-t / 80.0))


def trajectory(cfg: AnchorConfig, correct: np.ndarray, batch: int) -> np.ndarray:
    """C_t⁺ per step for the given correct counts (one estimator call per step)."""
    state = AnchorState(config=cfg)
    return np.array([state.observe(t, 0, float(k), batch).posterior for t, k in enumerate(correct, start=1)])


def stuck(anchor: np.ndarray, p: np.ndarray) -> bool:
    """From some step on, the anchor moves < STUCK_MOVE in total while p moves > STUCK_ACCURACY_MOVE."""
    for t in range(2, len(anchor) - 1):
        tail = anchor[t:]
        if tail.max() - tail.min() < STUCK_MOVE:
            return bool(abs(p[-1] - p[t]) > STUCK_ACCURACY_MOVE)
    return False


def lag(anchor: np.ndarray, p: np.ndarray) -> int:
    errors = [np.sum((anchor[FIT_FROM:] - p[FIT_FROM - k : len(p) - k]) ** 2) for k in range(FIT_FROM)]
    return int(np.argmin(errors))


def evaluate(cfg: AnchorConfig, batch: int, seeds: int) -> dict:
    p = true_accuracy()
    stuck_runs, lags, errs, ties = 0, [], [], 0
    for seed in range(seeds):
        correct = np.random.default_rng(seed).binomial(batch, p)
        ties += int(correct[0] == correct[1])
        anchor = trajectory(cfg, correct, batch)
        stuck_runs += stuck(anchor, p)
        lags.append(lag(anchor, p))
        errs.append(float(np.mean(np.abs(anchor[FIT_FROM:] - p[FIT_FROM:]))))
    return {
        "stuck": stuck_runs / seeds,
        "lag": float(np.median(lags)),
        "err": float(np.median(errs)),
        "ties": ties / seeds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 2048])
    parser.add_argument("--eta-mins", type=float, nargs="+", default=[0.0, 0.02, 0.05, 0.1])
    args = parser.parse_args()
    default = AnchorConfig()
    print(f"eta={default.eta}, m={default.window}, sigma_source={default.sigma_source}, {args.seeds} seeds, "
          f"p_t = 0.35 + 0.35 (1 - exp(-t/80)), {STEPS} steps")
    print(f"{'B':>5} {'eta_min':>8} {'stuck':>7} {'lag':>6} {'err':>7} {'P(y1=y2)':>9}")
    for batch in args.batches:
        for eta_min in args.eta_mins:
            row = evaluate(AnchorConfig(eta_min=eta_min), batch, args.seeds)
            mark = "  <- default" if eta_min == default.eta_min else ""
            print(f"{batch:>5} {eta_min:>8g} {row['stuck']:>7.3f} {row['lag']:>6g} {row['err']:>7.4f} "
                  f"{row['ties']:>9.3f}{mark}")


if __name__ == "__main__":
    main()

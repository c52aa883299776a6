"""How fast does the HA-DW anchor follow the model's accuracy? The measurement behind the default η.

The paper gives no η (Eq. 11) and its σ_t (Eq. 10) is the std of the anchor's own recent values, so a slow
anchor gets a small σ_t and slows further. This script feeds ``AnchorState`` (the package's own state
machine, the code verl runs) with batch accuracies y_t and reports, for each σ source and η:

* ``rise``: steps until the anchor covers 63% of a noisy jump 0.35 -> 0.55 (the time constant);
* ``lag``: the delay k (steps) minimising Σ (C_t - ȳ_{t-k})² on a realistic saturating curve
  ȳ_t = 0.35 + 0.35 (1 - e^{-t/80}) over 300 steps;
* ``ramp_end``: the anchor after a linear ramp 0.30 -> 0.95 over 150 steps (ends at 0.95).

Batch-accuracy noise: N(0, 0.02), about what 256 prompts x 8 rollouts with a spread of prompt difficulty
give. Results are the median over 20 seeds. Run: ``python benchmarks/anchor_time_constant.py``.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from verl_hadw.core.anchor import AnchorState
from verl_hadw.core.options import AnchorConfig


def run(cfg: AnchorConfig, ys: list[float]) -> list[float]:
    state = AnchorState(config=cfg)
    out = []
    for t, y in enumerate(ys, start=1):
        out.append(state.observe(t, 0, y * 1000, 1000).posterior)
    return out


def noisy(values, rng, noise):
    return [min(max(v + rng.gauss(0.0, noise), 0.0), 1.0) for v in values]


def rise_time(cfg, rng, noise, warm=40, n=200):
    ys = noisy([0.35] * warm + [0.55] * n, rng, noise)
    anchor = run(cfg, ys)
    target = 0.35 + 0.63 * 0.20
    for k, c in enumerate(anchor[warm:]):
        if c >= target:
            return k + 1
    return math.inf


def lag(cfg, rng, noise, n=300):
    clean = [0.35 + 0.35 * (1 - math.exp(-t / 80)) for t in range(n)]
    anchor = run(cfg, noisy(clean, rng, noise))
    best = min(range(0, 120), key=lambda k: sum((anchor[t] - clean[t - k]) ** 2 for t in range(120, n)))
    return best


def ramp_end(cfg, rng, noise, n=150):
    ys = [0.30 + 0.65 * t / (n - 1) for t in range(n)]
    return run(cfg, noisy(ys, rng, noise))[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--etas", type=float, nargs="+", default=[0.1, 1.0, 2.0, 4.0, 8.0, 16.0])
    args = parser.parse_args()
    print(f"m={args.window}, batch-accuracy noise {args.noise}, median over {args.seeds} seeds")
    print(f"{'sigma_source':>12} {'eta':>6} {'rise(steps)':>12} {'lag(steps)':>11} {'ramp_end':>9}")
    for source in ("anchor", "accuracy"):
        for eta in args.etas:
            cfg = AnchorConfig(eta=eta, window=args.window, sigma_source=source)
            rises, lags, ends = [], [], []
            for seed in range(args.seeds):
                rises.append(rise_time(cfg, random.Random(seed), args.noise))
                lags.append(lag(cfg, random.Random(1000 + seed), args.noise))
                ends.append(ramp_end(cfg, random.Random(2000 + seed), args.noise))
            rise = statistics.median(rises)
            print(
                f"{source:>12} {eta:>6g} {rise if rise != math.inf else '>200':>12} "
                f"{statistics.median(lags):>11} {statistics.median(ends):>9.3f}"
            )


if __name__ == "__main__":
    main()

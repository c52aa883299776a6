"""Steady-state step time of grpo vs hadw vs dgpo through verl's real main_ppo on CPU, side by side.

Same harness, config, seed and assets for each estimator (``configs/cpu/demo.yaml``); the runs go one after
another in this process's loop (``side_by_side.py``), and the median ``timing_s/step`` (and ``timing_s/adv``)
over steps after the warm-up is compared with grpo's. Run: ``bash benchmarks/bench_cpu_e2e.sh [--steps N]
[--rounds R]``.
"""

from __future__ import annotations

import argparse

from side_by_side import add_arguments, run_side_by_side

ESTIMATORS = {name: [f"algorithm.adv_estimator={name}"] for name in ("grpo", "hadw", "dgpo")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser, steps=12)
    parser.add_argument("--assets", default=None)
    args = parser.parse_args()
    runs = run_side_by_side(ESTIMATORS, ("timing_s/step", "timing_s/adv"), steps=args.steps, warmup=args.warmup,
                            rounds=args.rounds, name="bench", assets=args.assets)
    print(f"steady-state over steps {args.warmup + 1}-{args.steps}, {args.rounds} round(s), median seconds")
    print(f"{'estimator':>10} {'step s':>8} {'x grpo':>7} {'adv ms':>8}")
    for name in ESTIMATORS:
        step, ratio = runs.median(name, "timing_s/step"), runs.ratio(name, "timing_s/step", "grpo")
        print(f"{name:>10} {step:>8.3f} {ratio:>7.3f} {runs.median(name, 'timing_s/adv') * 1e3:>8.1f}")


if __name__ == "__main__":
    main()

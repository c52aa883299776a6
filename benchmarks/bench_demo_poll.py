"""The demo's replay-buffer poll interval (0.05 s) against verl's 2 s, side by side through main_ppo on CPU.

Two runs of ``configs/cpu/demo.yaml`` that differ only in ``trainer.v1.sampler.sampler_kwargs.poll_interval``,
one after the other in this process's loop (``side_by_side.py``, alternating order over rounds). Prints the median
``timing_s/step`` and ``timing_s/gen`` after the warm-up, their ratio, and whether the two runs logged the
same value for every metric that is not a timing (the interval must not change what the run learns).
Run: ``bash scripts/install_cpu.sh && .venv/bin/python benchmarks/bench_demo_poll.py [--steps N] [--rounds R]``.
"""

from __future__ import annotations

import argparse

from side_by_side import add_arguments, run_side_by_side

INTERVALS = {"verl 2 s": 2.0, "demo": 0.05}
BASELINE = "verl 2 s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser, steps=10)
    args = parser.parse_args()
    variants = {name: [f"trainer.v1.sampler.sampler_kwargs.poll_interval={value}"] for name, value in INTERVALS.items()}
    runs = run_side_by_side(variants, ("timing_s/step", "timing_s/gen"), steps=args.steps, warmup=args.warmup,
                            rounds=args.rounds, name="bench_poll")
    print(f"demo config, steps {args.warmup + 1}-{args.steps}, {args.rounds} round(s), median seconds")
    print(f"{'poll':>9} {'interval':>8} {'step s':>7} {'x 2 s':>6} {'gen s':>6} {'x 2 s':>6}")
    for name, interval in INTERVALS.items():
        step, gen = (runs.median(name, f"timing_s/{kind}") for kind in ("step", "gen"))
        step_x, gen_x = (runs.ratio(name, f"timing_s/{kind}", BASELINE) for kind in ("step", "gen"))
        print(f"{name:>9} {interval:>8} {step:>7.2f} {step_x:>6.2f} {gen:>6.2f} {gen_x:>6.2f}")
    same = runs.same_metrics()
    count = sum(len(values) for values in runs.metrics["demo"].values())
    print(f"non-timing metrics of the two runs ({count} values): {'identical' if same else 'DIFFERENT'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

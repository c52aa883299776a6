"""Steady-state step time of grpo vs hadw vs dgpo through verl's real main_ppo on CPU, side by side.

Same harness, config, seed and assets for each estimator (``configs/cpu/demo.yaml``); the runs go one after
another in this process's loop, and the median ``timing_s/step`` (and ``timing_s/adv``) over steps after
the warm-up is compared with grpo's. Run: ``bash benchmarks/bench_cpu_e2e.sh [--steps N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from verl_hadw.toy.launch import parse_steps, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2, help="steps excluded from the median")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the three runs, alternating order")
    parser.add_argument("--assets", default=None)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_cpu_e2e_")
    assets = args.assets or os.path.join(work, "assets")
    estimators = ["grpo", "hadw", "dgpo"]
    step_times = {name: [] for name in estimators}
    adv_times = {name: [] for name in estimators}
    for round_ in range(args.rounds):
        for name in estimators if round_ % 2 == 0 else estimators[::-1]:
            code, log = run(
                assets,
                [
                    f"algorithm.adv_estimator={name}",
                    f"trainer.total_training_steps={args.steps}",
                    f"trainer.experiment_name=bench_{name}_{round_}",
                    f"trainer.default_local_dir={work}/ckpt_{name}_{round_}",
                ],
                cwd=work,
            )
            if code != 0:
                raise SystemExit(f"{name} run failed:\n{log[-3000:]}")
            steps = parse_steps(log)
            for step in range(args.warmup + 1, args.steps + 1):
                step_times[name].append(steps[step]["timing_s/step"])
                adv_times[name].append(steps[step]["timing_s/adv"])
    base = statistics.median(step_times["grpo"])
    print(f"steady-state over steps {args.warmup + 1}-{args.steps}, {args.rounds} round(s), median seconds")
    print(f"{'estimator':>10} {'step s':>8} {'x grpo':>7} {'adv ms':>8}")
    for name in estimators:
        step = statistics.median(step_times[name])
        print(f"{name:>10} {step:>8.3f} {step / base:>7.3f} {statistics.median(adv_times[name]) * 1e3:>8.1f}")


if __name__ == "__main__":
    main()

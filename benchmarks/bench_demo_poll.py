"""The demo's replay-buffer poll interval (0.05 s) against verl's 2 s, side by side through main_ppo on CPU.

Two runs of ``configs/cpu/demo.yaml`` that differ only in ``trainer.v1.sampler.sampler_kwargs.poll_interval``,
one after the other in this process's loop (alternating order over rounds). Prints the median
``timing_s/step`` and ``timing_s/gen`` after the warm-up, their ratio, and whether the two runs logged the
same value for every metric that is not a timing (the interval must not change what the run learns).
Run: ``bash scripts/install_cpu.sh && .venv/bin/python benchmarks/bench_demo_poll.py [--steps N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from verl_hadw.toy.launch import parse_steps, run, stable_metrics

INTERVALS = {"verl 2 s": 2.0, "demo": 0.05}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2, help="steps excluded from the median")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_demo_poll_")
    assets = os.path.join(work, "assets")
    timings = {name: {"step": [], "gen": []} for name in INTERVALS}
    metrics = {}
    for round_ in range(args.rounds):
        for name in INTERVALS if round_ % 2 == 0 else list(INTERVALS)[::-1]:
            tag = f"{name.split()[0]}_{round_}"
            code, log = run(assets, [
                f"trainer.v1.sampler.sampler_kwargs.poll_interval={INTERVALS[name]}",
                f"trainer.total_training_steps={args.steps}",
                f"trainer.experiment_name=bench_poll_{tag}",
                f"trainer.default_local_dir={work}/ckpt_{tag}",
            ], cwd=work)
            if code != 0:
                raise SystemExit(f"{name} run failed:\n{log[-3000:]}")
            steps = parse_steps(log)
            for step in range(args.warmup + 1, args.steps + 1):
                timings[name]["step"].append(steps[step]["timing_s/step"])
                timings[name]["gen"].append(steps[step]["timing_s/gen"])
            metrics.setdefault(name, {step: stable_metrics(values) for step, values in steps.items()})
    base = {kind: statistics.median(timings["verl 2 s"][kind]) for kind in ("step", "gen")}
    print(f"demo config, steps {args.warmup + 1}-{args.steps}, {args.rounds} round(s), median seconds")
    print(f"{'poll':>9} {'interval':>8} {'step s':>7} {'x 2 s':>6} {'gen s':>6} {'x 2 s':>6}")
    for name, interval in INTERVALS.items():
        step, gen = (statistics.median(timings[name][kind]) for kind in ("step", "gen"))
        print(f"{name:>9} {interval:>8} {step:>7.2f} {step / base['step']:>6.2f} {gen:>6.2f} {gen / base['gen']:>6.2f}")
    same = metrics["verl 2 s"] == metrics["demo"]
    count = sum(len(values) for values in metrics["demo"].values())
    print(f"non-timing metrics of the two runs ({count} values): {'identical' if same else 'DIFFERENT'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""Variants of the CPU demo run side by side through verl's ``main_ppo`` and compared by their medians: the loop
that ``bench_cpu_e2e.py`` (grpo vs hadw vs dgpo) and ``bench_demo_poll.py`` (two poll intervals) share.

Each variant is ``configs/cpu/demo.yaml`` plus its Hydra overrides, with the same assets, seed and number of steps.
The runs go one after another in this process, in alternating order over rounds (so that no variant always runs
on the warmer or the busier machine). Kept per variant: each step's value of every timing key after the warm-up
steps (over all rounds), and its first round's metrics that a deterministic run reproduces (``stable_metrics``:
all but timings and memory), to check that the variants learned the same thing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from dataclasses import dataclass


def add_arguments(parser: argparse.ArgumentParser, steps: int) -> None:
    """The options every side-by-side benchmark takes."""
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--warmup", type=int, default=2, help="steps excluded from the median")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the runs, alternating their order")


@dataclass
class SideBySide:
    timings: dict[str, dict[str, list[float]]]  # variant -> timing key -> its values after the warm-up
    metrics: dict[str, dict[int, dict[str, float]]]  # variant -> step -> stable metrics (its first round)

    def median(self, variant: str, key: str) -> float:
        return statistics.median(self.timings[variant][key])

    def ratio(self, variant: str, key: str, baseline: str) -> float:
        """``variant``'s median over ``baseline``'s."""
        return self.median(variant, key) / self.median(baseline, key)

    def same_metrics(self) -> bool:
        """True when every variant logged the same value for every metric that is not a timing."""
        first, *others = self.metrics.values()
        return all(other == first for other in others)


def run_side_by_side(variants: dict[str, list[str]], timings: tuple[str, ...], *, steps: int, warmup: int,
                     rounds: int, name: str, assets: str | None = None, launch=None) -> SideBySide:
    """Run each variant ``rounds`` times (``launch``: ``verl_hadw.toy.launch.run``, main_ppo on the demo).

    A run's experiment is ``<name>_<tag>_<round>`` and its checkpoints go to ``<work>/ckpt_<tag>_<round>``, where
    ``tag`` is the variant's first word and ``<work>`` a new temporary directory (also the assets' place unless
    ``assets`` is given). A failed run stops the benchmark with the end of its log.
    """
    from verl_hadw.toy.launch import parse_steps, stable_metrics

    if launch is None:
        from verl_hadw.toy.launch import run as launch
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup={warmup} must leave at least one of the {steps} steps to measure")
    work = tempfile.mkdtemp(prefix=f"{name}_")
    assets = assets or os.path.join(work, "assets")
    order = list(variants)
    result = SideBySide({v: {key: [] for key in timings} for v in order}, {})
    for round_ in range(rounds):
        for variant in order if round_ % 2 == 0 else order[::-1]:
            tag = f"{variant.split()[0]}_{round_}"
            code, log = launch(assets, [
                *variants[variant],
                f"trainer.total_training_steps={steps}",
                f"trainer.experiment_name={name}_{tag}",
                f"trainer.default_local_dir={work}/ckpt_{tag}",
            ], cwd=work)
            if code != 0:
                raise SystemExit(f"{variant} run failed:\n{log[-3000:]}")
            per_step = parse_steps(log)
            for step in range(warmup + 1, steps + 1):
                for key in timings:
                    result.timings[variant][key].append(per_step[step][key])
            result.metrics.setdefault(variant, {step: stable_metrics(values) for step, values in per_step.items()})
    return result

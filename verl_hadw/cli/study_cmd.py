"""``verl-hadw study``: the CPU study of grpo / hadw / dgpo / hadw over dgpo / grpo at HA-DW's step size.

Each run is verl's unmodified ``main_ppo`` on the CPU toy (``verl_hadw.research.study``); finished runs are
skipped, so an interrupted study resumes by running the same command again.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from verl_hadw.cli.arguments import CommandError, Number, OutputDir, Text, count


def add_subcommand(sub) -> None:
    from verl_hadw.research.study import METHODS, StudyPlan

    d = StudyPlan()
    p = sub.add_parser("study", help="GRPO vs HA-DW vs DGPO through verl's main_ppo on CPU (resumable)")
    p.add_argument("--out", default=str(d.out), type=OutputDir(),
                   help=f"runs and outputs (default: {d.out}); finished runs are skipped")
    p.add_argument("--methods", nargs="+", default=d.methods, choices=list(METHODS))
    p.add_argument("--seeds", nargs="+", type=Number(), default=d.seeds, help="data.seed values")
    p.add_argument("--steps", type=count(), default=d.steps)
    p.add_argument("--prompts", type=count(), default=d.prompts, help="prompts a step (4 responses each)")
    p.add_argument("--lr", type=Number(integer=False, above=0), default=d.lr,
                   help="actor learning rate (grpo_lr_phi: times the measured Φ)")
    p.add_argument("--test-freq", type=count(), default=d.test_freq, help="validate every k steps (and before step 1)")
    p.add_argument("--val-prompts", type=count(4), default=d.val_prompts, help="held-out prompts, a quarter per tier")
    p.add_argument("--val-n", type=count(), default=d.val_n, help="sampled answers per held-out prompt")
    p.add_argument("--workers", type=count(), default=2, help="runs at a time (each uses about one core)")
    p.add_argument("--quick", action="store_true", help="hadw and grpo_lr_phi, 1 seed, 1 step: checks the pipeline")
    p.add_argument("--copy-to", default=None, type=OutputDir(),
                   help="also copy val_accuracy.csv, train.csv, summary.md, curves.png here")
    p.add_argument("overrides", nargs="*", type=Text(), help="Hydra overrides for every run")
    p.set_defaults(func=study)


def study(args: argparse.Namespace) -> int:
    from verl_hadw.research.study import StudyPlan, quick_plan, run_study

    if args.quick:
        plan = quick_plan(Path(args.out))
        plan.extra = list(args.overrides)
    elif "grpo_lr_phi" in args.methods and "hadw" not in args.methods:
        raise CommandError("argument --methods", "grpo_lr_phi needs hadw in the same study (its Φ sets the learning "
                           "rate)")
    else:
        plan = StudyPlan(out=Path(args.out), methods=args.methods, seeds=args.seeds, steps=args.steps,
                         prompts=args.prompts, lr=args.lr, test_freq=args.test_freq,
                         val_prompts=args.val_prompts, val_n=args.val_n,
                         extra=list(args.overrides))
    start = time.time()
    print(f"verl-hadw study: {plan.ordered_methods()} x seeds {plan.seeds}, {plan.steps} steps of {plan.prompts} "
          f"prompts, validation every {plan.test_freq} -> {plan.out}", flush=True)
    paths = run_study(plan, workers=args.workers,
                      log=lambda msg: print(f"[{time.time() - start:6.0f} s] {msg}", flush=True))
    print((plan.out / "summary.md").read_text())
    for path in paths:
        if args.copy_to:
            Path(args.copy_to).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(args.copy_to) / path.name)
        print(f"wrote {path}")
    return 0

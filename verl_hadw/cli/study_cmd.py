"""``verl-hadw study``: the CPU study of grpo / hadw / dgpo / hadw over dgpo / grpo at HA-DW's step size.

``--trainer verl`` (default): each run is verl's unmodified ``main_ppo`` on the CPU toy (``verl_hadw.research.study``);
``--trainer trl``: TRL's trainer, a process per run (``verl_hadw.research.trl_study``, docs/does-it-help.md).
Finished runs are skipped, so an interrupted study resumes by running the same command again.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import time
from pathlib import Path

from verl_hadw.cli.arguments import CommandError, Number, OutputDir, Text, count

VERL_ONLY = ("prompts", "lr", "test_freq", "val_prompts", "val_n", "overrides")  # the TRL study has its own design


def add_subcommand(sub) -> None:
    from verl_hadw.research.study import METHODS, StudyPlan
    from verl_hadw.research.trl_study import TrlStudyPlan

    d, t = StudyPlan(), TrlStudyPlan()
    p = sub.add_parser("study", help="GRPO vs HA-DW vs DGPO on CPU, through verl's main_ppo or TRL (resumable)")
    p.add_argument("--trainer", choices=["verl", "trl"], default="verl",
                   help="verl: main_ppo runs (the defaults below); trl: TRL's trainer, the design of "
                        "docs/does-it-help.md")
    p.add_argument("--task", choices=["toy", "arith"], default="toy",
                   help="toy (random weights, docs/demo.md) or arith (sums and products from a pretrained model, "
                        "verl_hadw.toy.arith_model; verl: grpo and hadw, seeds 1-3, in the TRL study's design)")
    p.add_argument("--model", default=None, type=OutputDir(),
                   help="trl --task arith: the starting model's folder (default outputs/arith_model; pretrained "
                        "there and checked against its recorded sha256 when absent)")
    p.add_argument("--out", default=None, type=OutputDir(),
                   help=f"runs and outputs (default: {d.out}; trl: {t.out}); finished runs are skipped")
    p.add_argument("--methods", nargs="+", default=None, choices=list(METHODS))
    p.add_argument("--seeds", nargs="+", type=Number(), default=None,
                   help=f"seeds (default: {d.seeds}; trl: 1-{len(t.seeds)})")
    p.add_argument("--steps", type=count(), default=None, help=f"default: {d.steps}; trl: {t.steps}")
    p.add_argument("--lrs", nargs="+", type=Number(integer=False, above=0), default=None,
                   help=f"trl only: the learning rates (default: {' '.join(f'{lr:g}' for lr in t.lrs)})")
    p.add_argument("--prompts", type=count(), default=None, help=f"verl only: prompts a step (default {d.prompts})")
    p.add_argument("--lr", type=Number(integer=False, above=0), default=None,
                   help=f"verl only: actor learning rate (default {d.lr:g}; grpo_lr_phi: times the measured Φ)")
    p.add_argument("--test-freq", type=count(), default=None,
                   help=f"verl only: validate every k steps and before step 1 (default {d.test_freq})")
    p.add_argument("--val-prompts", type=count(4), default=None,
                   help=f"verl only: held-out prompts, a quarter per tier (default {d.val_prompts})")
    p.add_argument("--val-n", type=count(), default=None,
                   help=f"verl only: sampled answers per held-out prompt (default {d.val_n})")
    p.add_argument("--workers", type=count(), default=2, help="runs at a time (each uses about one core)")
    p.add_argument("--quick", action="store_true",
                   help="checks the pipeline: verl: hadw and grpo_lr_phi, 1 seed, 1 step; trl: every method, 1 seed, "
                        "1 learning rate, 4 steps")
    p.add_argument("--copy-to", default=None, type=OutputDir(), help="also copy the tables, summary.md and plots here")
    p.add_argument("overrides", nargs="*", type=Text(), help="verl only: Hydra overrides for every run")
    p.set_defaults(func=study)


def study(args: argparse.Namespace) -> int:
    if args.trainer == "trl":
        plan = _trl_plan(args)
    elif args.model is not None:
        raise CommandError("argument --model", "the TRL arithmetic study's (--trainer trl); the verl study pretrains "
                           "the starting model into its assets")
    else:
        plan = _verl_plan(args)
    start = time.time()
    log = lambda msg: print(f"[{time.time() - start:6.0f} s] {msg}", flush=True)  # noqa: E731
    if args.trainer == "trl":
        from verl_hadw.research.trl_study import run_study

        print(f"verl-hadw study --trainer trl: {plan.ordered_methods()} x {len(plan.seeds)} seeds x lr "
              f"{', '.join(f'{lr:g}' for lr in plan.lrs)}, {plan.steps} steps of {plan.prompts} prompts x "
              f"{plan.group} -> {plan.out}", flush=True)
        paths = run_study(plan, workers=args.workers, log=log)
    else:
        from verl_hadw.research.study import run_study

        print(f"verl-hadw study: {plan.ordered_methods()} x seeds {plan.seeds}, {plan.steps} steps of {plan.prompts} "
              f"prompts, validation every {plan.test_freq} -> {plan.out}", flush=True)
        paths = run_study(plan, workers=args.workers, log=log)
    print((plan.out / "summary.md").read_text())
    print(f"verl-hadw study: {time.time() - start:.0f} s")
    for path in paths:
        if args.copy_to:
            Path(args.copy_to).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(args.copy_to) / path.name)
        print(f"wrote {path}")
    return 0


def _verl_plan(args):
    from verl_hadw.research.study import StudyPlan, arith_plan, quick_plan

    if args.lrs is not None:
        raise CommandError("argument --lrs", "the verl study takes one --lr; --lrs is the TRL study's (--trainer trl)")
    if args.quick:
        if args.task == "arith":
            raise CommandError("argument --quick", "the verl study's pipeline check runs the toy; --task arith "
                               "pretrains its model (about a minute) and runs the arithmetic design")
        plan = quick_plan(Path(args.out or StudyPlan().out))
        plan.extra = list(args.overrides)
        return plan
    default = arith_plan() if args.task == "arith" else StudyPlan()
    chosen = {"out": args.out, "methods": args.methods, "seeds": args.seeds, "steps": args.steps,
              "prompts": args.prompts, "lr": args.lr, "test_freq": args.test_freq, "val_prompts": args.val_prompts,
              "val_n": args.val_n}
    _check_methods(args.methods or default.methods)
    return dataclasses.replace(default, **{k: v for k, v in chosen.items() if v is not None},
                               extra=list(args.overrides))


def _trl_plan(args):
    from verl_hadw.research.trl_study import TrlStudyPlan, arith_plan, quick_plan
    from verl_hadw.toy.arith_model import QUICK_RECIPE, WEIGHTS, ensure_model, pretrain

    for name in VERL_ONLY:
        if getattr(args, name) not in (None, []):
            flag = "OVERRIDES" if name == "overrides" else f"--{name.replace('_', '-')}"
            raise CommandError(f"argument {flag}", "the verl study's; the TRL study (--trainer trl) runs the design "
                               "of docs/does-it-help.md (its options: --methods, --seeds, --steps, --lrs)")
    if args.task == "toy" and args.model is not None:
        raise CommandError("argument --model", "the arithmetic study's starting model (--task arith)")
    default = arith_plan() if args.task == "arith" else TrlStudyPlan()
    out = Path(args.out or default.out)
    if args.quick:  # arith: a stand-in model pretrained for a few steps, not the recorded one
        plan = quick_plan(out, args.task, str(out / "model"))
        if plan.task == "arith" and not (out / "model" / WEIGHTS).exists():
            pretrain(out / "model", QUICK_RECIPE, log=lambda msg: None)
        return plan
    methods = args.methods or list(default.methods)
    _check_methods(methods)
    chosen = {"methods": methods, "seeds": args.seeds, "steps": args.steps, "lrs": args.lrs}
    plan = dataclasses.replace(default, out=out, **{k: v for k, v in chosen.items() if v is not None})
    if plan.task == "arith":
        plan.model = str(Path(args.model or plan.model).resolve())  # each run's spec names it, from any folder
        ensure_model(Path(plan.model))
    return plan


def _check_methods(methods) -> None:
    """Either study's ``--methods``: grpo_lr_phi only beside hadw, refused naming the argument before any run."""
    if "grpo_lr_phi" in methods and "hadw" not in methods:
        raise CommandError("argument --methods", "grpo_lr_phi needs hadw in the same study (its Φ sets the learning "
                           "rate)")

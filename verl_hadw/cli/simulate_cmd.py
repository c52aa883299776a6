"""``verl-hadw simulate``: the RLVR simulator's learning curves for grpo / hadw / dgpo (CSV, PNG)."""

from __future__ import annotations

import argparse
import time

from verl_hadw.cli.arguments import Choice, CommandError, Number, OutputDir, count, writing
from verl_hadw.research.sim.config import SimConfig
from verl_hadw.research.sim.methods import SUITES, resolve


def suite(text: str) -> list:
    """``--suite``: a suite's methods, or the named ones; at least one."""
    methods = resolve(text)
    if not methods:
        raise ValueError(f"{text!r} names no method; suites: {', '.join(SUITES)}")
    return methods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``verl-hadw simulate`` options ."""
    d = SimConfig()
    parser.add_argument("--out", default="runs/sim", type=OutputDir(),
                        help="output directory for CSV and PNG (default: runs/sim)")
    parser.add_argument("--suite", default="all", type=Choice(lambda: list(SUITES), parse=suite),
                        help=f"one of {', '.join(SUITES)}, or comma-separated method names")
    parser.add_argument("--seeds", type=count(), default=4, help="number of seeds (0..n-1)")
    parser.add_argument("--steps", type=count(), default=d.steps)
    parser.add_argument("--workers", type=count(), default=2, help="processes (1: in this process)")
    parser.add_argument("--optimizer", choices=["sgd", "rms"], default=d.optimizer,
                        help="sgd: λ is a step size; rms: scale-invariant like AdamW (a constant factor cancels)")
    parser.add_argument("--batch-prompts", type=count(), default=d.batch_prompts)
    parser.add_argument("--prompts", type=count(), default=d.prompts)
    parser.add_argument("--lr-prompt", type=Number(integer=False, above=0), default=d.lr_prompt)
    parser.add_argument("--lr-skill", type=Number(integer=False, above=0), default=d.lr_skill)
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--quiet", action="store_true", help="no per-run progress lines")


def simulate(args: argparse.Namespace) -> int:
    """``verl-hadw simulate``."""
    import warnings
    from dataclasses import replace

    from verl_hadw.research.sim.report import comparisons_markdown, key_comparisons, summary_markdown, write_outputs
    from verl_hadw.research.sim.runner import run_many

    # verl's optional-engine notices on import (CPU machine), as pytest.ini filters them
    warnings.filterwarnings("ignore", message=r".* engine is not available", category=UserWarning)

    methods = resolve(args.suite)
    if args.batch_prompts > args.prompts:
        raise CommandError("argument --batch-prompts", f"{args.batch_prompts} exceeds --prompts ({args.prompts})")
    cfg = replace(SimConfig(), steps=args.steps, optimizer=args.optimizer, batch_prompts=args.batch_prompts,
                  prompts=args.prompts, lr_prompt=args.lr_prompt, lr_skill=args.lr_skill)
    print(f"verl-hadw simulate: {len(methods)} methods × {args.seeds} seeds, {cfg.steps} steps, {cfg.batch_prompts} "
          f"prompts/step, optimizer {cfg.optimizer}, {args.workers} worker(s) -> {args.out}", flush=True)
    start = time.perf_counter()
    records = run_many(methods, range(args.seeds), cfg, workers=args.workers,
                       progress=None if args.quiet else (lambda msg: print(msg, flush=True)))
    elapsed = time.perf_counter() - start
    with writing("--out", args.out):
        rows, paths = write_outputs(records, methods, cfg, args.out, plots=not args.no_plots)
    print(summary_markdown(rows))
    print()
    print(comparisons_markdown(key_comparisons(records)))
    for p in paths:
        print(f"wrote {p}")
    print(f"simulated {len(methods) * args.seeds} runs in {elapsed:.1f} s")
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser("simulate", help="RLVR simulator: grpo / hadw / dgpo learning curves (CSV, PNG)")
    add_arguments(p)
    p.set_defaults(func=simulate)

"""``verl-hadw configs``: print the config directory, list/show/compose/validate runs, print a paper's plan."""

from __future__ import annotations

import argparse
import os
import sys

from verl_hadw.repro.catalogue import ALIASES, PAPERS, plan
from verl_hadw.repro.compose import (
    available_runs,
    compose_run,
    config_dir,
    config_name,
    describe,
    run_dir,
    validate_like_main_ppo,
)


def _cmd_configs(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    overrides = list(args.overrides)
    if args.list:
        for run in available_runs():
            note = f"  (alias of {ALIASES[run]})" if run in ALIASES else ""
            print(f"{run:34s} {describe(run)}{note}")
        return 0
    if args.plan:
        steps = plan(args.plan, args.only)
        if not steps:
            raise ValueError(f"--only {args.only!r} matches no run of the {args.plan} plan")
        if args.costs:  # a table for humans; the 'train RUN' / 'eval RUN' lines stay the launchers' format
            from verl_hadw.repro.costs import parse_keep, plan_costs, render

            keep = parse_keep(args.keep or os.environ.get("VERL_HADW_KEEP"))
            print(render(plan_costs(args.plan, args.only, overrides, keep), keep))
            return 0
        for action, run in steps:
            line = f"{action} {run}"
            if args.with_dirs:
                line += f" {run_dir(run, overrides)}"
            print(line)
        return 0
    if args.locate:  # for the launchers, one per line: config dir and name, run dir, checkpoint dir, resume overrides
        from verl_hadw.repro.costs import run_cost
        from verl_hadw.repro.train_job import resume_overrides

        cfg = compose_run(args.locate, overrides)
        print(config_dir())
        print(config_name(args.locate))
        print(cfg.paths.run_dir)
        print(cfg.trainer.default_local_dir)
        print(" ".join(resume_overrides(cfg, run_cost(cfg, "train", args.locate).steps)))
        return 0
    if args.show or args.get or args.validate:
        key, run = args.get if args.get else (None, args.show or args.validate)
        cfg = compose_run(run, overrides, fast=not args.validate)
        if args.get:
            value = OmegaConf.select(cfg, key, throw_on_missing=True)
            if value is None and OmegaConf.select(cfg, key, default="__absent__") == "__absent__":
                raise ValueError(f"{run}: no key {key!r} in the composed config")
            print(OmegaConf.to_yaml(value, resolve=True).strip() if OmegaConf.is_config(value) else value)
        elif args.show:
            print(OmegaConf.to_yaml(cfg, resolve=True), end="")
        else:
            record = validate_like_main_ppo(cfg, deep=True)
            print(
                f"{run}: ok (verl validate_config, TaskRunner {record['trainer_cls']}, estimator {record['estimator']})"
            )
        return 0
    print(config_dir())
    return 0


def configs_main(args: argparse.Namespace) -> int:
    try:
        return _cmd_configs(args)
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"verl-hadw configs: {exc}", file=sys.stderr)
        return 2


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "configs",
        help="paper-reproduction configs: print their directory, list, show, validate runs, print launch plans",
        description="Without options: print the config directory, for "
        "python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<paper>/experiments/<run>.",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the runs (by run name) with their description")
    group.add_argument("--show", metavar="RUN", help="print RUN's composed config (with OVERRIDES), resolved")
    group.add_argument("--get", nargs=2, metavar=("KEY", "RUN"), help="print one resolved key of RUN's config")
    group.add_argument("--validate", metavar="RUN", help="run verl main_ppo's config checks and the plugin's on RUN")
    group.add_argument("--locate", metavar="RUN", help="for the launchers: the config directory, RUN's config name, "
                       "its output and checkpoint directories and the overrides of this start (a resume skips a "
                       "redundant validation)")
    group.add_argument("--plan", choices=PAPERS, help="print a paper's launch plan: 'train RUN' / 'eval RUN' lines")
    p.add_argument("--with-dirs", action="store_true", help="with --plan: append each run's output directory")
    p.add_argument("--costs", action="store_true", help="with --plan: instead of the plan lines, a table of what "
                   "each step and the whole plan costs (steps, samples, checkpoint disk, GPU-hours estimate)")
    p.add_argument("--keep", metavar="final|all|N", help="with --costs: the checkpoint retention after DONE "
                   "(default: $VERL_HADW_KEEP, else final)")
    p.add_argument("--only", metavar="GLOB", help="with --plan: only runs matching this shell pattern (dgpo_t4_*)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as on the main_ppo command line")
    p.set_defaults(func=configs_main)

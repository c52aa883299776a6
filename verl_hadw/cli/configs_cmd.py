"""``verl-hadw configs``: print the config directory, list/show/compose/validate runs, print a paper's plan."""

from __future__ import annotations

import argparse
import os

from verl_hadw.cli.arguments import Choice, CommandError, Text
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
            raise CommandError("argument --only", f"{args.only!r} matches no run of the {args.plan} plan")
        if args.costs:  # a table for humans; the 'train RUN' / 'eval RUN' lines stay the launchers' format
            from verl_hadw.repro.costs import parse_keep, plan_costs, render

            try:
                keep = parse_keep(args.keep or os.environ.get("VERL_HADW_KEEP"))
            except ValueError as exc:  # --keep was checked while parsing: the environment variable is wrong
                raise CommandError("environment variable VERL_HADW_KEEP", str(exc)) from None
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


def _check_pairs(args: argparse.Namespace) -> None:
    """Options that only mean something beside another are refused alone, not ignored."""
    needs = {"--with-dirs": (args.with_dirs, args.plan, "--plan"), "--costs": (args.costs, args.plan, "--plan"),
             "--only": (args.only, args.plan, "--plan"), "--keep": (args.keep, args.costs, "--costs")}
    for flag, (given, partner, partner_flag) in needs.items():
        if given and not partner:
            raise CommandError(f"argument {flag}", f"only applies with {partner_flag}")


def keep_value(text: str) -> str:
    from verl_hadw.repro.costs import parse_keep

    try:
        parse_keep(text)
    except ValueError:
        raise ValueError(f"{text!r}: use final (the last weights only), all (verl's checkpoints as they are) or a "
                         "positive number N (the newest N checkpoints)") from None
    return text


def configs_main(args: argparse.Namespace) -> int:
    _check_pairs(args)
    flag = next((f"--{name}" for name in ("show", "get", "validate", "locate", "plan") if getattr(args, name)), None)
    try:
        return _cmd_configs(args)
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as exc:  # a run that does not compose, a bad key
        raise CommandError(f"argument {flag}" if flag else "overrides", str(exc)) from None


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "configs",
        help="paper-reproduction configs: print their directory, list, show, validate runs, print launch plans",
        description="Without options: print the config directory, for "
        "python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<paper>/experiments/<run>.",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the runs (by run name) with their description")
    run = Choice(available_runs, at_parse_time=False)
    group.add_argument("--show", metavar="RUN", type=run, help="print RUN's composed config (with OVERRIDES), resolved")
    group.add_argument("--get", nargs=2, metavar=("KEY", "RUN"), type=Text(),
                       help="print one resolved key of RUN's config")
    group.add_argument("--validate", metavar="RUN", type=run,
                       help="run verl main_ppo's config checks and the plugin's on RUN")
    group.add_argument("--locate", metavar="RUN", type=run,
                       help="for the launchers: the config directory, RUN's config name, "
                       "its output and checkpoint directories and the overrides of this start (a resume skips a "
                       "redundant validation)")
    group.add_argument("--plan", choices=PAPERS, help="print a paper's launch plan: 'train RUN' / 'eval RUN' lines")
    p.add_argument("--with-dirs", action="store_true", help="with --plan: append each run's output directory")
    p.add_argument("--costs", action="store_true", help="with --plan: instead of the plan lines, a table of what "
                   "each step and the whole plan costs (steps, samples, checkpoint disk, GPU-hours estimate)")
    p.add_argument("--keep", metavar="final|all|N", type=Choice(lambda: ["final", "all", "N"], parse=keep_value),
                   help="with --costs: the checkpoint retention after DONE "
                   "(default: $VERL_HADW_KEEP, else final)")
    p.add_argument("--only", metavar="GLOB", type=Text(),
                   help="with --plan: only runs matching this shell pattern (dgpo_t4_*)")
    p.add_argument("overrides", nargs="*", type=Text(), help="Hydra overrides, as on the main_ppo command line")
    p.set_defaults(func=configs_main)

"""``verl-hadw smoke-check``: the verdict of scripts/gpu_smoke.sh on a few steps of a run and its resume."""

from __future__ import annotations

import argparse
from pathlib import Path

from verl_hadw.cli.arguments import CommandError, InputFile, Number, OutputDir


def smoke_main(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError

    from verl_hadw.repro.smoke import render, run_checks

    try:
        config = OmegaConf.to_container(OmegaConf.load(args.config), resolve=True)
    except (YAMLError, OmegaConfBaseException) as exc:
        raise CommandError("argument --config", f"{args.config} is not a config verl wrote: "
                           f"{' '.join(str(exc).split())}") from None
    if not isinstance(config, dict):
        raise CommandError("argument --config", f"{args.config} holds a {type(config).__name__}, not a mapping")
    checks = run_checks(
        config,
        Path(args.log).read_text(errors="replace"),
        Path(args.resume_log).read_text(errors="replace"),
        max_truncated=args.max_truncated,
        fix_dir=args.fix_dir,
    )
    print(render(checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "smoke-check",
        help="verdict of scripts/gpu_smoke.sh: truncation, zero reward, metrics, anchor files, anchor resume, "
        "stop tokens",
        description="Check a smoke run (scripts/gpu_smoke.sh writes these files). Exit 0: pass, 1: a check failed.",
    )
    p.add_argument("--config", required=True, type=InputFile(),
                   help="the run's resolved config (verl-hadw configs --show RUN ...)")
    p.add_argument("--log", required=True, type=InputFile(),
                   help="verl's console log of the first phase (steps 1..S, saved at S)")
    p.add_argument("--resume-log", required=True, type=InputFile(),
                   help="verl's console log of the resumed phase (S+1..)")
    p.add_argument("--max-truncated", type=Number(integer=False, minimum=0, maximum=1), default=0.25,
                   help="fail when more than this share of responses hits max_response_length (default 0.25)")
    p.add_argument("--fix-dir", type=OutputDir(),
                   help="where to write a generation_config.json with the missing stop tokens, if any")
    p.set_defaults(func=smoke_main)

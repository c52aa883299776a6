"""``verl-hadw smoke-check``: the verdict of scripts/gpu_smoke.sh on a few steps of a run and its resume."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def smoke_main(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from verl_hadw.repro.smoke import render, run_checks

    paths = {"--config": args.config, "--log": args.log, "--resume-log": args.resume_log}
    missing = [f"{flag} {path}" for flag, path in paths.items() if not Path(path).is_file()]
    if missing:
        print(f"verl-hadw smoke-check: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    config = OmegaConf.to_container(OmegaConf.load(args.config), resolve=True)
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
    p.add_argument("--config", required=True, help="the run's resolved config (verl-hadw configs --show RUN ...)")
    p.add_argument("--log", required=True, help="verl's console log of the first phase (steps 1..S, saved at S)")
    p.add_argument("--resume-log", required=True, help="verl's console log of the resumed phase (S+1..)")
    p.add_argument("--max-truncated", type=float, default=0.25,
                   help="fail when more than this share of responses hits max_response_length (default 0.25)")
    p.add_argument("--fix-dir", help="where to write a generation_config.json with the missing stop tokens, if any")
    p.set_defaults(func=smoke_main)

"""``rlhf_main``: swift's ``rlhf`` pipeline with HA-DW's or DGPO's advantages (the Python entry; ``cli`` runs it).

One pass over the command line before anything loads: our flags are split out and checked (``arguments``), swift's
are parsed by swift's own parser, a flag neither takes is refused with "did you mean", and swift's settings are
honoured or refused (``refusals``), a resume from a partial checkpoint refused.
Then swift's ``SwiftRLHF`` pipeline runs unchanged, its trainer factory
pointed at ``HadwSwiftGRPOTrainer`` for the length of the run.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from unittest import mock

from verl_hadw.hf_trainer.checkpoint_anchor import resumed_step
from verl_hadw.swift_adapter.grpo_config import HadwSwiftArguments, help_text, refuse_unknown, split_arguments
from verl_hadw.swift_adapter.refusals import check_settings
from verl_hadw.swift_adapter.terms import SWIFT
from verl_hadw.swift_adapter.version import check_swift_version

__all__ = ["rlhf_main", "parse"]


def parse(argv: list[str]):
    """(swift's ``RLHFArguments``, our ``HadwSwiftArguments``), both checked: a ``ConfigError`` names the flag."""
    check_swift_version()
    ours, rest = split_arguments(argv)
    resume = _flag_value(rest, "--resume_from_checkpoint")
    if resume and os.path.islink(resume) and not os.path.exists(resume):  # swift's parser stops on it, unexplained
        resumed_step(resume, SWIFT)  # e.g. last-checkpoint, its target removed: named, with the newest whole one
    from swift.arguments import RLHFArguments
    from swift.utils import parse_args

    args, remaining = parse_args(RLHFArguments, rest)
    if remaining:
        refuse_unknown(remaining, [f.name for f in dataclasses.fields(RLHFArguments)], args.ignore_args_error)
    ours.scale_rewards = args.scale_rewards
    ours.check_adapter_fields()
    check_settings(args, ours)
    if args.resume_from_checkpoint and not args.resume_only_model:  # swift loads a LoRA adapter from it next
        resumed_step(args.resume_from_checkpoint, SWIFT)  # a partial checkpoint (a save cut off) refused first
    return args, ours


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value ``argv`` gives ``flag`` (``--flag value`` or ``--flag=value``), or None."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None


def rlhf_main(argv: list[str] | None = None):
    """``swift rlhf`` with ``--adv_estimator hadw|dgpo`` and the ``--hadw_*`` / ``--dgpo_*`` flags (argv: the
    arguments after ``rlhf``; default ``sys.argv[1:]``). Returns what swift's pipeline returns."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(help_text(), flush=True)
        from swift.pipelines import rlhf_main as swift_rlhf_main

        return swift_rlhf_main(["--help"])  # swift's own arguments follow (argparse exits)
    args, ours = parse(argv)
    return _pipeline(args, ours).main()


def _pipeline(args, ours: HadwSwiftArguments):
    from swift.pipelines.train.rlhf import SwiftRLHF
    from swift.trainers import TrainerFactory

    from verl_hadw.swift_adapter.grpo_trainer import TRAINER_PATH

    class HadwSwiftRLHF(SwiftRLHF):
        """Swift's RLHF pipeline: its trainer is ``HadwSwiftGRPOTrainer``, handed the run's HA-DW / DGPO options."""

        def _get_trainer_kwargs(self):
            return {**super()._get_trainer_kwargs(), "hadw_args": ours}

        def run(self):
            with mock.patch.dict(TrainerFactory.TRAINER_MAPPING, {"grpo": TRAINER_PATH}):
                return super().run()

    return HadwSwiftRLHF(args)

"""``rlhf_main``: swift's ``rlhf`` pipeline with HA-DW's or DGPO's advantages (``cli`` runs it), the command line
checked before anything loads."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Iterable
from unittest import mock

from transformers import HfArgumentParser

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checkpoint_anchor import resumed_step
from verl_hadw.hf_trainer.option_fields import ESTIMATORS, closest_field
from verl_hadw.swift.checks import check_settings, check_swift_version
from verl_hadw.swift.grpo_config import SWIFT, HadwSwiftArguments

__all__ = ["rlhf_main", "parse", "help_text"]

_OUR_FIELDS = [f.name for f in dataclasses.fields(HadwSwiftArguments)]  # our flags, without their --


def _flags(argv: Iterable[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value ``argv`` gives ``flag`` (``--flag value`` or ``--flag=value``), or None."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None


def _parser() -> HfArgumentParser:
    return HfArgumentParser([HadwSwiftArguments], allow_abbrev=False, prog="verl-hadw-swift rlhf")


def split_arguments(argv: list[str]) -> tuple[HadwSwiftArguments, list[str]]:
    """Our options parsed out of ``argv`` (no abbreviations), and the arguments left for swift's parser."""
    ours, rest = _parser().parse_args_into_dataclasses(argv, return_remaining_strings=True)
    value = flag_value(rest, "--advantage_estimator")
    if value in ESTIMATORS:
        raise ConfigError(
            f"--advantage_estimator {value} chooses swift's own baseline (grpo, rloo, reinforce_plus_plus). Choose "
            f"HA-DW or DGPO with --adv_estimator {value}, and leave --advantage_estimator at grpo.")
    for flag in _flags(rest):
        name = flag[2:]
        if name.startswith(("hadw_", "dgpo_", "adv_")) or name == "accuracy_reward_index":
            hint = closest_field(name, _OUR_FIELDS)
            raise ConfigError(f"Unknown argument {flag}.{f' Did you mean --{hint}?' if hint else ''} "
                              "verl-hadw-swift rlhf --help lists the HA-DW / DGPO flags.")
    return ours, rest


def refuse_unknown(remaining: list[str], swift_fields: Iterable[str], ignored_by_swift: bool) -> None:
    """Refuse the arguments swift's parser left with "did you mean", unless ``ignored_by_swift`` and none is ours."""
    known = [*swift_fields, *_OUR_FIELDS]
    if "--config" in _flags(remaining):
        raise ConfigError("Unknown argument --config: swift takes a config file as the first argument after rlhf. "
                          "Run verl-hadw-swift rlhf x.yaml [flags] (.yaml, .yml or .json; it may hold our flags too).")
    for flag in _flags(remaining) or remaining[:1]:
        hint = closest_field(flag.lstrip("-"), known)
        if ignored_by_swift and hint not in _OUR_FIELDS:
            continue
        raise ConfigError(f"Unknown argument {flag}.{f' Did you mean --{hint}?' if hint else ''} "
                          "swift rlhf --help and verl-hadw-swift rlhf --help list the arguments.")


def help_text() -> str:
    """``--help``'s section for our flags (swift's own follow)."""
    return "verl-hadw-swift rlhf: swift rlhf's arguments, plus HA-DW's and DGPO's:\n\n" + _parser().format_help()


def parse(argv: list[str]):
    """swift's ``RLHFArguments`` and our ``HadwSwiftArguments`` of a checked ``verl-hadw-swift rlhf`` command line."""
    check_swift_version()
    ours, rest = split_arguments(argv)
    resume = flag_value(rest, "--resume_from_checkpoint")
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

    from verl_hadw.swift.grpo_trainer import TRAINER_PATH

    class HadwSwiftRLHF(SwiftRLHF):
        """Swift's RLHF pipeline: its trainer is ``HadwSwiftGRPOTrainer``, handed the run's HA-DW / DGPO options."""

        # private API: SwiftRLHF._get_trainer_kwargs, TrainerFactory.TRAINER_MAPPING (checked on ms-swift 4.3.0, 4.6.0)
        def _get_trainer_kwargs(self):
            return {**super()._get_trainer_kwargs(), "hadw_args": ours}

        def run(self):
            with mock.patch.dict(TrainerFactory.TRAINER_MAPPING, {"grpo": TRAINER_PATH}):
                return super().run()

    return HadwSwiftRLHF(args)

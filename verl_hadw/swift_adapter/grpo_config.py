"""The HA-DW / DGPO flags of ``verl-hadw-swift rlhf``: one per declared option (``--hadw_lambda_scale``,
``--dgpo_temperature``, ...), plus ``--adv_estimator`` and ``--accuracy_reward_index``, split from swift's own.

``HadwSwiftArguments`` is a dataclass built from the core's declarations (``core.option_fields``): the same fields,
defaults and docs as TRL's ``HadwGRPOConfig``. ``split_arguments`` parses ours out of a command line with
``HfArgumentParser`` (no abbreviations: ``--hadw_lambda`` is a typo, not ``--hadw_lambda_scale``) and hands the rest
to swift's parser. A flag neither takes is refused with "did you mean", naming ours or swift's. Values are checked
by the core's parser, whose messages name the flag (``terms.SWIFT``). Swift's ``--scale_rewards`` stands for
verl's ``algorithm.norm_adv_by_std_in_grpo`` and is read from swift's arguments.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable

from transformers import HfArgumentParser

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.option_fields import ESTIMATORS, OptionFields, closest_field
from verl_hadw.hf_trainer.adapter_fields import add_adapter_fields
from verl_hadw.swift_adapter.terms import SWIFT

__all__ = ["HadwSwiftArguments", "split_arguments", "refuse_unknown", "help_text"]


@dataclass
@add_adapter_fields
class HadwSwiftArguments(OptionFields):
    """The HA-DW / DGPO options of one swift run (``--adv_estimator``, ``--accuracy_reward_index``, ``--hadw_*``,
    ``--dgpo_*``)."""

    terms = SWIFT  # the core's messages name swift's flags
    scale_rewards = "group"  # swift's --scale_rewards, set from swift's arguments (not a flag of ours)


def _flags(argv: Iterable[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


def our_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(HadwSwiftArguments)]


def _parser() -> HfArgumentParser:
    return HfArgumentParser([HadwSwiftArguments], allow_abbrev=False, prog="verl-hadw-swift rlhf")


def split_arguments(argv: list[str]) -> tuple[HadwSwiftArguments, list[str]]:
    """(our options, checked, the arguments left for swift). A flag that looks like ours (``--hadw_*``,
    ``--dgpo_*``, or closest to one of ours) but is not one is refused with "did you mean"."""
    ours, rest = _parser().parse_args_into_dataclasses(argv, return_remaining_strings=True)
    for i, arg in enumerate(rest):  # swift's --advantage_estimator for ours: swift's parser would name only its own
        flag, _, value = arg.partition("=")
        value = value or (rest[i + 1] if i + 1 < len(rest) else "")
        if flag == "--advantage_estimator" and value in ESTIMATORS:
            raise ConfigError(
                f"--advantage_estimator {value}: that flag is swift's own baseline (grpo, rloo, reinforce_plus_plus). "
                f"HA-DW and DGPO are chosen with --adv_estimator {value} (leave --advantage_estimator at grpo).")
    names = our_fields()
    for flag in _flags(rest):
        name = flag[2:]
        if name.startswith(("hadw_", "dgpo_", "adv_")) or name in ("accuracy_reward_index",):
            hint = closest_field(name, names)
            raise ConfigError(f"Unknown argument {flag}.{f' Did you mean --{hint}?' if hint else ''} The HA-DW / DGPO "
                              f"flags are listed by verl-hadw-swift rlhf --help (docs/swift.md).")
    return ours, rest


def refuse_unknown(remaining: list[str], swift_fields: Iterable[str], ignored_by_swift: bool) -> None:
    """Swift's parser left ``remaining``: refuse them with "did you mean" (ours or swift's), unless swift itself
    was told to ignore them (``--ignore_args_error true``) and none is closer to one of ours."""
    known = [*swift_fields, *our_fields()]
    if "--config" in _flags(remaining):  # swift takes a config file as the first argument, not as a flag
        raise ConfigError("Unknown argument --config: swift takes a config file as the first argument after rlhf: "
                          "verl-hadw-swift rlhf x.yaml [flags] (.yaml, .yml or .json; our flags may be in it too; "
                          "docs/swift.md).")
    for flag in _flags(remaining) or remaining[:1]:
        hint = closest_field(flag.lstrip("-"), known)
        if ignored_by_swift and hint not in our_fields():
            continue
        raise ConfigError(f"Unknown argument {flag}.{f' Did you mean --{hint}?' if hint else ''} (swift rlhf's "
                          "arguments, and verl-hadw-swift rlhf --help for HA-DW's and DGPO's)")


def help_text() -> str:
    """``--help``'s section for our flags (swift's own follow)."""
    return "verl-hadw-swift rlhf: swift rlhf's arguments, plus HA-DW's and DGPO's:\n\n" + _parser().format_help()

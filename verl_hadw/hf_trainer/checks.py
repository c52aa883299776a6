"""Checks every HF-Trainer-based adapter runs: the framework's release, and that DGPO's valid-token averaging (Eq. 3)
is exact under its loss type."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.framework import install_command
from verl_hadw.hf_trainer.option_fields import FLAGS, spelled

GLOBAL_TOKENS = ("divides by the loss tokens of the whole generation batch, gathered over processes "
                 "(`num_items_in_batch`): the advantages' factor of all tokens over valid tokens makes it the "
                 "valid-token mean")
SEQUENCE_MEANS = "averages each completion over its own length first: a mean of sequence means, not a token mean"


def installed(distribution: str, extra: str) -> str:
    """The installed ``distribution``'s version; ``ModuleNotFoundError`` naming the extra's install without it."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        raise ModuleNotFoundError(f"verl-hadw's {extra} adapter needs {distribution}: "
                                  f"{install_command(extra)}") from None


def in_range(found: str, spec: str) -> bool:
    """Whether the version ``found`` lies in ``spec`` (prereleases included; a version that is not PEP 440's: no)."""
    try:
        return Version(found) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:
        return False


@dataclass(frozen=True)
class LossTypes:
    """A framework's loss types: ``table`` maps each to (exact?, why); ``style``: how its users write a setting
    (``option_fields.KEYWORDS``, ``FLAGS`` or ``YAML``); ``names``: where its settings live, if not at the top."""

    table: dict[str, tuple[bool, str]]
    style: str
    names: dict[str, str] = field(default_factory=dict)

    def check(self, loss_type: str, steps_per_generation: int | None, gradient_accumulation_steps: int) -> None:
        """Raise ``ConfigError`` unless DGPO's valid-token averaging is exact under these settings."""
        arg, name = self.arg, self.name
        off = f"or set {arg('dgpo_valid_token_norm', False)} (DGPO without its valid-token averaging)"
        exact = [t for t, (ok, _) in self.table.items() if ok]
        if loss_type not in self.table:
            raise ConfigError(
                f"{arg('loss_type', loss_type)} is not one verl-hadw has checked against DGPO's valid-token averaging "
                f"(checked: {', '.join(self.table)}). Use {arg('loss_type', exact[0])}, {off}.")
        ok, why = self.table[loss_type]
        if not ok:
            raise ConfigError(
                f"{arg('loss_type', loss_type)} {why.replace('`', '')}, so DGPO's valid-token averaging ("
                f"{arg('dgpo_valid_token_norm', True)}) would not be exact. Use "
                f"{' or '.join(arg('loss_type', t) for t in exact)}, {off}.")
        if steps_per_generation is not None and steps_per_generation != gradient_accumulation_steps:
            share = "part of one generation batch" if steps_per_generation > gradient_accumulation_steps else (
                "several generation batches")
            raise ConfigError(
                f"{arg('steps_per_generation', steps_per_generation)} with "
                f"{arg('gradient_accumulation_steps', gradient_accumulation_steps)}: an optimizer step then sees "
                f"{share}, so DGPO's valid-token averaging would hold only on average. Leave "
                f"{name('steps_per_generation')} unset (it defaults to {name('gradient_accumulation_steps')}), {off}.")

    def check_masks(self, masks: dict[str, tuple[object, str]]) -> None:
        """Raise ``ConfigError`` for the first of ``masks`` (setting -> (value, what it drops)): loss-token masks."""
        for setting, (value, drops) in masks.items():
            raise ConfigError(
                f"{self.arg(setting, value)} {drops}: it drops loss tokens inside the loss, after the advantages, "
                f"while the loss still divides by every loss token, so DGPO's valid-token averaging ("
                f"{self.arg('dgpo_valid_token_norm', True)}) would not be exact. Leave {self.name(setting)} at its "
                f"default, or set {self.arg('dgpo_valid_token_norm', False)}.")

    def arg(self, name: str, value: object) -> str:
        """A setting as the framework's users write it."""
        return spelled(self.style, self.names.get(name, name), value)

    def name(self, name: str) -> str:
        """A setting's name as the framework's users write it."""
        return ("--" if self.style == FLAGS else "") + self.names.get(name, name)

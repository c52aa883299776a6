"""DGPO's valid-token averaging under an HF-Trainer-based GRPO's ``loss_type``: exact, or refused in one line.

DGPO's objective (Eq. 3) is a token mean over the *valid* groups' tokens (groups whose rewards are not all equal).
As in verl, the factor T_all / T_valid is folded into the advantages (``core.advantages.dgpo_advantage``), with both
counts taken over the whole generation batch, every process's loss tokens gathered (every rank computes the same
global factor). The factor turns a loss that divides by T_all into one that divides by T_valid, so it is exact
exactly when the trainer's loss divides each optimizer step's token sum by the loss tokens of the whole generation
batch, and one optimizer step sees one generation batch. Each adapter gives its framework's table (``LossTypes``)
and how its users write a setting (``words.Spelling``: a config field or a command-line flag).
"""

from __future__ import annotations

from dataclasses import dataclass

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.words import Spelling

__all__ = ["LossTypes", "GLOBAL_TOKENS", "SEQUENCE_MEANS", "TOKENS_MASKED_IN_THE_LOSS"]

GLOBAL_TOKENS = ("divides by the loss tokens of the whole generation batch, gathered over processes "
                 "(`num_items_in_batch`): T_all / T_valid makes it Eq. 3's valid-token mean")
SEQUENCE_MEANS = "averages each completion over its own length first: a mean of sequence means, not a token mean"
TOKENS_MASKED_IN_THE_LOSS = ("drops loss tokens inside the loss, after the advantages are computed, while the loss "
                             "still divides by every loss token of the generation batch (num_items_in_batch)")


@dataclass(frozen=True)
class LossTypes:
    """A framework's loss types: ``table`` maps each to (exact?, why), in its spelling."""

    table: dict[str, tuple[bool, str]]
    spelling: Spelling

    def check(self, loss_type: str, steps_per_generation: int | None, gradient_accumulation_steps: int) -> None:
        """Raise ``ConfigError`` unless DGPO's valid-token averaging is exact under these settings
        (``steps_per_generation`` None: it defaults to ``gradient_accumulation_steps``)."""
        arg, name = self.spelling.arg, self.spelling.name
        off = f"or set {arg('dgpo_valid_token_norm', False)} (DGPO without Eq. 3's valid-token averaging)"
        exact = [t for t, (ok, _) in self.table.items() if ok]
        if loss_type not in self.table:
            raise ConfigError(
                f"{arg('loss_type', loss_type)} is not one verl-hadw has checked against DGPO's valid-token averaging "
                f"(checked: {', '.join(self.table)}): use {arg('loss_type', exact[0])}, {off}.")
        ok, why = self.table[loss_type]
        if not ok:
            raise ConfigError(
                f"{arg('loss_type', loss_type)} {why.replace('`', '')}, so DGPO's valid-token averaging (Eq. 3, "
                f"{arg('dgpo_valid_token_norm', True)}) would not be exact. Use "
                f"{' or '.join(arg('loss_type', t) for t in exact)}, {off}.")
        if steps_per_generation is not None and steps_per_generation != gradient_accumulation_steps:
            share = "part of one generation batch" if steps_per_generation > gradient_accumulation_steps else (
                "several generation batches")
            raise ConfigError(
                f"{arg('steps_per_generation', steps_per_generation)} with "
                f"{arg('gradient_accumulation_steps', gradient_accumulation_steps)}: an optimizer step then sees "
                f"{share}, and the loss divides by a share of their tokens, so DGPO's valid-token averaging would "
                f"hold only on average. Leave {name('steps_per_generation')} unset (it defaults to "
                f"{name('gradient_accumulation_steps')}), {off}.")

    def check_masks(self, masks: dict[str, tuple[object, str]]) -> None:
        """Raise ``ConfigError`` for the first setting of ``masks`` (setting -> (its value, what it drops); only those
        set) that drops loss tokens inside the loss: DGPO's T_valid (Eq. 3) would count tokens the loss then drops,
        and which tokens it drops is decided after the advantages (an entropy quantile of each micro-batch, a
        truncation flag), so T_all / T_valid cannot be made exact."""
        arg, name = self.spelling.arg, self.spelling.name
        for setting, (value, drops) in masks.items():
            raise ConfigError(
                f"{arg(setting, value)} {drops}: it {TOKENS_MASKED_IN_THE_LOSS}, so DGPO's valid-token averaging "
                f"(Eq. 3, {arg('dgpo_valid_token_norm', True)}) would count tokens the loss does not train and would "
                f"not be exact. Leave {name(setting)} at its default, or set {arg('dgpo_valid_token_norm', False)} "
                "(DGPO without Eq. 3's valid-token averaging).")

    def table_markdown(self) -> str:
        """The docs' table (kept equal by a test in each adapter's docs)."""
        name = self.spelling.name
        rows = [f"| `{name('loss_type')}` | valid-token averaging | why |", "|---|---|---|"]
        same = f"`{name('steps_per_generation')}` = `{name('gradient_accumulation_steps')}`"
        for loss_type, (ok, why) in self.table.items():
            rows.append(f"| `{loss_type}` | {f'exact (with {same})' if ok else '**refused**'} | {why} |")
        return "\n".join(rows)

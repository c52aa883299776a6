"""Is DGPO's valid-token averaging exact under each of TRL's ``loss_type``s? The table, and the refusal.

DGPO's objective (Eq. 3) is a token mean over the *valid* groups' tokens (groups whose rewards are not all equal).
As in verl, the factor T_all / T_valid is folded into the advantages (``advantages.dgpo_advantage``), with both
counts taken over the whole generation batch, every process's loss tokens gathered (PR #5102 balanced valid tokens
across processes; here every rank computes the same global factor). The factor turns a loss that divides by T_all
into one that divides by T_valid, so it is exact exactly when TRL's loss divides each optimizer step's token sum by
the tokens of the whole generation batch. Under any other aggregation it is not; such a run is refused at
construction (set ``dgpo_valid_token_norm=False`` to train DGPO without Eq. 3's averaging, or change ``loss_type``).
"""

from __future__ import annotations

from verl_hadw.core.errors import ConfigError

__all__ = ["LOSS_TYPES", "check_loss_type", "loss_type_table"]

_GLOBAL = ("divides by the loss tokens of the whole generation batch, gathered over processes "
           "(`num_items_in_batch`): T_all / T_valid makes it Eq. 3's valid-token mean")
# loss_type -> (exact, why), for TRL 1.16's GRPOTrainer._compute_loss
LOSS_TYPES: dict[str, tuple[bool, str]] = {
    "dapo": (True, _GLOBAL),
    "cispo": (True, _GLOBAL),
    "vespo": (True, _GLOBAL),
    "bnpo": (False, "divides by each process's micro-batch tokens, fixed only after TRL shuffles and splits the "
                    "generation batch (after the advantages), and DDP then averages the processes' means"),
    "grpo": (False, "averages each completion over its own length first: a mean of sequence means, not a token mean"),
    "sapo": (False, "averages each completion over its own length first, like grpo"),
    "dr_grpo": (False, "divides by a constant (per_device_train_batch_size × max_completion_length), not by tokens"),
    "luspo": (False, "sums each completion's tokens and averages completions: no token mean"),
}


def check_loss_type(loss_type: str, steps_per_generation: int, gradient_accumulation_steps: int) -> None:
    """Raise ``ConfigError`` unless DGPO's valid-token averaging is exact under these TRL settings."""
    off = "or set dgpo_valid_token_norm=False (DGPO without Eq. 3's valid-token averaging)"
    if loss_type not in LOSS_TYPES:
        raise ConfigError(
            f"loss_type={loss_type!r} is not one verl-hadw has checked against DGPO's valid-token averaging "
            f"(checked: {', '.join(LOSS_TYPES)}): use loss_type='dapo', {off}."
        )
    exact, why = LOSS_TYPES[loss_type]
    if not exact:
        raise ConfigError(
            f"loss_type={loss_type!r} {why.replace('`', '')}, so DGPO's valid-token averaging (Eq. 3, "
            f"dgpo_valid_token_norm=True) would not be exact. Use loss_type='dapo' (or 'cispo', 'vespo'), {off}."
        )
    if steps_per_generation != gradient_accumulation_steps:
        share = "part of one generation batch" if steps_per_generation > gradient_accumulation_steps else (
            "several generation batches")
        raise ConfigError(
            f"steps_per_generation={steps_per_generation} with gradient_accumulation_steps="
            f"{gradient_accumulation_steps}: an optimizer step then sees {share}, and TRL's "
            "loss divides by a share of their tokens, so DGPO's valid-token averaging "
            f"would hold only on average. Leave steps_per_generation unset (it defaults to "
            f"gradient_accumulation_steps), {off}."
        )


def loss_type_table() -> str:
    """The docs' table (docs/trl.md, kept equal by a test)."""
    rows = ["| `loss_type` | valid-token averaging | why |", "|---|---|---|"]
    for name, (exact, why) in LOSS_TYPES.items():
        verdict = "exact (with `steps_per_generation == gradient_accumulation_steps`)" if exact else "**refused**"
        rows.append(f"| `{name}` | {verdict} | {why} |")
    return "\n".join(rows)

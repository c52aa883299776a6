"""What TRL settings HA-DW and DGPO honour, and what they refuse at construction, in one line naming the field.

- ``multi_objective_aggregation`` other than ``sum_then_normalize`` (GDPO's per-function normalisation): the methods
  read the weighted sum of the rewards;
- a ``loss_type`` TRL does not have (TRL would fail inside its loss, after the first generation);
- under DGPO's valid-token averaging (Eq. 3), a ``loss_type`` under which it would not be exact (``LOSS_TYPES``, the
  table docs/trl.md shows), ``steps_per_generation`` other than ``gradient_accumulation_steps``, or
  ``top_entropy_quantile`` < 1 (tokens dropped inside the loss); before TRL 1.9.0, ``mask_truncated_completions``
  (``version.check_truncation``; from 1.9.0 TRL drops truncated completions from ``num_items_in_batch`` too).
"""

from __future__ import annotations

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.loss_types import GLOBAL_TOKENS, SEQUENCE_MEANS, LossTypes
from verl_hadw.hf_trainer.words import Spelling
from verl_hadw.trl.version import check_truncation

__all__ = ["LOSS_TYPES", "check_settings"]

# loss_type -> (exact, why), for TRL 1.16's GRPOTrainer._compute_loss
LOSS_TYPES = LossTypes({
    "dapo": (True, GLOBAL_TOKENS),
    "cispo": (True, GLOBAL_TOKENS),
    "vespo": (True, GLOBAL_TOKENS),
    "bnpo": (False, "divides by each process's micro-batch tokens, fixed only after TRL shuffles and splits the "
                    "generation batch (after the advantages), and DDP then averages the processes' means"),
    "grpo": (False, SEQUENCE_MEANS),
    "sapo": (False, "averages each completion over its own length first, like grpo"),
    "dr_grpo": (False, "divides by a constant (per_device_train_batch_size × max_completion_length), not by tokens"),
    "luspo": (False, "sums each completion's tokens and averages completions: no token mean"),
}, Spelling(flags=False))


def check_settings(config) -> None:
    """Every TRL setting of ``config`` (a ``HadwGRPOConfig``) that would change what the method computes."""
    if config.multi_objective_aggregation != "sum_then_normalize":
        raise ConfigError(
            f"multi_objective_aggregation={config.multi_objective_aggregation!r} normalises each reward function "
            f"on its own (GDPO); {config.adv_estimator} replaces TRL's advantage and reads the weighted sum of "
            "the rewards: use multi_objective_aggregation='sum_then_normalize'."
        )
    config.norm_by_std()  # scale_rewards: "group" or "none"
    if config.loss_type not in LOSS_TYPES.table:  # TRL would fail inside its loss, after the first generation
        raise ConfigError(f"loss_type={config.loss_type!r} is not one of TRL's loss types: "
                          f"{', '.join(LOSS_TYPES.table)}.")
    if config.uses_valid_token_norm():
        LOSS_TYPES.check(config.loss_type, config.steps_per_generation, config.gradient_accumulation_steps)
        check_truncation(config.mask_truncated_completions)
        quantile, drops = config.top_entropy_quantile, "trains only each micro-batch's high-entropy tokens"
        LOSS_TYPES.check_masks({"top_entropy_quantile": (quantile, drops)} if quantile < 1.0 else {})

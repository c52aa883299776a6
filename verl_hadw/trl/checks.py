"""The TRL releases (``verl_hadw.TRL_RANGE``) and TRL settings under which HA-DW and DGPO are the methods named."""

from __future__ import annotations

from packaging.version import Version

from verl_hadw import TRL_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checks import GLOBAL_TOKENS, SEQUENCE_MEANS, LossTypes, in_range, installed

__all__ = ["LOSS_TYPES", "installed_trl", "check_trl_version", "check_settings"]

LOSS_TOKENS_FROM = "1.9.0"  # num_items_in_batch = the gathered loss-mask tokens (truncated completions excluded)

# loss_type -> (exact under DGPO's valid-token averaging?, why), for TRL 1.x's GRPOTrainer._compute_loss
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
}, flags=False)


def installed_trl() -> str:
    """The installed TRL's version (its distribution's metadata)."""
    return installed("trl", "trl")


def check_trl_version(what: str) -> None:
    """Raise ``ConfigError`` unless the installed TRL lies in ``TRL_RANGE``."""
    found = installed_trl()
    if not in_range(found, TRL_RANGE):
        raise ConfigError(f"{what} supports TRL {TRL_RANGE}; the installed TRL is {found}. Install a TRL in that "
                          f'range: pip install "trl{TRL_RANGE}".')


def check_settings(config) -> None:
    """Raise ``ConfigError`` for a TRL setting of ``config`` (a ``HadwGRPOConfig``) that changes what the method
    computes, or under which DGPO's valid-token averaging would not be exact."""
    if config.multi_objective_aggregation != "sum_then_normalize":
        raise ConfigError(
            f"multi_objective_aggregation={config.multi_objective_aggregation!r} normalises each reward function "
            f"on its own (GDPO), but {config.adv_estimator} reads the weighted sum of the rewards. Use "
            "multi_objective_aggregation='sum_then_normalize'.")
    config.norm_by_std()  # scale_rewards: "group" or "none"
    if config.loss_type not in LOSS_TYPES.table:  # TRL would fail inside its loss, after the first generation
        raise ConfigError(f"loss_type={config.loss_type!r} is not one of TRL's loss types. Use one of: "
                          f"{', '.join(LOSS_TYPES.table)}.")
    if not config.uses_valid_token_norm():
        return
    LOSS_TYPES.check(config.loss_type, config.steps_per_generation, config.gradient_accumulation_steps)
    found = installed_trl()
    if config.mask_truncated_completions and Version(found) < Version(LOSS_TOKENS_FROM):
        raise ConfigError(
            f"mask_truncated_completions=True with DGPO's valid-token averaging: TRL {found} divides the "
            "dapo/cispo/vespo loss by every completion token, truncated completions' included, so Eq. 3's valid-token "
            f"mean would not be exact. Upgrade TRL to {LOSS_TOKENS_FROM} or later, set "
            "mask_truncated_completions=False, or set dgpo_valid_token_norm=False.")
    if config.top_entropy_quantile < 1.0:
        drops = "trains only each micro-batch's high-entropy tokens"
        LOSS_TYPES.check_masks({"top_entropy_quantile": (config.top_entropy_quantile, drops)})

"""The TRL releases this adapter supports (``verl_hadw.TRL_RANGE``), checked when a trainer or config is built.

The override (``grpo_trainer``) relies on TRL's ``_generate_and_score_completions`` output (``advantages``,
``completion_mask``, ``tool_mask``, ``num_items_in_batch``; the local rows sliced by process index), on
``_calculate_rewards`` returning the gathered ``(B, n_funcs)`` rewards, on ``_logs["advantages"]`` and ``_metrics``,
on the ``loss_type`` list and its normalisers (``refusals``) and on ``checkpoint-N`` folders. Read at every 1.x
release, that contract holds from 1.0.0 on; one difference: before 1.9.0, ``num_items_in_batch`` (dapo's, cispo's
and vespo's normaliser) counts every completion token, those of completions ``mask_truncated_completions`` masks
included, so DGPO's valid-token averaging is exact there only without ``mask_truncated_completions``
(``check_truncation``). docs/trl.md ("Supported TRL releases") has the table and the runs.
"""

from __future__ import annotations

from packaging.version import Version

from verl_hadw import TRL_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.versions import in_range, installed

__all__ = ["TRL_RANGE", "installed_trl", "check_trl_version", "check_truncation", "LOSS_TOKENS_FROM"]

LOSS_TOKENS_FROM = "1.9.0"  # num_items_in_batch = the gathered loss-mask tokens (truncated completions excluded)


def installed_trl() -> str:
    """The installed TRL's version (its distribution's metadata)."""
    return installed("trl", "trl")


def check_trl_version(what: str) -> None:
    """Raise ``ConfigError`` naming the installed TRL and ``TRL_RANGE`` unless the installed TRL is in it."""
    found = installed_trl()
    if not in_range(found, TRL_RANGE):
        raise ConfigError(
            f"{what} supports TRL {TRL_RANGE}; the installed TRL is {found}. Its GRPOTrainer override relies on "
            "TRL 1.x's _generate_and_score_completions, _calculate_rewards, _logs, _metrics and loss types "
            f'(docs/trl.md, "Supported TRL releases"). Install a TRL in that range: pip install "trl{TRL_RANGE}".'
        )


def check_truncation(mask_truncated_completions: bool) -> None:
    """DGPO's valid-token averaging under ``mask_truncated_completions`` needs TRL >= 1.9.0 (see the module doc)."""
    found = installed_trl()
    if mask_truncated_completions and Version(found) < Version(LOSS_TOKENS_FROM):
        raise ConfigError(
            f"mask_truncated_completions=True with DGPO's valid-token averaging (dgpo_valid_token_norm=True): TRL "
            f"{found} divides the dapo/cispo/vespo loss by every completion token, truncated completions' "
            f"included, so Eq. 3's valid-token mean would not be exact (TRL {LOSS_TOKENS_FROM} and later count only "
            "the loss tokens). Upgrade TRL, set mask_truncated_completions=False, or set dgpo_valid_token_norm=False."
        )

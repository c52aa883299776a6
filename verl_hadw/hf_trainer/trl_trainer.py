"""TRL's own ``GRPOTrainer``, as every adapter whose trainer it is runs it (TRL's, Axolotl's): its loss types, the
TRL settings the methods cannot honour, and ``TrlTrainerHooks``, HA-DW's or DGPO's advantage in its generation step.
Imports no TRL: the adapters mix it in before their framework's class."""

from __future__ import annotations

import functools

import torch
from packaging.version import Version

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checks import GLOBAL_TOKENS, SEQUENCE_MEANS, LossTypes, installed
from verl_hadw.hf_trainer.trainer_hooks import HadwTrainerHooks

__all__ = ["TRL_LOSSES", "check_trl_settings", "TrlTrainerHooks"]

LOSS_TOKENS_FROM = "1.9.0"  # num_items_in_batch = the gathered loss-mask tokens (truncated completions excluded)
UNSCORABLE_EXCLUDED_FROM = "1.6.0"  # unscorable_mask: checked in 1.0.0-1.16.0 (1.0-1.5 nansum an all-None row to 0)

# loss_type -> (exact under DGPO's valid-token averaging?, why), for TRL 1.x's GRPOTrainer._compute_loss
TRL_LOSSES = {
    "dapo": (True, GLOBAL_TOKENS),
    "cispo": (True, GLOBAL_TOKENS),
    "vespo": (True, GLOBAL_TOKENS),
    "bnpo": (False, "divides by each process's micro-batch tokens, fixed only after TRL shuffles and splits the "
                    "generation batch (after the advantages), and DDP then averages the processes' means"),
    "grpo": (False, SEQUENCE_MEANS),
    "sapo": (False, "averages each completion over its own length first, like grpo"),
    "dr_grpo": (False, "divides by a constant (per_device_train_batch_size × max_completion_length), not by tokens"),
    "luspo": (False, "sums each completion's tokens and averages completions: no token mean"),
}


def check_trl_settings(config, losses: LossTypes, trl_version: str) -> None:
    """Raise ``ConfigError`` for a setting of ``config`` (TRL's ``GRPOConfig`` with the ``OptionFields``, as built)
    that changes what the method computes, or under which DGPO's valid-token averaging would not be exact; ``losses``
    spells the settings as the framework's users write them; ``trl_version``: the installed TRL's."""
    arg, estimator = losses.arg, config.adv_estimator
    if config.multi_objective_aggregation != "sum_then_normalize":
        raise ConfigError(
            f"{arg('multi_objective_aggregation', config.multi_objective_aggregation)} normalises each reward "
            f"function on its own (GDPO), but {estimator} reads the weighted sum of the rewards. Use "
            f"{arg('multi_objective_aggregation', 'sum_then_normalize')}.")
    config.norm_by_std()  # scale_rewards: "group" or "none"
    if config.loss_type not in TRL_LOSSES:  # TRL would fail inside its loss, after the first generation
        raise ConfigError(f"{arg('loss_type', config.loss_type)} is not one of TRL's loss types. Use one of: "
                          f"{', '.join(TRL_LOSSES)}.")
    if not config.uses_valid_token_norm():
        return
    losses.check(config.loss_type, config.steps_per_generation, config.gradient_accumulation_steps)
    if config.mask_truncated_completions and Version(trl_version) < Version(LOSS_TOKENS_FROM):
        raise ConfigError(
            f"{arg('mask_truncated_completions', True)} with DGPO's valid-token averaging: TRL {trl_version} divides "
            "the dapo/cispo/vespo loss by every completion token, truncated completions' included, so DGPO's "
            f"valid-token mean would not be exact. Upgrade TRL to {LOSS_TOKENS_FROM} or later, set "
            f"{arg('mask_truncated_completions', False)}, or set {arg('dgpo_valid_token_norm', False)}.")
    if config.top_entropy_quantile < 1.0:
        drops = "trains only each micro-batch's high-entropy tokens"
        losses.check_masks({"top_entropy_quantile": (config.top_entropy_quantile, drops)})


class TrlTrainerHooks(HadwTrainerHooks):
    """HA-DW's or DGPO's advantages in TRL's ``GRPOTrainer`` flow: they replace TRL's ``advantages`` in
    ``_generate_and_score_completions`` (as TRL's maintainers advise for another estimator)."""

    _gathered_rewards: torch.Tensor | None = None

    @functools.cached_property
    def excludes_unscorable(self) -> bool:
        """The installed TRL's: from 1.6.0 a completion no reward function scored leaves its group's mean and std."""
        return Version(installed("trl", "trl")) >= Version(UNSCORABLE_EXCLUDED_FROM)

    # private API: GRPOTrainer._calculate_rewards (checked on TRL 1.0.0, 1.16.0; Axolotl 0.19.0 with TRL 1.9.0)
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with self.checking_rewards():  # TRL converts each list with torch.tensor: a string would name no function
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards_per_func  # (B_global, n_funcs), every process's rows, on every process
        return rewards_per_func

    # private API: GRPOTrainer._generate_and_score_completions, its output keys (completion_mask, tool_mask,
    # advantages) and _logs["advantages"] (checked on TRL 1.0.0, 1.16.0; Axolotl 0.19.0 with TRL 1.9.0)
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        rewards, self._gathered_rewards = self._gathered_rewards, None
        mode = "train" if self.model.training else "eval"
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            loss_mask = loss_mask * output["tool_mask"]
        lengths = self.accelerator.gather(loss_mask.sum(dim=-1))  # (B_global,) loss tokens, in the rewards' order
        advantages, values = self.hadw_advantages(rewards, lengths, mode)  # hf_trainer.trainer_hooks
        n_local = output["advantages"].shape[0]
        start = self.accelerator.process_index * n_local
        output["advantages"] = advantages[start : start + n_local]
        logged = self._logs["advantages"]  # TRL's advantages of this batch, every process's: replace them
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        self.log_hadw_metrics(values, mode)
        return output

"""``HadwGRPOTrainer``: TRL's ``GRPOTrainer`` training on HA-DW's or DGPO's advantage, which replaces TRL's
``advantages`` in ``_generate_and_score_completions`` (as TRL's maintainers advise for another estimator)."""

from __future__ import annotations

import torch
from trl import GRPOTrainer

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.reward_matrix import check_accuracy_weight, check_reward_weights
from verl_hadw.hf_trainer.trainer_hooks import HadwTrainerHooks
from verl_hadw.trl.checks import check_trl_version
from verl_hadw.trl.grpo_config import TRL, HadwGRPOConfig

__all__ = ["HadwGRPOTrainer"]


class HadwGRPOTrainer(HadwTrainerHooks, GRPOTrainer):
    """``GRPOTrainer`` whose advantages are HA-DW's or DGPO's (``args``: a ``HadwGRPOConfig``)."""

    def __init__(self, model, reward_funcs=None, args: HadwGRPOConfig | None = None, *rest, **kwargs):
        check_trl_version("HadwGRPOTrainer")
        if args is None:  # as TRL: a default config named after the model, here with HA-DW's defaults too
            name = model if isinstance(model, str) else getattr(model.config, "_name_or_path", "") or "model"
            args = HadwGRPOConfig(f"{name.split('/')[-1]}-GRPO")
        if not isinstance(args, HadwGRPOConfig):
            raise ConfigError(f"HadwGRPOTrainer got args of type {type(args).__name__}. Pass args=HadwGRPOConfig(...) "
                              "(GRPOConfig's fields plus adv_estimator, hadw_*, dgpo_*).")
        args.check_hadw()  # again, before TRL builds anything: a script may have set fields after construction
        if args.reward_weights is not None:
            check_reward_weights(args.reward_weights, [], TRL)
            if args.reads_accuracy():
                check_accuracy_weight(args.reward_weights, [], args.accuracy_reward_index, TRL)
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        self.start_hadw(args)
        self._gathered_rewards: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with self.checking_rewards():  # TRL converts each list with torch.tensor: a string would name no function
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards_per_func  # (B_global, n_funcs), every process's rows, on every process
        return rewards_per_func

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

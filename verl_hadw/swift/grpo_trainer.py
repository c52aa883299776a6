"""``HadwSwiftGRPOTrainer``: ms-swift's ``GRPOTrainer`` training on HA-DW's or DGPO's advantage, which replaces
the result of swift's ``_compute_advantages`` (ms-swift 4.3-4.6)."""

from __future__ import annotations

import torch
from swift.rlhf_trainers import GRPOTrainer

from verl_hadw.hf_trainer.trainer_hooks import HadwTrainerHooks
from verl_hadw.swift.checks import check_trainer
from verl_hadw.swift.grpo_config import HadwSwiftArguments

TRAINER_PATH = "verl_hadw.swift.grpo_trainer.HadwSwiftGRPOTrainer"  # swift's TrainerFactory looks it up


class HadwSwiftGRPOTrainer(HadwTrainerHooks, GRPOTrainer):
    """Swift's ``GRPOTrainer`` whose advantages are HA-DW's or DGPO's (``hadw_args``: the run's options)."""

    excludes_unscorable = False  # ms-swift 4.3-4.6: a completion no reward function scored has nansum's 0, in its group

    def __init__(self, *args, hadw_args: HadwSwiftArguments, **kwargs):
        super().__init__(*args, **kwargs)
        check_trainer(self, hadw_args)
        self.start_hadw(hadw_args)

    # private API: swift's GRPOTrainer._compute_rewards_per_func (checked on ms-swift 4.3.0, 4.6.0)
    def _compute_rewards_per_func(self, samples):
        with self.checking_rewards():  # swift converts each list with torch.tensor: a string would name no function
            return super()._compute_rewards_per_func(samples)

    # private API: swift's GRPOTrainer._compute_advantages (checked on ms-swift 4.3.0, 4.6.0)
    def _compute_advantages(self, samples, rewards_per_func: torch.Tensor, batch_encoded_inputs) -> torch.Tensor:
        super()._compute_advantages(samples, rewards_per_func, batch_encoded_inputs)  # swift's metrics; result unused
        mode = "train" if self.model.training else "eval"
        advantages, values = self.hadw_advantages(rewards_per_func, self._loss_tokens(batch_encoded_inputs), mode)
        self.log_hadw_metrics(values, mode)
        return advantages

    def _loss_tokens(self, batch_encoded_inputs) -> torch.Tensor:
        """(N_global,) each completion's loss tokens, in the rewards' order (4.3-4.5 keep ``completion_mask`` in each
        micro-batch dict, 4.6 in its ``grpo_batch``)."""
        # internal: the micro-batch dicts' layout; private API: GRPOTrainer._gather_and_flatten (ms-swift 4.3.0, 4.6.0)
        masks = [b["grpo_batch"].completion_mask if "grpo_batch" in b else b["completion_mask"]
                 for b in batch_encoded_inputs]
        local = [m.sum(1).tolist() for m in masks]
        return self._gather_and_flatten(local, dtype=torch.float32, device=self.accelerator.device, flatten_level=1)

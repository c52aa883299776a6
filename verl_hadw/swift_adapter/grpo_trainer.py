"""``HadwSwiftGRPOTrainer``: ms-swift's ``GRPOTrainer`` training on HA-DW's or DGPO's advantage.

Swift computes advantages in ``GRPOTrainer._compute_advantages(samples, rewards_per_func, batch_encoded_inputs)``
(4.3-4.6), on the ``(N_global, n_funcs)`` rewards it has gathered over processes: every rank sees the same matrix,
groups are consecutive runs of ``num_generations`` rows, and swift cuts this rank's rows out of what it returns.
This trainer overrides that one method: swift's own runs first (it logs ``reward``, ``reward_std``,
``rewards/<func>/*``), then ours replaces its result (``core.reward_matrix``), and our ``hadw/*`` ``dgpo/*`` values
go into swift's ``_metrics``, logged with swift's. Each rank holds an identical anchor (``hf_trainer``), observed
once per generation batch; ``checkpoint-N/verl_hadw_anchor.json`` is saved with each checkpoint and read on resume
(the wiring TRL's adapter shares: ``hf_trainer.trainer_hooks``).
"""

from __future__ import annotations

import torch
from swift.rlhf_trainers import GRPOTrainer

from verl_hadw.hf_trainer.trainer_hooks import HadwTrainerHooks
from verl_hadw.swift_adapter.grpo_config import HadwSwiftArguments
from verl_hadw.swift_adapter.refusals import check_trainer

__all__ = ["HadwSwiftGRPOTrainer", "TRAINER_PATH"]

TRAINER_PATH = "verl_hadw.swift_adapter.grpo_trainer.HadwSwiftGRPOTrainer"  # swift's TrainerFactory looks it up


class HadwSwiftGRPOTrainer(HadwTrainerHooks, GRPOTrainer):
    """Swift's ``GRPOTrainer`` whose advantages are HA-DW's or DGPO's (``hadw_args``: the run's options)."""

    def __init__(self, *args, hadw_args: HadwSwiftArguments, **kwargs):
        super().__init__(*args, **kwargs)
        check_trainer(self, hadw_args)
        self.start_hadw(hadw_args)  # the anchor or the options record, read once (hf_trainer.trainer_hooks)

    def _compute_rewards_per_func(self, samples):
        with self.checking_rewards():  # swift converts each list with torch.tensor: a string would name no function
            return super()._compute_rewards_per_func(samples)

    def _compute_advantages(self, samples, rewards_per_func: torch.Tensor, batch_encoded_inputs) -> torch.Tensor:
        super()._compute_advantages(samples, rewards_per_func, batch_encoded_inputs)  # swift's metrics; result unused
        mode = "train" if self.model.training else "eval"
        advantages, values = self.hadw_advantages(rewards_per_func, self._loss_tokens(batch_encoded_inputs), mode)
        self.log_hadw_metrics(values, mode)
        return advantages

    def _loss_tokens(self, batch_encoded_inputs) -> torch.Tensor:
        """(N_global,) each completion's loss tokens, in the rewards' order: the counts swift's ``num_items_in_batch``
        sums (4.3-4.5 keep ``completion_mask`` in each micro-batch dict, 4.6 in its ``grpo_batch``)."""
        masks = [b["grpo_batch"].completion_mask if "grpo_batch" in b else b["completion_mask"]
                 for b in batch_encoded_inputs]
        local = [m.sum(1).tolist() for m in masks]
        return self._gather_and_flatten(local, dtype=torch.float32, device=self.accelerator.device, flatten_level=1)

"""``HadwSwiftGRPOTrainer``: ms-swift's ``GRPOTrainer`` training on HA-DW's or DGPO's advantage.

Swift computes advantages in ``GRPOTrainer._compute_advantages(samples, rewards_per_func, batch_encoded_inputs)``
(4.3-4.6), on the ``(N_global, n_funcs)`` rewards it has gathered over processes: every rank sees the same matrix,
groups are consecutive runs of ``num_generations`` rows, and swift cuts this rank's rows out of what it returns.
This trainer overrides that one method: swift's own runs first (it logs ``reward``, ``reward_std``,
``rewards/<func>/*``), then ours replaces its result (``core.reward_matrix``), and our ``hadw/*`` ``dgpo/*`` values
go into swift's ``_metrics``, logged with swift's. Each rank holds an identical anchor (``hf_trainer``), observed
once per generation batch; ``checkpoint-N/verl_hadw_anchor.json`` is saved with each checkpoint and read on resume.
"""

from __future__ import annotations

import torch
from swift.rlhf_trainers import GRPOTrainer
from transformers.trainer_utils import get_last_checkpoint

from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.core.reward_matrix import RewardColumns, check_reward_weights, generation_advantages
from verl_hadw.hf_trainer.checkpoint_anchor import AnchorCheckpointCallback, OptionsRecord, TrainerAnchor
from verl_hadw.swift_adapter.settings import check_trainer
from verl_hadw.swift_adapter.swift_flags import HadwSwiftArguments
from verl_hadw.swift_adapter.swift_terms import SWIFT

__all__ = ["HadwSwiftGRPOTrainer", "TRAINER_PATH"]

TRAINER_PATH = "verl_hadw.swift_adapter.swift_grpo_trainer.HadwSwiftGRPOTrainer"  # swift's TrainerFactory looks it up


class HadwSwiftGRPOTrainer(GRPOTrainer):
    """Swift's ``GRPOTrainer`` whose advantages are HA-DW's or DGPO's (``hadw_args``: the run's options)."""

    def __init__(self, *args, hadw_args: HadwSwiftArguments, **kwargs):
        super().__init__(*args, **kwargs)
        check_trainer(self, hadw_args)
        check_reward_weights(self.reward_weights, self.reward_func_names, SWIFT)
        hadw_args.warn_unused_fields()
        self.hadw_args = hadw_args
        self.hadw_cfg = hadw_args.hadw_options()
        self.dgpo_cfg = hadw_args.dgpo_options() if hadw_args.uses_dgpo() else None
        options = hadw_args.recorded_options(self.reward_weights.tolist())
        self.hadw_anchor = TrainerAnchor(self.hadw_cfg, options, SWIFT) if hadw_args.adv_estimator == "hadw" else None
        # what each checkpoint records and a resume checks: the anchor, or (DGPO) the run's options only
        self._hadw_record = self.hadw_anchor or OptionsRecord(self.hadw_cfg.state_key, options, SWIFT)
        self.add_callback(AnchorCheckpointCallback(self._hadw_record))
        self._hadw_metrics = MetricBuffer()

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        """Swift's ``train``, with the anchor started first: fresh, or restored from the checkpoint the Trainer
        resumes from (``--resume_only_model true --ignore_data_skip true`` hands none: a new run, a fresh anchor)."""
        folder = resume_from_checkpoint
        if folder is True:
            folder = get_last_checkpoint(self.args.output_dir)
        self._hadw_record.start(folder or None)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _compute_advantages(self, samples, rewards_per_func: torch.Tensor, batch_encoded_inputs) -> torch.Tensor:
        super()._compute_advantages(samples, rewards_per_func, batch_encoded_inputs)  # swift's metrics; result unused
        mode = "train" if self.model.training else "eval"
        columns = RewardColumns(self.reward_func_names, self.reward_weights, self.hadw_args.accuracy_reward_index)
        advantages, values = generation_advantages(
            rewards_per_func, self._loss_tokens(batch_encoded_inputs),
            self.num_generations if mode == "train" else self.num_generations_eval, columns,
            hadw_cfg=self.hadw_cfg, dgpo_cfg=self.dgpo_cfg, norm_by_std=self.hadw_args.norm_by_std(),
            anchor=self.hadw_anchor, step=self.state.global_step + 1, training=mode == "train",
            metrics=self._hadw_metrics, terms=SWIFT)
        if self.hadw_cfg.log_metrics:
            for name, value in values.items():
                self._metrics[mode][name].append(value)
        return advantages

    def _loss_tokens(self, batch_encoded_inputs) -> torch.Tensor:
        """(N_global,) each completion's loss tokens, in the rewards' order: the counts swift's ``num_items_in_batch``
        sums (4.3-4.5 keep ``completion_mask`` in each micro-batch dict, 4.6 in its ``grpo_batch``)."""
        masks = [b["grpo_batch"].completion_mask if "grpo_batch" in b else b["completion_mask"]
                 for b in batch_encoded_inputs]
        local = [m.sum(1).tolist() for m in masks]
        return self._gather_and_flatten(local, dtype=torch.float32, device=self.accelerator.device, flatten_level=1)

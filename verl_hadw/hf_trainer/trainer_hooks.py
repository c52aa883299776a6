"""The wiring every HF-Trainer-based GRPO adapter shares, written once: ``HadwTrainerHooks``, a mixin placed before
the framework's ``GRPOTrainer``.

- ``start_hadw(options)``, called at the end of the trainer's ``__init__`` (the framework has built its reward
  functions by then): the reward weights and ``accuracy_reward_index`` checked against them, unused fields warned,
  the options parsed once, the anchor (HA-DW) or the options record (DGPO) built.
- ``_save_checkpoint``: the anchor file (DGPO: the options record) written into ``checkpoint-N`` first, then the
  framework's save.
- ``checking_rewards()``: while the framework scores a generation batch, every value a reward function returns is
  checked (a string is named with its function, ``core.errors.RewardValueError``).
- ``train()``: the anchor started before the framework's loop, fresh or restored from the checkpoint the Trainer
  resumes from (``True``: the last one in ``output_dir``, as the Trainer finds it).
- ``hadw_advantages(rewards, lengths, mode)``: one generation batch's advantages and metrics
  (``core.reward_matrix.generation_advantages``); ``log_hadw_metrics(values, mode)`` puts the metrics into the
  framework's ``_metrics``, averaged and logged with its own.

The framework's words are those of the options object (``options.terms``): every message names its fields or flags.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.core.option_fields import OptionFields
from verl_hadw.core.reward_matrix import (
    RewardColumns,
    check_accuracy_weight,
    check_reward_values,
    check_reward_weights,
    generation_advantages,
)
from verl_hadw.hf_trainer.adapter_fields import check_accuracy_index
from verl_hadw.hf_trainer.checkpoint_anchor import OptionsRecord, TrainerAnchor

__all__ = ["HadwTrainerHooks", "checked_outputs"]


def checked_outputs(func, name: str):
    """``func`` (a reward function) with each of its returned values checked (``check_reward_values``); a model
    (``nn.Module``) as it is."""
    if isinstance(func, torch.nn.Module) or not callable(func):
        return func
    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None)):
        @functools.wraps(func)
        async def checked_async(*args, **kwargs):
            values = await func(*args, **kwargs)
            check_reward_values(name, values)
            return values

        return checked_async

    @functools.wraps(func)
    def checked(*args, **kwargs):
        values = func(*args, **kwargs)
        check_reward_values(name, values)
        return values

    return checked


class HadwTrainerHooks:
    """HA-DW's and DGPO's advantages in an HF-Trainer-based ``GRPOTrainer`` (mixed in before it)."""

    def start_hadw(self, options: OptionFields) -> None:
        """What the trainer runs and records, read once from ``options`` (a field changed later is not read
        half-way); the anchor or the options record, saved with every checkpoint."""
        terms = options.terms
        check_reward_weights(self.reward_weights, self.reward_func_names, terms)
        check_accuracy_index(options.accuracy_reward_index, self.reward_func_names, terms)
        if options.reads_accuracy():  # the accuracy must come from a function the advantage rewards
            check_accuracy_weight(self.reward_weights, self.reward_func_names, options.accuracy_reward_index, terms)
        options.warn_unused_fields()
        self.hadw_options = options
        self.hadw_cfg = options.hadw_options()
        self.dgpo_cfg = options.dgpo_options() if options.uses_dgpo() else None
        self._hadw_norm_by_std, self._hadw_accuracy_index = options.norm_by_std(), options.accuracy_reward_index
        recorded = options.recorded_options(self.reward_weights.tolist(), list(self.reward_func_names))
        self.hadw_anchor = TrainerAnchor(self.hadw_cfg, recorded, terms) if options.adv_estimator == "hadw" else None
        # what each checkpoint records and a resume checks: the anchor, or (DGPO) the run's options only
        self._hadw_record = self.hadw_anchor or OptionsRecord(self.hadw_cfg.state_key, recorded, terms)
        self._hadw_metrics = MetricBuffer()  # this trainer's hadw/* dgpo/* values, per step

    @contextlib.contextmanager
    def checking_rewards(self):
        """The framework's reward functions, each value they return checked (``checked_outputs``), while the framework
        scores a generation batch: a string would otherwise fail in its tensor conversion, naming no function."""
        funcs = self.reward_funcs
        self.reward_funcs = [checked_outputs(f, n) for f, n in zip(funcs, self.reward_func_names)]
        try:
            yield
        finally:
            self.reward_funcs = funcs

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        """The framework's ``train``, with the anchor started first: fresh, or restored from the checkpoint the
        Trainer resumes from. Under DGPO the checkpoint's estimator is checked instead (one trained under HA-DW is
        refused)."""
        folder = resume_from_checkpoint
        if folder is True:
            folder = get_last_checkpoint(self.args.output_dir)  # None: the Trainer itself raises "no checkpoint"
        self._hadw_record.start(folder or None)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _save_checkpoint(self, model, trial, *args, **kwargs):
        """The framework's checkpoint save, with the anchor file (DGPO: the options record) written into
        ``checkpoint-N`` first (atomically, by the saving process): before the model's files, before the Trainer
        removes older checkpoints (``save_total_limit``) and before swift moves its ``last-checkpoint`` link. A save
        cut off at any moment leaves the previous checkpoints as they were and either a whole ``checkpoint-N`` that
        holds its anchor, or a partial one (no ``trainer_state.json``, the Trainer's last file), which a resume
        refuses naming the newest whole one (``checkpoint_anchor.resumed_step``)."""
        if self.args.should_save:
            step = self.state.global_step
            folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{step}")
            self._hadw_record.save(folder, step)
        return super()._save_checkpoint(model, trial, *args, **kwargs)

    def hadw_advantages(self, rewards_per_func: torch.Tensor, lengths: torch.Tensor, mode: str = "train"):
        """(B,) advantages of one generation batch, and its hadw/* dgpo/* metrics (``core.reward_matrix``).

        rewards_per_func: (B, n_funcs), the framework's gathered rewards (NaN: a function returned None); groups are
        consecutive runs of ``num_generations`` rows. lengths: (B,) each completion's loss tokens (DGPO's Eq. 3).
        In training HA-DW's anchor observes the batch (at step ``state.global_step + 1``); in evaluation it does not.
        """
        columns = RewardColumns(self.reward_func_names, self.reward_weights, self._hadw_accuracy_index)
        return generation_advantages(
            rewards_per_func, lengths, self.num_generations if mode == "train" else self.num_generations_eval,
            columns, hadw_cfg=self.hadw_cfg, dgpo_cfg=self.dgpo_cfg, norm_by_std=self._hadw_norm_by_std,
            anchor=self.hadw_anchor, step=self.state.global_step + 1, training=mode == "train",
            metrics=self._hadw_metrics, terms=self.hadw_options.terms)

    def log_hadw_metrics(self, values: dict[str, float], mode: str) -> None:
        """One batch's hadw/* dgpo/* values into the framework's ``_metrics`` (unless ``hadw_log_metrics`` is off)."""
        if self.hadw_cfg.log_metrics:
            for name, value in values.items():
                self._metrics[mode][name].append(value)

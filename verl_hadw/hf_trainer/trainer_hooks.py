"""``HadwTrainerHooks``: HA-DW and DGPO in an HF-Trainer-based ``GRPOTrainer`` (TRL's, ms-swift's, Axolotl's), mixed
in first."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.hf_trainer.checkpoint_anchor import OptionsRecord, TrainerAnchor
from verl_hadw.hf_trainer.option_fields import OptionFields, check_accuracy_index
from verl_hadw.hf_trainer.reward_matrix import RewardColumns, check_reward_values, check_weights, generation_advantages


def checked_outputs(func, name: str):
    """``func`` (a reward function) with the values it returns checked (``check_reward_values``); a model as it is."""
    if isinstance(func, torch.nn.Module) or not callable(func):
        return func
    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None)):
        @functools.wraps(func)
        async def checked_async(*args, **kwargs):
            return check_reward_values(name, await func(*args, **kwargs))

        return checked_async

    @functools.wraps(func)
    def checked(*args, **kwargs):
        return check_reward_values(name, func(*args, **kwargs))

    return checked


class HadwTrainerHooks:
    """HA-DW's and DGPO's advantages in an HF-Trainer-based ``GRPOTrainer`` (mixed in before it)."""

    excludes_unscorable: bool  # each adapter's: its framework leaves a completion no function scored out of its group

    def start_hadw(self, options: OptionFields) -> None:
        """Read ``options`` once, at the end of the trainer's ``__init__``: check them, build the anchor or record."""
        terms = options.terms
        check_weights(self.reward_weights, self.reward_func_names, options)
        check_accuracy_index(options.accuracy_reward_index, self.reward_func_names, terms)
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
        """While the framework scores a generation batch, check each value its reward functions return."""
        # internal: the trainer's reward_funcs list, read per batch (TRL 1.0.0, 1.16.0; Axolotl 0.19.0 with TRL 1.9.0;
        # ms-swift 4.3.0, 4.6.0)
        funcs = self.reward_funcs
        self.reward_funcs = [checked_outputs(f, n) for f, n in zip(funcs, self.reward_func_names)]
        try:
            yield
        finally:
            self.reward_funcs = funcs

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        """The framework's ``train``, the anchor started first: fresh, or restored from the checkpoint resumed."""
        folder = resume_from_checkpoint
        if folder is True:
            folder = get_last_checkpoint(self.args.output_dir)  # None: the Trainer itself raises "no checkpoint"
        self._hadw_record.start(folder or None)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # private API: transformers' Trainer._save_checkpoint and _get_output_dir (checked on transformers 5.10.4 with
    # TRL 1.16.0; also run under TRL 1.0.0, ms-swift 4.3.0 and 4.6.0, Axolotl 0.19.0 with TRL 1.9.0)
    def _save_checkpoint(self, model, trial, *args, **kwargs):
        """The framework's save, the anchor file (DGPO: the options record) written into ``checkpoint-N`` first."""
        if self.args.should_save:
            step = self.state.global_step
            folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{step}")
            self._hadw_record.save(folder, step)
        return super()._save_checkpoint(model, trial, *args, **kwargs)

    def hadw_advantages(self, rewards_per_func: torch.Tensor, lengths: torch.Tensor, mode: str = "train"):
        """One generation batch's advantages and metrics; in training the anchor observes the batch.

        Args:
            rewards_per_func: (B, n_funcs) the framework's gathered rewards, NaN where a function returned None.
            lengths: (B,) each completion's loss tokens (DGPO's Eq. 3).

        Returns:
            (B,) advantages, and the hadw/* dgpo/* values to log.
        """
        columns = RewardColumns(self.reward_func_names, self.reward_weights, self._hadw_accuracy_index)
        return generation_advantages(
            rewards_per_func, lengths, self.num_generations if mode == "train" else self.num_generations_eval,
            columns, hadw_cfg=self.hadw_cfg, dgpo_cfg=self.dgpo_cfg, norm_by_std=self._hadw_norm_by_std,
            anchor=self.hadw_anchor, step=self.state.global_step + 1, training=mode == "train",
            metrics=self._hadw_metrics, terms=self.hadw_options.terms, exclude_unscorable=self.excludes_unscorable)

    def log_hadw_metrics(self, values: dict[str, float], mode: str) -> None:
        """One batch's hadw/* dgpo/* values into the framework's ``_metrics`` (unless ``hadw_log_metrics`` is off)."""
        if self.hadw_cfg.log_metrics:
            # private API: GRPOTrainer._metrics (TRL 1.0.0, 1.16.0; Axolotl 0.19.0/TRL 1.9.0; ms-swift 4.3.0, 4.6.0)
            for name, value in values.items():
                self._metrics[mode][name].append(value)

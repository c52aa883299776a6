"""``HadwGRPOTrainer``: TRL's ``GRPOTrainer`` training on HA-DW's or DGPO's advantage.

TRL 1.16 computes its group-relative advantage inline in ``_generate_and_score_completions`` and has no hook for
another estimator; its maintainers' supported route (TRL issue #4525) is to override that method and return the
same output dict with other ``advantages``. This trainer does only that, plus two one-line taps:

- ``_calculate_rewards`` keeps the rewards TRL gathers from every process (the override needs the whole
  generation batch: groups span processes, and DGPO's question weights are over the whole batch);
- ``_generate_and_score_completions`` calls TRL's, then computes ours from those rewards with
  ``verl_hadw.core.advantages`` (the equations verl's estimators run), slices this process's rows as TRL does, and puts
  them in the output: what TRL buffers, reuses over ``num_iterations`` and trains on. TRL has already logged its
  own advantages by then (the trap TRL PR #7298 describes), so the override replaces that log's entries with ours.

``train()`` starts the HA-DW anchor (fresh, or restored from ``resume_from_checkpoint``) before TRL's loop;
``AnchorCheckpointCallback`` saves it with every checkpoint. Metrics go into TRL's own ``_metrics``, so they are
averaged, logged and reported (``report_to``) with TRL's.
"""

from __future__ import annotations

import functools
import inspect

import torch
from transformers.trainer_utils import get_last_checkpoint
from trl import GRPOTrainer

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.metric_values import MetricBuffer
from verl_hadw.core.reward_matrix import RewardColumns, check_reward_values, check_reward_weights, generation_advantages
from verl_hadw.hf_trainer.checkpoint_anchor import AnchorCheckpointCallback
from verl_hadw.trl.grpo_config import HadwGRPOConfig
from verl_hadw.trl.trainer_anchor import OptionsRecord, TrainerAnchor
from verl_hadw.trl.trl_terms import TRL
from verl_hadw.trl.trl_version import check_trl_version

__all__ = ["HadwGRPOTrainer"]


def checked_outputs(func, name: str):
    """``func`` (a reward function) with each of its returned values checked (``check_reward_values``); a model
    (``nn.Module``) as it is."""
    if isinstance(func, torch.nn.Module) or not callable(func):
        return func
    if inspect.iscoroutinefunction(func):
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


class HadwGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are HA-DW's or DGPO's (``args``: a ``HadwGRPOConfig``)."""

    def __init__(self, model, reward_funcs=None, args: HadwGRPOConfig | None = None, *rest, **kwargs):
        check_trl_version("HadwGRPOTrainer")
        if args is None:  # as TRL: a default config named after the model, here with HA-DW's defaults too
            name = model if isinstance(model, str) else getattr(model.config, "_name_or_path", "") or "model"
            args = HadwGRPOConfig(f"{name.split('/')[-1]}-GRPO")
        if not isinstance(args, HadwGRPOConfig):
            raise ConfigError(
                f"HadwGRPOTrainer reads its options from args=HadwGRPOConfig(...) (GRPOConfig's fields plus adv_"
                f"estimator, hadw_*, dgpo_*), got {type(args).__name__}."
            )
        args.check_hadw()  # again, before TRL builds anything: a script may have set fields after construction
        if args.reward_weights is not None:
            check_reward_weights(args.reward_weights, [], TRL)  # before TRL builds anything
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        check_reward_weights(self.reward_weights, self.reward_func_names, TRL)
        args.warn_unused_fields()
        self.hadw_cfg = args.hadw_options()
        self.dgpo_cfg = args.dgpo_options() if args.uses_dgpo() else None
        # what this trainer runs and records, read once: a field changed after this is not read half-way
        self._norm_by_std, self._accuracy_index = args.norm_by_std(), args.accuracy_reward_index
        index, names = args.accuracy_reward_index, self.reward_func_names
        if index is not None and index >= len(names):
            raise ConfigError(
                f"accuracy_reward_index={index} is out of range: there are {len(names)} reward function(s) "
                f"({', '.join(f'{i}: {n}' for i, n in enumerate(names))}); valid: 0..{len(names) - 1} or None."
            )
        options = args.recorded_options(self.reward_weights.tolist())
        self.anchor = TrainerAnchor(self.hadw_cfg, options) if args.adv_estimator == "hadw" else None
        # what each checkpoint records and a resume checks: the anchor, or (DGPO) the run's options only
        self._record = self.anchor if self.anchor is not None else OptionsRecord(self.hadw_cfg.state_key, options)
        self.add_callback(AnchorCheckpointCallback(self._record))
        self._gathered_rewards: torch.Tensor | None = None
        self._hadw_metrics = MetricBuffer()  # this trainer's hadw/* dgpo/* values, per step

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        """TRL's ``train``, with the HA-DW anchor started first: fresh, or restored from the checkpoint TRL resumes
        from (``True``: the last one in ``output_dir``, as TRL finds it). Under DGPO the checkpoint's estimator is
        checked instead (one trained under HA-DW is refused)."""
        folder = resume_from_checkpoint
        if folder is True:
            folder = get_last_checkpoint(self.args.output_dir)  # None: TRL itself raises "no valid checkpoint"
        self._record.start(folder or None)  # the anchor restored, or (DGPO) the checkpoint's estimator checked
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # ------------------------------------------------------------------------------------- TRL's two taps
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        funcs = self.reward_funcs
        self.reward_funcs = [checked_outputs(f, n) for f, n in zip(funcs, self.reward_func_names)]
        try:  # TRL converts each function's list with torch.tensor: a string would fail naming no function
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.reward_funcs = funcs
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
        advantages, values = self.hadw_advantages(rewards, lengths, mode)
        n_local = output["advantages"].shape[0]
        start = self.accelerator.process_index * n_local
        output["advantages"] = advantages[start : start + n_local]
        logged = self._logs["advantages"]  # TRL's advantages of this batch, every process's: replace them
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        if self.hadw_cfg.log_metrics:
            for name, value in values.items():
                self._metrics[mode][name].append(value)
        return output

    # ---------------------------------------------------------------------------------------- the estimator
    def hadw_advantages(self, rewards_per_func: torch.Tensor, lengths: torch.Tensor, mode: str = "train"):
        """(B,) advantages of one generation batch, and its hadw/* dgpo/* metrics (``core.reward_matrix``).

        rewards_per_func: (B, n_funcs), TRL's gathered rewards (NaN: a function returned None); groups are
        consecutive runs of ``num_generations`` rows. lengths: (B,) each completion's loss tokens (DGPO's Eq. 3).
        In training HA-DW's anchor observes the batch (at step ``state.global_step + 1``); in evaluation it does not.
        """
        columns = RewardColumns(self.reward_func_names, self.reward_weights, self._accuracy_index)
        return generation_advantages(
            rewards_per_func, lengths, self.num_generations if mode == "train" else self.num_generations_eval,
            columns, hadw_cfg=self.hadw_cfg, dgpo_cfg=self.dgpo_cfg, norm_by_std=self._norm_by_std,
            anchor=self.anchor, step=self.state.global_step + 1, training=mode == "train",
            metrics=self._hadw_metrics, terms=TRL)

"""What the TRL tests share: a tiny local Qwen2 (the CPU demo's), the toy task as a TRL dataset with a verifiable
reward, a config factory, and ``RecordingTrainer``: the real ``HadwGRPOTrainer`` that also records, per generation
batch, the gathered rewards, the advantages it hands TRL and the anchor, and, per micro-step, what TRL trains on.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from datasets import Dataset

from verl_hadw.toy.model import build_model, build_tokenizer
from verl_hadw.toy.task import compute_score, make_rows
from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer

GROUP = 4  # num_generations
BATCH = 8  # per_device_train_batch_size: two prompts of four completions per process and micro-step


def toy_dataset(rows: int = 32) -> Dataset:
    """The toy task's prompts (conversational) with the allowed answer characters as a column."""
    data = make_rows(rows, 0, "train")
    return Dataset.from_list([{"prompt": r["prompt"], "allowed": r["reward_model"]["ground_truth"]} for r in data])


def accuracy(completions, allowed, **kwargs) -> list[float]:
    """The verifiable reward: 1.0 if the completion starts with an allowed character (the toy task's scorer)."""
    return [compute_score("toy", c[0]["content"], a) for c, a in zip(completions, allowed)]


def config(output_dir, **overrides) -> HadwGRPOConfig:
    return HadwGRPOConfig(**config_values(output_dir, **overrides))


def config_values(output_dir, **overrides) -> dict:
    """The keyword arguments of the tests' config (TRL's own ``GRPOConfig`` takes them too, without ours)."""
    values = dict(
        output_dir=str(output_dir), per_device_train_batch_size=BATCH, num_generations=GROUP,
        max_completion_length=4, max_steps=2, learning_rate=1e-2, logging_steps=1, save_strategy="no",
        report_to=[], use_cpu=True, seed=0, disable_tqdm=True, data_seed=0,
    )
    values.update(overrides)
    return values


def killed_config(output_dir, estimator: str = "hadw", **overrides) -> HadwGRPOConfig:
    """Three steps, a checkpoint after each, only the newest kept (``save_total_limit=1``): the run a test kills during
    checkpoint-2's save (``trl_killed_run.py``), resumes, and compares with the run that was never killed."""
    return config(output_dir, adv_estimator=estimator, max_steps=3, save_strategy="steps", save_steps=1,
                  save_total_limit=1, **overrides)


@dataclass
class Generation:
    """One generation batch as the trainer saw it (rows in TRL's order, every process's)."""

    rewards: torch.Tensor  # (B, n_funcs) gathered
    advantages: torch.Tensor  # (b,) this process's rows, as handed to TRL
    completion_mask: torch.Tensor  # (b, L) this process's
    anchor: dict | None  # the anchor state after this batch
    trained: list[torch.Tensor] = field(default_factory=list)  # the advantages of each micro-batch trained on it


class RecordingTrainer(HadwGRPOTrainer):
    """``HadwGRPOTrainer`` unchanged, with a record of each generation and of each loss computation."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generations: list[Generation] = []

    def _calculate_rewards(self, *args, **kwargs):
        rewards = super()._calculate_rewards(*args, **kwargs)
        self._recorded_rewards = rewards.clone()
        return rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            anchor = copy.deepcopy(self.hadw_anchor.state.to_dict()) if self.hadw_anchor is not None else None
            self.generations.append(Generation(self._recorded_rewards, output["advantages"].clone(),
                                               output["completion_mask"].clone(), anchor))
        return output

    def _compute_loss(self, model, inputs):
        if self.model.training:
            self.generations[-1].trained.append(inputs["advantages"].detach().clone())
        return super()._compute_loss(model, inputs)


def trainer(args: HadwGRPOConfig, reward_funcs=None, seed: int = 0, **kwargs) -> RecordingTrainer:
    """The recording trainer on the tiny local Qwen2 and the toy data; ``kwargs`` go to TRL (``peft_config``, ...)."""
    tokenizer = build_tokenizer()
    kwargs.setdefault("train_dataset", toy_dataset())
    kwargs["model"] = kwargs.get("model") or build_model(tokenizer, seed)  # or a folder, as TRL's model id
    return RecordingTrainer(processing_class=tokenizer, reward_funcs=reward_funcs or accuracy, args=args, **kwargs)


def trained_on_what_it_buffered(t: RecordingTrainer) -> None:
    """Each generation's advantages, as TRL buffered them, are what its loss read, ``num_iterations`` times over
    (shuffled by TRL within the batch); and some carry signal, or a test built on them would prove little."""
    assert len(t.generations) == t.args.max_steps // t.args.num_iterations
    for g in t.generations:
        trained = torch.cat(g.trained)
        assert torch.equal(trained.sort().values, torch.cat([g.advantages] * t.args.num_iterations).sort().values)
    assert any(bool(g.advantages.abs().sum() > 0) for g in t.generations), "no signal: the test would prove little"

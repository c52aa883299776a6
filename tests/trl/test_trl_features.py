"""TRL's GRPOTrainer features, each trained through ``HadwGRPOTrainer``: one run per feature of the subset
tests/helpers/trl_upstream/run.py picks from TRL's own test file (``CI_SUBSET``), on our stand-ins.

TRL's test file cannot run in CI (CI reaches package registries only, TRL's sdist holds no tests, and this repository
does not copy TRL's code; the harness runs it whole by hand, docs/trl.md). These are our own tests of the same
features, in CI at both ends of the TRL range (the lowest-TRL environment runs tests/trl/). Each run: two
steps, a finite loss, the parameters moved (for PEFT the adapter's, the base's not), HA-DW's metrics at every step,
the anchor advanced once per step. Elsewhere: args omitted (test_trl_errors.py), num_iterations > 1 and DGPO
(test_trl_training.py).
"""

from __future__ import annotations

import math

import pytest
import torch
from datasets import Dataset
from trl_helpers import BATCH, accuracy, config, toy_dataset, trainer

from verl_hadw.core.anchor.machine import AnchorState
from verl_hadw.toy.model import build_model, build_tokenizer
from verl_hadw.toy.task import compute_score

STEPS = 2


def train(t):
    """Trains ``t`` and checks what every run must show; returns its training log entries and the names of the
    parameters that moved."""
    before = {n: p.detach().clone() for n, p in t.model.named_parameters()}
    t.train()
    after = dict(t.model.named_parameters())
    steps = [h for h in t.state.log_history if "loss" in h]
    assert len(steps) == STEPS, t.state.log_history
    assert all(math.isfinite(h["loss"]) for h in steps), steps
    for entry, g in zip(steps, t.generations, strict=True):  # HA-DW's metrics, the anchor as each step left it
        assert entry["hadw/anchor_posterior"] == AnchorState.from_dict(g.anchor).view().posterior
    assert [g.anchor["open_step"] for g in t.generations] == list(range(1, STEPS + 1))
    moved = {n for n, p in after.items() if not torch.equal(p.detach(), before[n])}
    return steps, moved


@pytest.mark.slow  # a training run per loss type: seconds
@pytest.mark.parametrize("loss_type", ["dapo", "bnpo", "sapo", "grpo", "dr_grpo"])
def test_each_loss_type_trains(tmp_path, loss_type):
    """Under HA-DW every loss type trains (DGPO refuses the inexact ones: test_trl_errors.py)."""
    t = trainer(config(tmp_path, max_steps=STEPS, loss_type=loss_type))
    _, moved = train(t)
    assert moved


def test_kl_to_a_reference_model(tmp_path):
    """beta > 0: TRL loads a reference model from the model's folder and logs the KL at every step."""
    folder = tmp_path / "model"
    build_model(build_tokenizer(), 0).save_pretrained(folder)
    t = trainer(config(tmp_path, max_steps=STEPS, beta=0.1), model=str(folder))
    steps, moved = train(t)
    assert t.ref_model is not None and moved
    assert all("kl" in h and math.isfinite(h["kl"]) for h in steps), steps


@pytest.mark.parametrize("gradient_checkpointing", [False, True], ids=["peft", "peft_gradient_checkpointing"])
def test_peft_trains_the_adapter_only(tmp_path, gradient_checkpointing):
    from peft import LoraConfig

    t = trainer(config(tmp_path, max_steps=STEPS, gradient_checkpointing=gradient_checkpointing),
                peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    _, moved = train(t)
    assert moved and all("lora_" in n for n in moved), sorted(moved)


def test_several_weighted_reward_functions(tmp_path):
    """A second, non-binary reward with weights: the accuracy (accuracy_reward_index) drives the anchor."""
    def brevity(completions, **kwargs):
        return [1.0 / (1 + len(c[0]["content"])) for c in completions]

    t = trainer(config(tmp_path, max_steps=STEPS, accuracy_reward_index=0, reward_weights=[1.0, 0.5]),
                reward_funcs=[accuracy, brevity])
    steps, moved = train(t)
    assert moved
    for entry, g in zip(steps, t.generations, strict=True):
        assert entry["hadw/batch_acc"] == pytest.approx(float(g.rewards[:, 0].mean()))
        assert entry["rewards/brevity/mean"] == pytest.approx(float(g.rewards[:, 1].mean()))


def test_standard_prompts(tmp_path):
    """Plain-text prompts (the toy data is conversational: the other tests), scored on the completion's text."""
    def accuracy_text(completions, allowed, **kwargs):
        return [compute_score("toy", c, a) for c, a in zip(completions, allowed)]

    rows = [{"prompt": r["prompt"][-1]["content"], "allowed": r["allowed"]} for r in toy_dataset()]
    t = trainer(config(tmp_path, max_steps=STEPS), reward_funcs=accuracy_text, train_dataset=Dataset.from_list(rows))
    _, moved = train(t)
    assert moved


def test_evaluation_previews_the_anchor_and_leaves_it(tmp_path):
    """Evaluation at every step: its hadw/* metrics are the anchor as training left it (Eq. 12: C_t⁻ = C_{t-1}⁺),
    from a copy; the training steps advance it once each, as without evaluation."""
    t = trainer(config(tmp_path, max_steps=STEPS, eval_strategy="steps", eval_steps=1,
                       per_device_eval_batch_size=BATCH), eval_dataset=toy_dataset(8))
    train(t)
    evals = [h for h in t.state.log_history if "eval_hadw/anchor_prior" in h]
    assert len(evals) == STEPS, t.state.log_history
    for entry, g in zip(evals, t.generations, strict=True):
        assert entry["eval_hadw/anchor_prior"] == AnchorState.from_dict(g.anchor).view().posterior
    assert t.hadw_anchor.state.to_dict() == t.generations[-1].anchor  # as the last training batch left it

"""``--padding_free true`` / ``--packing true``: swift packs a micro-batch's completions into one row, which
needs flash-attn, so it cannot train on CPU. What the adapter reads of that batch can be shown: swift 4.6's own
template packs the completions (its ``data_collator`` in padding-free mode) and its own collate builds the micro-batch
``_compute_advantages`` receives; swift pads the completion mask back to one row per completion, so the adapter's loss
tokens per completion (``_loss_tokens``) equal those of the unpacked batch, in order, and sum to what swift's
``num_items_in_batch`` counts. Swift 4.6's collate only: the oldest release's environment leaves this file out (4.3
packs inside ``_prepare_batch_inputs`` and pads the mask back the same way)."""

from types import SimpleNamespace

import torch
from swift.model import get_processor
from swift.rl_core.data import GRPOSample
from swift.rlhf_trainers import GRPOTrainer
from swift.rlhf_trainers.utils import collate_to_grpo_micro_batch, encode_sample
from swift.template import get_template

from verl_hadw.swift.grpo_trainer import HadwSwiftGRPOTrainer

ROWS = [("hi", "ab"), ("hello there", "abcd"), ("x", "q"), ("a longer prompt than the others", "xyz")]


def micro_batch(assets, padding_free: bool) -> dict:
    """The micro-batch dict swift's ``_prepare_batch_inputs`` builds for ``ROWS`` (before the log-probs)."""
    template = get_template(get_processor(assets["model"], model_type="qwen2"), template_type="chatml",
                            padding_free=padding_free)
    template.set_mode("train")
    samples = []
    for prompt, completion in ROWS:
        sample = GRPOSample(messages=[{"role": "user", "content": prompt},
                                      {"role": "assistant", "content": completion}])
        sample.encoded = encode_sample(sample, template)
        sample.encoded.pop("_extra_kwargs", None)
        samples.append(sample)
    model_inputs, grpo_batch = collate_to_grpo_micro_batch(samples, template, device=torch.device("cpu"),
                                                           use_logits_to_keep=True)
    return {"model_inputs": model_inputs, "grpo_batch": grpo_batch}


def loss_tokens(batches: list[dict]) -> torch.Tensor:
    """The adapter's ``_loss_tokens`` on one process (swift's own gather)."""
    trainer = SimpleNamespace(accelerator=SimpleNamespace(device=torch.device("cpu")))
    trainer._gather_and_flatten = lambda *args, **kwargs: GRPOTrainer._gather_and_flatten(trainer, *args, **kwargs)
    return HadwSwiftGRPOTrainer._loss_tokens(trainer, batches)


def test_a_packed_micro_batch_gives_each_completion_its_loss_tokens(assets):
    packed, unpacked = micro_batch(assets, padding_free=True), micro_batch(assets, padding_free=False)
    assert packed["model_inputs"]["input_ids"].shape[0] == 1  # one packed row
    assert unpacked["model_inputs"]["input_ids"].shape[0] == len(ROWS)
    tokens = loss_tokens([packed])
    assert tokens.tolist() == loss_tokens([unpacked]).tolist() == [2.0, 4.0, 1.0, 3.0]  # one per completion, in order
    assert tokens.sum() == packed["grpo_batch"].completion_mask.sum()  # what num_items_in_batch sums

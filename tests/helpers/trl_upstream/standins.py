"""Local stand-ins for the Hub models and datasets TRL's ``tests/test_grpo_trainer.py`` names (no Hub here).

``build(root)`` writes a Hugging Face cache under ``root/hub``: one ``models--trl-internal-testing--<name>`` entry per
stand-in (``refs/main`` and a snapshot holding ``config.json``, the weights and a tokenizer), so that with
``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE=root/hub`` every ``from_pretrained("trl-internal-testing/...")`` (the test's,
TRL's and transformers' own) loads it unchanged. The models are random and tiny (2 layers, hidden 32) of the same
architecture as the Hub's; the tokenizer is byte-level (every byte one token, ChatML specials), so any text encodes.
Vision-language models have no stand-in: the tests that name one are skipped, the same way under both trainers.

``load_dataset`` replaces ``datasets.load_dataset`` in the test module for ``trl-internal-testing/zen``: the Zen of
Python (``import this``), 17 training and 2 test lines, in the two configs the tests use (``standard_prompt_only``:
a ``prompt`` string; ``conversational_prompt_only``: a ``prompt`` list of one user message), as the Hub's.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|finetune_right_pad_id|>"]
SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=512, head_dim=8)
MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, n_routed_experts=4, moe_intermediate_size=32,
           n_shared_experts=1, first_k_dense_replace=0, decoder_sparse_step=1, mlp_only_layers=[])
# Hub id (without "trl-internal-testing/") -> (model_type, head, extra config)
MODELS = {
    "tiny-Qwen2ForCausalLM-2.5": ("qwen2", "causal", {}),
    "tiny-Qwen2ForSequenceClassification-2.5": ("qwen2", "seqcls", {}),
    "tiny-Qwen3ForCausalLM": ("qwen3", "causal", {}),
    "tiny-Qwen3ForSequenceClassification": ("qwen3", "seqcls", {}),
    "tiny-Qwen3MoeForCausalLM": ("qwen3_moe", "causal", MOE),
    "tiny-LlamaForCausalLM-3.2": ("llama", "causal", {}),
    "tiny-LlamaForSequenceClassification-3.2": ("llama", "seqcls", {}),
    "tiny-MistralForCausalLM-0.2": ("mistral", "causal", {}),
    "tiny-Gemma2ForCausalLM": ("gemma2", "causal", {}),
    "tiny-Cohere2ForCausalLM": ("cohere2", "causal", {}),
    "tiny-GptOssForCausalLM": ("gpt_oss", "causal", MOE),
    "tiny-Glm4MoeForCausalLM": ("glm4_moe", "causal", MOE),
}
ORG = "trl-internal-testing"
REVISION = "0" * 40
ZEN_SPLITS = {"train": 17, "test": 2}


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {tok: i for i, tok in enumerate(SPECIALS + alphabet)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                        additional_special_tokens=["<|im_start|>", "<|finetune_right_pad_id|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(model_type: str, head: str, extra: dict, tokenizer):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type)
    values = {**SMALL, **extra, "vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
              "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.pad_token_id}
    for key, value in values.items():
        if hasattr(config, key) or key in ("vocab_size", "pad_token_id", "eos_token_id", "bos_token_id"):
            setattr(config, key, value)
    if getattr(config, "layer_types", None) is not None:  # per-layer attention kinds: as many as the layers
        kinds = config.layer_types
        config.layer_types = [kinds[i % len(kinds)] for i in range(SMALL["num_hidden_layers"])]
    if head == "seqcls":
        config.num_labels = 1
        return AutoModelForSequenceClassification.from_config(config)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def zen_lines() -> list[str]:
    import this  # noqa: F401  (prints the Zen once; its text is the module's rot13 string)

    text = codecs.decode(this.s, "rot13")
    return [line for line in text.splitlines()[2:] if line.strip()]


def build(root: str | os.PathLike) -> dict:
    """Write the stand-ins under ``root`` (once: a ``done.json`` marks a complete build). Returns its record."""
    root = Path(root)
    done = root / "done.json"
    if done.exists():
        return json.loads(done.read_text())
    if root.exists():
        shutil.rmtree(root)
    hub = root / "hub"
    tokenizer = build_tokenizer()
    built, failed = [], {}
    for name, (model_type, head, extra) in MODELS.items():
        entry = hub / f"models--{ORG}--{name}"
        snapshot = entry / "snapshots" / REVISION
        try:
            model = build_model(model_type, head, extra, tokenizer)
        except Exception as exc:  # an architecture this transformers cannot build small: no stand-in
            failed[name] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        model.save_pretrained(snapshot)
        tokenizer.save_pretrained(snapshot)
        (entry / "refs").mkdir(parents=True, exist_ok=True)
        (entry / "refs" / "main").write_text(REVISION)
        built.append(f"{ORG}/{name}")
    lines = zen_lines()
    data = root / "zen"
    data.mkdir(parents=True)
    start = 0
    for split, count in ZEN_SPLITS.items():
        (data / f"{split}.json").write_text(json.dumps(lines[start:start + count]))
        start += count
    record = {"models": built, "failed": failed, "datasets": [f"{ORG}/zen"]}
    done.write_text(json.dumps(record, indent=1))
    return record


def load_dataset_from(root: str | os.PathLike):
    """A ``load_dataset`` for the stand-in datasets under ``root`` (``path``, ``name``, ``split``, ``streaming``)."""
    from datasets import Dataset, DatasetDict, IterableDatasetDict

    root = Path(root)

    def load_dataset(path, name=None, split=None, streaming=False, **kwargs):
        if path != f"{ORG}/zen" or name not in ("standard_prompt_only", "conversational_prompt_only"):
            raise FileNotFoundError(f"no local stand-in for the dataset {path!r} ({name!r}); this harness has none")

        def one(s):
            lines = json.loads((root / "zen" / f"{s}.json").read_text())
            if name == "standard_prompt_only":
                rows = {"prompt": lines}
            else:
                rows = {"prompt": [[{"role": "user", "content": line}] for line in lines]}
            ds = Dataset.from_dict(rows)
            return ds.to_iterable_dataset() if streaming else ds

        if split is not None:
            return one(split)
        splits = {s: one(s) for s in ZEN_SPLITS}
        return IterableDatasetDict(splits) if streaming else DatasetDict(splits)

    return load_dataset


if __name__ == "__main__":
    import sys

    print(json.dumps(build(sys.argv[1]), indent=1))

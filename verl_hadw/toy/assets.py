"""Build the CPU demo's assets locally: tokenizer, tiny random model and verl parquet (about 1 MB, seconds).

``python -m verl_hadw.toy.assets OUT_DIR`` writes ``OUT_DIR/model`` (a ``save_pretrained`` Qwen2 causal LM with its
tokenizer), ``OUT_DIR/data/{train,test}.parquet`` and ``OUT_DIR/task.py`` (the reward function verl loads by path).
Deterministic for a seed; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import string

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHARS = list(string.digits + string.ascii_lowercase + " #-\n.,:?!")
# the task rows' version (2: four balanced tiers; 3: test prompts numbered after the training ones);
# launch.ensure_assets rebuilds asset folders of another version
VERSION = 3


def _byte_symbol(char: str) -> str:
    """The byte-level BPE symbol of an ASCII character (GPT-2 / Qwen2 mapping: ' ' -> 'Ġ', '\n' -> 'Ċ')."""
    code = ord(char)
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if code in printable:
        return char
    return chr(256 + sorted(set(range(256)) - set(printable)).index(code))


def build_tokenizer(chars: str | list[str] = CHARS, chat_template: str = CHAT_TEMPLATE):
    """A byte-level BPE tokenizer without merges (one token per character of ``chars``) and ChatML specials.

    Byte-level like Qwen2's, so ``AutoTokenizer`` reloads it identically even though the model directory
    says ``qwen2`` (transformers then rebuilds a Qwen2 tokenizer from this vocabulary).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + [_byte_symbol(c) for c in chars])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def build_model(tokenizer, seed: int, hidden: int = 64, layers: int = 2):
    """A Qwen2 causal LM of random weights (seeded), its vocabulary the tokenizer's."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),  # 48: no unused logits, so a random policy is uniform over real tokens
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build(out_dir: str, seed: int = 0, train_rows: int = 256, test_rows: int = 32) -> dict:
    """Write model, tokenizer and parquet under ``out_dir``; returns the paths."""
    import pandas as pd

    from verl_hadw.toy.task import make_rows

    model_dir = os.path.join(out_dir, "model")
    data_dir = os.path.join(out_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    paths = {"model": model_dir}
    for split, n, split_seed, first in (("train", train_rows, seed, 0), ("test", test_rows, seed + 1, train_rows)):
        paths[split] = os.path.join(data_dir, f"{split}.parquet")
        pd.DataFrame(make_rows(n, split_seed, split, first)).to_parquet(paths[split])
    paths["reward"] = os.path.join(out_dir, "task.py")  # verl loads compute_score from this file
    shutil.copyfile(os.path.join(os.path.dirname(__file__), "task.py"), paths["reward"])
    with open(os.path.join(out_dir, "assets.json"), "w") as f:
        json.dump({"version": VERSION, "seed": seed, "test_rows": test_rows, **paths}, f, indent=1)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-rows", type=int, default=32, help="held-out prompts (a quarter per tier)")
    args = parser.parse_args()
    for name, path in build(args.out_dir, args.seed, test_rows=args.test_rows).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()

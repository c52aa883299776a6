"""The toy tasks' models: a character-level byte-level BPE tokenizer with ChatML specials, and a Qwen2 of random
weights (seeded) over its vocabulary. Built locally; nothing is downloaded."""

from __future__ import annotations

import string

__all__ = ["CHAT_TEMPLATE", "SPECIALS", "CHARS", "build_tokenizer", "build_model"]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHARS = list(string.digits + string.ascii_lowercase + " #-\n.,:?!")


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
        model_input_names=["input_ids", "attention_mask"],  # Qwen2's: no token_type_ids, which generate() refuses
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

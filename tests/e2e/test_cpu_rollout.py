"""The hfcpu server's decode loop against ``transformers``' own ``generate`` (no Ray, a tiny random Qwen2).

``verl_hadw.cpu.rollout.decode`` replaced ``model.generate`` in the server for speed; it must draw the same
tokens from the same RNG state and report the same log-probs, bit for bit, so runs made before and after the
change agree.
"""

import pytest
import torch

from verl_hadw.cpu.rollout import decode, reference_generate
from verl_hadw.toy.model import build_model, build_tokenizer


@pytest.fixture(scope="module")
def model():
    tokenizer = build_tokenizer()
    return build_model(tokenizer, seed=3).eval()


@pytest.mark.parametrize(
    ("temperature", "top_p", "top_k"),
    [(1.0, 1.0, 0), *(pytest.param(*s, marks=pytest.mark.slow) for s in [(1.0, 1.0, -1), (0.7, 0.9, 5), (1.3, 0.5, 0),
                                                                          (0.0, 1.0, 0)])],
    ids=["plain", "top_k-off-vllm-style", "temperature-top_k-top_p", "hot-top_p", "greedy"],  # plain: the quick loop
)
def test_decode_draws_what_generate_draws(model, temperature, top_p, top_k):
    vocab = model.config.vocab_size
    rng = torch.Generator().manual_seed(11)
    stopped_early = 0
    for draw in range(40):
        prompt = torch.randint(3, vocab, (int(torch.randint(2, 12, (1,), generator=rng)),), generator=rng).tolist()
        torch.manual_seed(1000 + draw)
        want = reference_generate(model, prompt, 8, temperature, top_p, top_k)
        torch.manual_seed(1000 + draw)
        got = decode(model, prompt, 8, temperature=temperature, top_p=top_p, top_k=top_k, logprobs=True)
        assert got == want, f"draw {draw}: decode {got} != generate {want}"
        stopped_early += len(got[0]) < 8
    if (temperature, top_p, top_k) == (1.0, 1.0, 0):  # some draws end at <|im_end|>: the stop rule is compared too
        assert stopped_early > 0


def test_decode_leaves_log_probs_out_unless_asked(model):
    torch.manual_seed(0)
    tokens, log_probs = decode(model, [5, 6, 7], 4)
    assert log_probs is None and 1 <= len(tokens) <= 4


def test_top_k_minus_one_samples_the_whole_vocabulary():
    """verl (vLLM's convention) sends top_k=-1 for "no top-k". transformers' generate, given top_k=None, applies
    its default top_k=50 instead, so the old server sampled only the 50 likeliest tokens of a larger vocabulary
    while reporting log-probs of the full distribution. decode draws from all of it."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=None)
    model = Qwen2ForCausalLM(config).eval()  # near-uniform over 400 tokens
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[1, 2, 3]])).logits[0, -1]
    top50 = set(logits.topk(50).indices.tolist())
    torch.manual_seed(1)
    drawn = [decode(model, [1, 2, 3], 1, top_k=-1)[0][0] for _ in range(200)]
    assert len(set(drawn) - top50) > 100  # about 7/8 of the draws fall outside the top 50

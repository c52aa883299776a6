"""The hfcpu server's decode loop against transformers' ``generate``, side by side on the demo's model.

Both sample the same seeded responses (checked here draw by draw: tokens and log-probs) to the demo's
response length, over the demo's training prompts; the two are timed in alternating rounds in one process.
Run: ``bash scripts/install_cpu.sh && .venv/bin/python benchmarks/bench_hfcpu_decode.py [--draws N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=256, help="responses per timed pass")
    parser.add_argument("--rounds", type=int, default=3, help="alternating passes of each")
    parser.add_argument("--response-length", type=int, default=4, help="the demo's data.max_response_length")
    args = parser.parse_args()

    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl_hadw.cpu.platform import pin_threads
    from verl_hadw.cpu.rollout import decode, reference_generate
    from verl_hadw.toy.launch import ensure_assets

    pin_threads()  # the server's one thread
    assets = os.path.join(tempfile.mkdtemp(prefix="bench_hfcpu_"), "assets")
    ensure_assets(assets)
    model = AutoModelForCausalLM.from_pretrained(os.path.join(assets, "model"), attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(assets, "model"))
    rows = pd.read_parquet(os.path.join(assets, "data", "train.parquet"))["prompt"]
    prompts = [list(tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True,
                                                  return_dict=True)["input_ids"]) for messages in rows]
    n = args.response_length

    def run_decode(prompt):
        return decode(model, prompt, n, temperature=1.0, top_p=1.0, top_k=-1, logprobs=True)

    for draw in range(args.draws):  # the same draws, bit for bit
        prompt = prompts[draw % len(prompts)]
        torch.manual_seed(draw)
        want = reference_generate(model, prompt, n)
        torch.manual_seed(draw)
        if run_decode(prompt) != want:
            raise SystemExit(f"draw {draw}: decode and generate differ")

    passes = {"generate": lambda p: reference_generate(model, p, n), "decode": run_decode}
    times = {name: [] for name in passes}
    for round_ in range(args.rounds):
        for name in passes if round_ % 2 == 0 else list(passes)[::-1]:
            start = time.perf_counter()
            for draw in range(args.draws):
                torch.manual_seed(draw)
                passes[name](prompts[draw % len(prompts)])
            times[name].append((time.perf_counter() - start) / args.draws * 1e3)
    base = statistics.median(times["generate"])
    print(f"{args.draws} seeded draws of up to {n} tokens, identical tokens and log-probs; "
          f"median of {args.rounds} rounds, ms per response")
    for name in passes:
        ms = statistics.median(times[name])
        print(f"{name:>9} {ms:7.2f} ms  x generate {ms / base:5.2f}")


if __name__ == "__main__":
    main()

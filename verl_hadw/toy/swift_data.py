"""The toy task for ms-swift: the tiny local model and the prompts as swift's JSONL (``messages`` and the allowed
characters as ``solution``, which the reward function reads). Nothing is downloaded.

    python -m verl_hadw.toy.swift_data OUT_DIR      # OUT_DIR/model, OUT_DIR/train.jsonl
"""

from __future__ import annotations

import argparse
import json
import os

from verl_hadw.toy.model import build_model, build_tokenizer
from verl_hadw.toy.task import make_rows

__all__ = ["build"]


def build(out_dir: str, seed: int = 0, rows: int = 64) -> dict[str, str]:
    """Write ``out_dir/model`` (tokenizer beside it) and ``out_dir/train.jsonl``; returns their paths."""
    model_dir, data = os.path.join(out_dir, "model"), os.path.join(out_dir, "train.jsonl")
    tokenizer = build_tokenizer()
    build_model(tokenizer, seed).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    with open(data, "w", encoding="utf-8") as f:
        for row in make_rows(rows, seed, "train"):
            f.write(json.dumps({"messages": row["prompt"], "solution": row["reward_model"]["ground_truth"]}) + "\n")
    return {"model": model_dir, "dataset": data}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, path in build(args.out_dir, args.seed).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()

"""The toy task for Axolotl: the tiny local model, the prompts as JSONL (``prompt``, ``solution``), the reward
(``accuracy``, the YAML's ``trl.reward_funcs``) and the documented YAML (docs/axolotl.md). Nothing is downloaded.

    python -m verl_hadw.toy.axolotl_data OUT_DIR      # OUT_DIR/model, OUT_DIR/train.jsonl, OUT_DIR/hadw.yml
"""

from __future__ import annotations

import argparse
import json
import os

from verl_hadw.toy.model import build_model, build_tokenizer
from verl_hadw.toy.task import compute_score, make_rows

__all__ = ["YAML", "accuracy", "build"]

YAML = """\
base_model: {out}/model
plugins:
  - verl_hadw.axolotl.HadwPlugin
rl: grpo
hadw_adv_estimator: hadw
hadw_lambda_scale: 1.3
trl:
  num_generations: 4
  max_completion_length: 4
  reward_funcs:
    - verl_hadw.toy.axolotl_data.accuracy
datasets:
  - path: {out}/train.jsonl
    ds_type: json
    split: train
dataset_prepared_path: {out}/prepared
micro_batch_size: 8
gradient_accumulation_steps: 1
max_steps: 3
learning_rate: 0.01
optimizer: adamw_torch
lr_scheduler: constant
sequence_len: 64
bf16: false
fp16: false
tf32: false
seed: 0
logging_steps: 1
save_strategy: steps
save_steps: 1
output_dir: {out}/hadw
"""


def accuracy(completions, solution, **kwargs) -> list[float]:
    """1.0 where the completion's first non-blank character is one of the prompt's allowed characters."""
    return [compute_score("toy", c[0]["content"], s) for c, s in zip(completions, solution)]


def build(out_dir: str, seed: int = 0, rows: int = 64) -> dict[str, str]:
    """Write ``out_dir/model`` (tokenizer beside it), ``out_dir/train.jsonl`` and ``out_dir/hadw.yml``."""
    out_dir = os.path.abspath(out_dir)
    paths = {name: os.path.join(out_dir, name) for name in ("model", "train.jsonl", "hadw.yml")}
    tokenizer = build_tokenizer()
    build_model(tokenizer, seed).save_pretrained(paths["model"])
    tokenizer.save_pretrained(paths["model"])
    with open(paths["train.jsonl"], "w", encoding="utf-8") as f:
        for row in make_rows(rows, seed, "train"):
            f.write(json.dumps({"prompt": row["prompt"], "solution": row["reward_model"]["ground_truth"]}) + "\n")
    with open(paths["hadw.yml"], "w", encoding="utf-8") as f:
        f.write(YAML.format(out=out_dir))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    args = parser.parse_args()
    for name, path in build(args.out_dir).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()

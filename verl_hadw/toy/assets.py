"""Build the CPU demo's assets locally: tokenizer, model and verl parquet (seconds; the arithmetic model a minute).

``python -m verl_hadw.toy.assets OUT_DIR [--task arith]`` writes ``OUT_DIR/model`` (a Qwen2 causal LM with its
tokenizer: the toy's tiny random one, or ``toy.arith_model``'s pretrained one), ``OUT_DIR/data/{train,test}.parquet``
and ``OUT_DIR/task.py`` (the reward function verl loads by path). Deterministic for a seed; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from verl_hadw.toy import TASKS, task_module
from verl_hadw.toy.model import build_model, build_tokenizer

# the task rows' version (2: four balanced tiers; 3: test prompts numbered after the training ones);
# launch.ensure_assets rebuilds asset folders of another version
VERSION = 3


def arith_tokenizer():
    """The arithmetic model's tokenizer as verl's agent loop needs it. verl builds a Qwen2 model's ChatML tokens with a
    one-token newline (inserted only between turns), so it gets one after the model's 16 tokens: a single-turn
    problem never reads or writes it."""
    from verl_hadw.toy import arith
    from verl_hadw.toy.arith_model import CHAT_TEMPLATE

    return build_tokenizer(arith.CHARS + "\n", CHAT_TEMPLATE)


TRAIN_ROWS = {"toy": 256, "arith": 4096}  # the arithmetic rows as the TRL study's (research.trl_study.arith_plan)


def build(out_dir: str, seed: int = 0, train_rows: int | None = None, test_rows: int = 32, task: str = "toy") -> dict:
    """Write model, tokenizer and parquet of ``task`` under ``out_dir``; returns the paths. The arithmetic model is
    pretrained there (about a minute) and its weights checked against their recorded sha256."""
    import pandas as pd

    rows_of = task_module(task)
    train_rows = TRAIN_ROWS[task] if train_rows is None else train_rows
    model_dir = os.path.join(out_dir, "model")
    data_dir = os.path.join(out_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    if task == "arith":
        from pathlib import Path

        from verl_hadw.toy.arith_model import ensure_model

        ensure_model(Path(model_dir))
        arith_tokenizer().save_pretrained(model_dir)
    else:
        tokenizer = build_tokenizer()
        build_model(tokenizer, seed).save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
    paths = {"model": model_dir}
    # the held-out rows are numbered after the training rows; the arithmetic ones are each tier's test problems in
    # a fixed order, the TRL study's held-out set (train_rows a multiple of 4 keeps every tier's rows in place)
    for split, n, split_seed, first in (("train", train_rows, seed, 0), ("test", test_rows, seed + 1, train_rows)):
        paths[split] = os.path.join(data_dir, f"{split}.parquet")
        pd.DataFrame(rows_of.make_rows(n, split_seed, split, first)).to_parquet(paths[split])
    paths["reward"] = os.path.join(out_dir, "task.py")  # verl loads compute_score from this file
    shutil.copyfile(rows_of.__file__, paths["reward"])
    with open(os.path.join(out_dir, "assets.json"), "w") as f:
        json.dump({"version": VERSION, "task": task, "seed": seed, "test_rows": test_rows, **paths}, f, indent=1)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-rows", type=int, default=32, help="held-out prompts (a quarter per tier)")
    parser.add_argument("--task", choices=TASKS, default="toy")
    args = parser.parse_args()
    for name, path in build(args.out_dir, args.seed, test_rows=args.test_rows, task=args.task).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()

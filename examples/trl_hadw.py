"""HA-DW (or DGPO) in TRL's GRPOTrainer on a tiny model built locally: no hub, no GPU, about 15 s on a CPU.

    python examples/trl_hadw.py [--estimator dgpo] [--base dgpo]

Each step prints the batch's reward and HA-DW's anchor: its prior C⁻, its posterior C⁺ and the mean weight Φ."""

from __future__ import annotations

import argparse
import tempfile

import torch
from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback

from verl_hadw.toy.assets import build_model, build_tokenizer
from verl_hadw.toy.task import compute_score, make_rows
from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer


def accuracy(completions, allowed, **kwargs) -> list[float]:
    """1.0 when the completion's first character is one of the prompt's allowed characters, else 0.0."""
    return [compute_score("toy", completion[0]["content"], chars) for completion, chars in zip(completions, allowed)]


class PrintSteps(TrainerCallback):
    """One line per logged step: the reward and, for HA-DW, the anchor."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return
        line = f"step {state.global_step:3d}  reward {logs['reward']:.3f}"
        if "hadw/anchor_prior" in logs:
            line += (f"  anchor C- {logs['hadw/anchor_prior']:.3f} -> C+ {logs['hadw/anchor_posterior']:.3f}"
                     f"  mean phi {logs['hadw/phi_mean']:.3f}")
        if "dgpo/valid_groups" in logs:
            line += f"  valid groups {logs['dgpo/valid_groups']:.0f}"
        print(line, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--estimator", choices=("hadw", "dgpo"), default="hadw")
    parser.add_argument("--base", choices=("grpo", "dgpo"), default="grpo", help="HA-DW's base advantage")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--output-dir", default=None, help="checkpoints go here (default: a temporary folder)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # a 60k-parameter model: more threads only contend

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed=0)
    rows = make_rows(64, seed=0, split="train")
    dataset = Dataset.from_list([{"prompt": r["prompt"], "allowed": r["reward_model"]["ground_truth"]} for r in rows])
    with tempfile.TemporaryDirectory() as scratch:
        config = HadwGRPOConfig(
            output_dir=args.output_dir or scratch,
            adv_estimator=args.estimator,
            hadw_base=args.base,
            hadw_anchor_eta=16.0,  # the verl default, spelled out: every verl option is a field here
            per_device_train_batch_size=16,  # 4 prompts x 4 completions
            num_generations=4,
            max_completion_length=4,
            max_steps=args.steps,
            learning_rate=1e-2,
            logging_steps=1,
            save_strategy="steps",
            save_steps=args.steps,  # checkpoint-N holds verl_hadw_anchor.json beside TRL's files
            report_to=[],
            use_cpu=True,
            seed=0,
            disable_tqdm=True,
            log_level="warning",
        )
        trainer = HadwGRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=accuracy, args=config,
                                  train_dataset=dataset, callbacks=[PrintSteps()])
        trainer.remove_callback(PrinterCallback)  # TRL's full log dict per step; PrintSteps prints a line
        trainer.train()
        if trainer.hadw_anchor is not None:
            state = trainer.hadw_anchor.state
            where = args.output_dir or "a temporary folder (--output-dir keeps it)"
            print(f"anchor after {state.committed_steps + 1} generation batches: C+ {state.view().posterior:.3f}, "
                  f"saved with checkpoint-{args.steps} in {where} as verl_hadw_anchor.json")


if __name__ == "__main__":
    main()

"""One run of the TRL study (``research.trl_study``), in a process of its own:
``python -m verl_hadw.research.trl_study_run RUN_DIR/spec.json``. It trains the toy task with TRL's own ``GRPOTrainer``
or ``HadwGRPOTrainer`` and writes ``steps.jsonl``, ``val.jsonl`` and, last, ``DONE`` into RUN_DIR; a rerun of a spec
reproduces its files bit for bit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

__all__ = ["train", "validate", "main"]

VAL_SEED = 1_000_003  # the validation generator's seed: VAL_SEED + 10,000 × the run's seed + the step


def _rows(n: int, seed: int, split: str, first: int = 0) -> list[dict]:
    from verl_hadw.toy.task import make_rows

    return [{"prompt": r["prompt"], "allowed": r["reward_model"]["ground_truth"], "tier": r["extra_info"]["tier"],
             "index": r["extra_info"]["index"]} for r in make_rows(n, seed, split, first=first)]


def accuracy(completions, allowed, **kwargs) -> list[float]:
    """The toy task's verifiable reward (its scorer): 1.0 if the completion starts with an allowed character."""
    from verl_hadw.toy.task import compute_score

    return [compute_score("toy", c[0]["content"], a) for c, a in zip(completions, allowed)]


def validate(model, tokenizer, rows: list[dict], n: int, seed: int, max_new_tokens: int) -> dict[str, float]:
    """Held-out accuracy per tier: ``n`` answers sampled at temperature 1 per prompt, from a generator of its own."""
    import torch

    from verl_hadw.toy.task import TIERS, compute_score

    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
        enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left")
        out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=n,
                             max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
    model.train(was_training)
    answers = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    scores = {tier: [] for tier in TIERS}
    for i, answer in enumerate(answers):
        row = rows[i // n]
        scores[row["tier"]].append(compute_score("toy", answer, row["allowed"]))
    return {tier: sum(v) / len(v) for tier, v in scores.items() if v}


def _trainer_classes(method: str):
    """(config class, trainer class, config fields of the method) of ``method``."""
    from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer

    ours = {"hadw": {"adv_estimator": "hadw"}, "dgpo": {"adv_estimator": "dgpo"},
            "hadw_dgpo": {"adv_estimator": "hadw", "hadw_base": "dgpo"}}
    if method in ours:
        return HadwGRPOConfig, HadwGRPOTrainer, ours[method]
    if method in ("grpo", "grpo_lr_phi"):  # the baseline: TRL's own GRPO, unchanged
        from trl import GRPOConfig, GRPOTrainer

        return GRPOConfig, GRPOTrainer, {}
    raise ValueError(f"unknown study method {method!r}")


def train(spec: dict, run_dir: Path) -> None:
    """Train the run of ``spec`` and write its files into ``run_dir`` (``DONE`` last)."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from verl_hadw.toy.assets import build_model, build_tokenizer
    from verl_hadw.toy.task import TIERS

    torch.set_num_threads(1)
    start = time.time()
    seed, steps, val_every = spec["seed"], spec["steps"], spec["val_every"]
    config_class, trainer_class, fields = _trainer_classes(spec["method"])
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed)  # the seed's initial weights, the same for every method
    held_out = _rows(spec["val_prompts"], 0, "test", first=100_000)  # the same held-out prompts for every run
    dataset = Dataset.from_list(_rows(spec["train_rows"], 0, "train"))
    args = config_class(
        output_dir=str(run_dir / "trainer"), per_device_train_batch_size=spec["prompts"] * spec["group"],
        num_generations=spec["group"], max_completion_length=spec["max_completion_length"], max_steps=steps,
        learning_rate=spec["lr"], logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=seed,
        data_seed=seed, disable_tqdm=True, temperature=1.0, **fields)
    tier_index = {tier: i for i, tier in enumerate(TIERS)}
    steps_out, val_out = {}, []

    class Recorder(trainer_class):
        """The trainer, recording each training generation batch's advantage mass per tier (Σ|A|)."""

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            if self.model.training:
                tiers = torch.tensor([tier_index[x["tier"]] for x in inputs])
                mass = torch.zeros(len(TIERS)).index_add_(0, tiers, output["advantages"].detach().abs().float())
                row = steps_out.setdefault(self.state.global_step + 1, {})
                row["mass"] = dict(zip(TIERS, mass.tolist()))
                row["prompts"] = [x["index"] for x in inputs[::spec["group"]]]  # the seed's prompt order
            return output

    class Validation(TrainerCallback):
        def _validate(self, step, model):
            accs = validate(model, tokenizer, held_out, spec["val_n"], VAL_SEED + 10_000 * seed + step,
                            spec["max_completion_length"])
            val_out.append({"step": step, **accs})

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self._validate(0, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % val_every == 0 or state.global_step == steps:
                self._validate(state.global_step, model)

        def on_log(self, args, state, control, logs=None, **kwargs):
            row = steps_out.setdefault(state.global_step, {})
            for key, name in (("reward", "reward"), ("hadw/phi_mean", "phi_mean")):
                if logs and key in logs:
                    row[name] = float(logs[key])

    trainer = Recorder(model=model, processing_class=tokenizer, reward_funcs=accuracy, args=args,
                       train_dataset=dataset, callbacks=[Validation()])
    trainer.train()
    with open(run_dir / "steps.jsonl", "w") as f:
        for step in sorted(s for s in steps_out if 1 <= s <= steps):
            f.write(json.dumps({"step": step, **steps_out[step]}) + "\n")
    with open(run_dir / "val.jsonl", "w") as f:
        for row in val_out:
            f.write(json.dumps(row) + "\n")
    (run_dir / "DONE").write_text(f"{time.time() - start:.1f} s\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m verl_hadw.research.trl_study_run RUN_DIR/spec.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0])
    train(json.loads(spec_path.read_text()), spec_path.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())

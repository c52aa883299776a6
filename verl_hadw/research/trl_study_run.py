"""One run of the TRL study (``research.trl_study``), in a process of its own:
``python -m verl_hadw.research.trl_study_run RUN_DIR/spec.json``. It trains the spec's task (the toy, or arithmetic
from the pretrained model) with TRL's own ``GRPOTrainer`` or ``HadwGRPOTrainer`` and writes ``steps.jsonl``,
``val.jsonl`` and, last, ``DONE`` into RUN_DIR; a rerun of a spec reproduces its files bit for bit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from verl_hadw.toy import task_module

__all__ = ["train", "validate", "main", "METHOD_FIELDS"]

VAL_SEED = 1_000_003  # the validation generator's seed: VAL_SEED + 10,000 × the run's seed + the step
# each method of ours as the config fields it sets (grpo and grpo_lr_phi: TRL's own trainer, unchanged)
METHOD_FIELDS = {
    "hadw": {"adv_estimator": "hadw"},
    "dgpo": {"adv_estimator": "dgpo"},
    "hadw_dgpo": {"adv_estimator": "hadw", "hadw_base": "dgpo"},
    # the authors' released code (docs/papers.md): difficulty from the raw reward, the anchor a moving average of
    # the last 10 batch rewards including the current one, λ_scale 1.5
    "hadw_authors": {"adv_estimator": "hadw", "hadw_difficulty_from": "reward", "hadw_anchor_mode": "moving_average",
                     "hadw_anchor_window": 10, "hadw_anchor_include_current": True, "hadw_lambda_scale": 1.5},
}


def _rows(task, n: int, seed: int, split: str, first: int = 0) -> list[dict]:
    return [{"prompt": r["prompt"], "answer": r["reward_model"]["ground_truth"], "tier": r["extra_info"]["tier"],
             "index": r["extra_info"]["index"]} for r in task.make_rows(n, seed, split, first=first)]


def _reward(task):
    """The task's verifiable reward (its scorer) as a TRL reward function."""
    def accuracy(completions, answer, **kwargs) -> list[float]:
        return [task.compute_score(None, c[0]["content"], a) for c, a in zip(completions, answer)]

    return accuracy


def validate(model, tokenizer, task, rows: list[dict], n: int, seed: int, max_new_tokens: int) -> dict[str, float]:
    """Held-out accuracy per tier: ``n`` answers sampled at temperature 1 per prompt, from a generator of its own."""
    import torch

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
    scores = {tier: [] for tier in task.TIERS}
    for i, answer in enumerate(answers):
        row = rows[i // n]
        scores[row["tier"]].append(task.compute_score(None, answer, row["answer"]))
    return {tier: sum(v) / len(v) for tier, v in scores.items() if v}


def _model(spec: dict, seed: int):
    """(tokenizer, model) a run starts from: the toy's random weights of the seed, or the pretrained arithmetic
    model (the same weights for every seed)."""
    from verl_hadw.toy.model import build_model, build_tokenizer

    if spec.get("task", "toy") == "arith":
        from transformers import AutoModelForCausalLM

        from verl_hadw.toy import arith
        from verl_hadw.toy.arith_model import CHAT_TEMPLATE

        return build_tokenizer(arith.CHARS, CHAT_TEMPLATE), AutoModelForCausalLM.from_pretrained(spec["model"])
    tokenizer = build_tokenizer()
    return tokenizer, build_model(tokenizer, seed)  # the seed's initial weights, the same for every method


def _trainer_classes(method: str):
    """(config class, trainer class, config fields of the method) of ``method``."""
    from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer

    if method in METHOD_FIELDS:
        return HadwGRPOConfig, HadwGRPOTrainer, METHOD_FIELDS[method]
    if method in ("grpo", "grpo_lr_phi"):  # the baseline: TRL's own GRPO, unchanged
        from trl import GRPOConfig, GRPOTrainer

        return GRPOConfig, GRPOTrainer, {}
    raise ValueError(f"unknown study method {method!r}")


def train(spec: dict, run_dir: Path) -> None:
    """Train the run of ``spec`` and write its files into ``run_dir`` (``DONE`` last)."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    torch.set_num_threads(1)
    start = time.time()
    seed, steps, val_every = spec["seed"], spec["steps"], spec["val_every"]
    task = task_module(spec.get("task", "toy"))
    config_class, trainer_class, fields = _trainer_classes(spec["method"])
    tokenizer, model = _model(spec, seed)
    held_out = _rows(task, spec["val_prompts"], 0, "test", first=100_000)  # the same held-out prompts for every run
    dataset = Dataset.from_list(_rows(task, spec["train_rows"], 0, "train"))
    args = config_class(
        output_dir=str(run_dir / "trainer"), per_device_train_batch_size=spec["prompts"] * spec["group"],
        num_generations=spec["group"], max_completion_length=spec["max_completion_length"], max_steps=steps,
        learning_rate=spec["lr"], logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, seed=seed,
        data_seed=seed, disable_tqdm=True, temperature=1.0, **fields)
    tiers = task.TIERS
    tier_index = {tier: i for i, tier in enumerate(tiers)}
    steps_out, val_out = {}, []

    class Recorder(trainer_class):
        """The trainer, recording each training generation batch's advantage mass per tier: Σ|A| (``mass``), and
        Σ A⁺ and Σ|A⁻| (``pos``, ``neg``: their ratio is 1 where every group's advantages sum to zero)."""

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            if self.model.training:
                index = torch.tensor([tier_index[x["tier"]] for x in inputs])
                advantages = output["advantages"].detach().float()
                row = steps_out.setdefault(self.state.global_step + 1, {})
                for name, values in (("mass", advantages.abs()), ("pos", advantages.clamp(min=0)),
                                     ("neg", (-advantages).clamp(min=0))):
                    row[name] = dict(zip(tiers, torch.zeros(len(tiers)).index_add_(0, index, values).tolist()))
                row["prompts"] = [x["index"] for x in inputs[::spec["group"]]]  # the seed's prompt order
            return output

    class Validation(TrainerCallback):
        def _validate(self, step, model):
            accs = validate(model, tokenizer, task, held_out, spec["val_n"], VAL_SEED + 10_000 * seed + step,
                            spec["max_completion_length"])
            val_out.append({"step": step, **accs})

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self._validate(0, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % val_every == 0 or state.global_step == steps:
                self._validate(state.global_step, model)

        def on_log(self, args, state, control, logs=None, **kwargs):
            row = steps_out.setdefault(state.global_step, {})
            for key, name in (("reward", "reward"), ("hadw/phi_mean", "phi_mean"), ("hadw/anchor_prior", "anchor"),
                              ("hadw/batch_acc", "batch_acc")):
                if logs and key in logs:
                    row[name] = float(logs[key])

    trainer = Recorder(model=model, processing_class=tokenizer, reward_funcs=_reward(task), args=args,
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

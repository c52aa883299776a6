"""The arithmetic task's starting model: a character-level Qwen2, pretrained on CPU to a graded competence.

``python -m verl_hadw.toy.arith_model OUT_DIR`` trains it (about a minute of one core), saves it with its
tokenizer, prints its held-out accuracy per tier at temperature 1 and checks the weights' sha256 against
``WEIGHTS_SHA256``. Deterministic: the same torch build on the same CPU gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

from verl_hadw.toy import arith

__all__ = ["RECIPE", "TARGETS", "QUICK_RECIPE", "WEIGHTS_SHA256", "pretrain", "held_out_accuracy", "ensure_model",
           "weights_sha256"]

# What the pretraining sees: the share of each tier's problems in its batches (training problems only), and how long
# it trains. Every ``check_every`` steps it grades its dev problems; it keeps the checkpoint whose dev accuracy is
# nearest the middle of ``TARGETS`` (tiers inside their range first): base models' graded competence on MATH levels.
RECIPE = {"seed": 0, "hidden": 128, "layers": 4, "steps": 700, "batch": 64, "lr": 2e-3, "check_every": 25,
          "mixture": {"easy": 0.42, "medium": 0.14, "hard": 0.22, "hardest": 0.22}}
TARGETS = {"easy": (0.85, 1.0), "medium": (0.5, 0.7), "hard": (0.2, 0.35), "hardest": (0.03, 0.10)}
# a stand-in for pipeline checks (--quick): right on a few easy problems, so that some groups are mixed
QUICK_RECIPE = {**RECIPE, "hidden": 32, "layers": 1, "steps": 200, "lr": 3e-3, "check_every": 200}
# model.safetensors of RECIPE, as torch 2.13.0 (CPU build) computes it on the AMD EPYC this project's CI runs on
WEIGHTS_SHA256 = "92cacc02ab0516b9ea6f4350155467539e3cfbb34ad94187349ab074f1baa461"
# A base model's prompt: the problem as plain text, the answer right after it, then the end of turn. No role names
# (they would triple the sequences' length and so the pretraining's cost).
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
WEIGHTS = "model.safetensors"


def _encode(tokenizer, question: str, answer: str | None = None) -> tuple[list[int], int]:
    """Token ids of the chat prompt (and the answer with its end of turn) and the prompt's length."""
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                           add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    n = len(ids)
    if answer is not None:
        ids = ids + tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return ids, n


def pretrain(out_dir: Path, recipe: dict = RECIPE, log=print):
    """Train the model of ``recipe`` on the training problems and save it with its tokenizer into ``out_dir``."""
    import torch

    from verl_hadw.toy.model import build_model, build_tokenizer

    torch.set_num_threads(1)
    tokenizer = build_tokenizer(arith.CHARS, CHAT_TEMPLATE)
    model = build_model(tokenizer, recipe["seed"], hidden=recipe["hidden"], layers=recipe["layers"])
    encoded = {tier: [_encode(tokenizer, q, a) for q, a in arith.problems(tier, "train")] for tier in arith.TIERS}
    rng = random.Random(recipe["seed"])
    tiers, shares = list(recipe["mixture"]), list(recipe["mixture"].values())
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], weight_decay=0.01)
    best = None  # (distance to the targets, step, weights)
    model.train()
    for step in range(1, recipe["steps"] + 1):
        batch = [rng.choice(encoded[tier]) for tier in rng.choices(tiers, shares, k=recipe["batch"])]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, n) in enumerate(batch):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            labels[row, n:len(ids)] = torch.tensor(ids[n:])  # the answer and its end of turn
            mask[row, :len(ids)] = 1
        for group in optimizer.param_groups:
            group["lr"] = recipe["lr"] * min(1.0, step / 100)  # warm-up
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % recipe["check_every"] == 0:
            dev = held_out_accuracy(model, tokenizer, n=4, seed=step, split="dev")
            key = _distance(dev)
            if best is None or key < best[0]:
                best = (key, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            log(f"arith pretraining: step {step} loss {loss.item():.4f} dev " +
                ", ".join(f"{t} {a:.2f}" for t, a in dev.items()))
    if best is not None:
        model.load_state_dict(best[2])
        log(f"arith pretraining: kept step {best[1]}")
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "recipe.json").write_text(json.dumps(recipe, indent=1, sort_keys=True))
    return model, tokenizer


def _distance(accuracy: dict[str, float]) -> tuple[int, float]:
    """(tiers outside their target range, summed distance to the ranges' middles): smaller is nearer ``TARGETS``."""
    outside = sum(not lo <= accuracy[t] <= hi for t, (lo, hi) in TARGETS.items())
    return outside, sum(abs(accuracy[t] - (lo + hi) / 2) for t, (lo, hi) in TARGETS.items())


def held_out_accuracy(model, tokenizer, n: int = 4, seed: int = 0, batch: int = 256,
                      split: str = "test") -> dict[str, float]:
    """Accuracy per tier over every problem of ``split`` (the held-out ones), ``n`` answers each sampled at
    temperature 1."""
    import torch

    scores = {}
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for tier in arith.TIERS:
            pairs = arith.problems(tier, split)
            right = 0
            for start in range(0, len(pairs), batch):
                chunk = pairs[start:start + batch]
                prompts = [_encode(tokenizer, q)[0] for q, _ in chunk]
                width = max(map(len, prompts))
                ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts])
                mask = (torch.arange(width) >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()
                out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0,
                                     top_p=1.0, num_return_sequences=n, max_new_tokens=6,
                                     pad_token_id=tokenizer.pad_token_id)
                answers = tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)
                right += sum(arith.compute_score(None, text, chunk[i // n][1]) for i, text in enumerate(answers))
            scores[tier] = right / (len(pairs) * n)
    model.train(was_training)
    return scores


def weights_sha256(model_dir: Path) -> str:
    return hashlib.sha256((Path(model_dir) / WEIGHTS).read_bytes()).hexdigest()


def ensure_model(model_dir: Path, verify: bool = True, log=print) -> Path:
    """``model_dir`` holding the starting model: trained there if absent; its weights checked against
    ``WEIGHTS_SHA256`` unless ``verify`` is false."""
    model_dir = Path(model_dir)
    if not (model_dir / WEIGHTS).exists():
        log(f"arith: pretraining the starting model into {model_dir} (about a minute)")
        pretrain(model_dir, log=log)
    digest = weights_sha256(model_dir)
    if verify and digest != WEIGHTS_SHA256:
        raise RuntimeError(
            f"the arithmetic model in {model_dir} has weights of sha256 {digest}, not the recorded {WEIGHTS_SHA256}: "
            "another torch build or CPU computed them; compare runs only with runs made from the same weights, "
            "or pass --no-verify to use these")
    return model_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--no-verify", action="store_true", help="keep weights whose sha256 is not the recorded one")
    parser.add_argument("--samples", type=int, default=4, help="answers sampled per held-out problem")
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        ensure_model(args.out_dir, verify=not args.no_verify)
    except RuntimeError as exc:
        print(f"arith_model: {exc}", file=sys.stderr)
        return 1
    model = AutoModelForCausalLM.from_pretrained(args.out_dir)
    tokenizer = AutoTokenizer.from_pretrained(args.out_dir)
    accuracy = held_out_accuracy(model, tokenizer, n=args.samples)
    print("held-out accuracy at temperature 1: " + ", ".join(f"{t} {a:.3f}" for t, a in accuracy.items()))
    print(f"sha256 {weights_sha256(args.out_dir)}  {args.out_dir / WEIGHTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

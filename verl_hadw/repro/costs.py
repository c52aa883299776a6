"""What a launch plan costs, from the composed configs: ``verl-hadw configs --plan PAPER --costs``.

Per run and summed over the plan: training steps as verl counts them, generated samples for training and
validation, checkpoint disk, and a rough GPU time (an order of magnitude, under the stated :data:`ASSUMPTIONS`).
All but the GPU time follow from the config (docs/reproduce.md).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from verl_hadw.repro.catalogue import DATASETS, MODEL_PARAMS, TRAIN_SET, EvalSetting

__all__ = ["RunCost", "run_cost", "plan_costs", "render", "parse_keep", "ASSUMPTIONS"]

PEAK_FLOPS = 312e12  # A100 bf16 dense
# MFU of vLLM decoding and of the FSDP update; the before/after ratios hardly depend on these constants
GEN_MFU, TRAIN_MFU = 0.15, 0.35
PROMPT_TOKENS, RESPONSE_FRACTION = 150, 0.25  # a sample: 150 prompt tokens plus a quarter of max_response_length
FULL_CKPT_BYTES, WEIGHTS_BYTES = 12, 4  # per parameter: fp32 weights + AdamW moments / fp32 weights
ASSUMPTIONS = (f"GPU-h: A100 {PEAK_FLOPS / 1e12:.0f} TFLOP/s, generation 2P FLOPs/token at {GEN_MFU:.0%} MFU, "
               f"update 10P FLOPs/token at {TRAIN_MFU:.0%}, {PROMPT_TOKENS} prompt tokens + "
               f"{RESPONSE_FRACTION:.0%} of max_response_length per sample (an order of magnitude). "
               f"Checkpoint: {FULL_CKPT_BYTES} B/param (fp32 weights + AdamW moments), final weights "
               f"{WEIGHTS_BYTES} B/param.")
VAL_FILE_RE = re.compile(r"^(?P<bench>[A-Za-z0-9_]+)\.(?P<tag>greedy|avg\d+)\.parquet$")


def parse_keep(value: str | None) -> str | int:
    """``VERL_HADW_KEEP``: ``final`` (default), ``all`` or a positive number of checkpoints."""
    value = (value or "final").strip()
    if value in ("final", "all"):
        return value
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise ValueError(f"VERL_HADW_KEEP={value!r}: use final (the last weights only, default), all (verl's "
                     "checkpoints as they are) or a positive number N (the newest N checkpoints, full state)")


def model_params(path: str) -> float | None:
    """Parameter count of a model id or local directory named like one (``/models/Qwen3-8B-Base``)."""
    name = Path(str(path).rstrip("/")).name.lower()
    return next((p for k, p in MODEL_PARAMS.items() if k.lower() == name), None)


def val_pass_samples(val_files) -> tuple[int | None, int | None]:
    """(samples per validation pass, of which greedy) from the val file names; (None, None) if one is unknown."""
    total = greedy = 0
    for f in val_files:
        match = VAL_FILE_RE.match(Path(str(f)).name)
        if not match or match.group("bench") not in DATASETS or DATASETS[match.group("bench")].expected_rows is None:
            return None, None
        setting = EvalSetting.from_tag(match.group("tag"))
        n = setting.samples * DATASETS[match.group("bench")].expected_rows
        total += n
        greedy += n if setting.greedy else 0
    return total, greedy


def _count(steps: int, freq: int) -> int:
    """Steps s in 1..steps with s % freq == 0 or s == steps (verl's test/save condition); 0 if freq <= 0."""
    if freq is None or freq <= 0 or steps <= 0:
        return 0
    return steps // freq + (1 if steps % freq else 0)


@dataclass
class RunCost:
    action: str
    run: str
    steps: int
    train_samples: int
    val_passes: int
    val_per_pass: int | None
    val_greedy_per_pass: int | None
    params: float | None
    ckpt_each: float | None  # bytes of one full checkpoint
    ckpt_peak: float | None  # bytes while training (verl's kept checkpoints)
    ckpt_after: float | None  # bytes after DONE under the retention policy
    save_freq: int
    gpu_hours: float | None
    gpu_hours_per_step: float | None

    @property
    def val_samples(self) -> int | None:
        return None if self.val_per_pass is None else self.val_passes * self.val_per_pass


def run_cost(cfg, action: str, run: str, keep: str | int = "final") -> RunCost:
    """The cost of one plan step from its composed config (``cfg``: a DictConfig as main_ppo receives it)."""
    trainer, data, rollout = cfg.trainer, cfg.data, cfg.actor_rollout_ref.rollout
    val_only = bool(trainer.get("val_only", False))
    if val_only:
        steps = 0
    elif trainer.total_training_steps is not None:
        steps = int(trainer.total_training_steps)
    else:
        # verl's steps_per_epoch: the dataloader drops the last partial batch
        steps = int(trainer.total_epochs) * (DATASETS[TRAIN_SET].expected_rows // int(data.train_batch_size))
    train_samples = steps * int(data.train_batch_size) * int(rollout.n)
    before = 1 if trainer.get("val_before_train", True) else 0
    # verl's fit: the pre-training validation, then every test_freq steps and at the last step
    passes = before if val_only else before + _count(steps, int(trainer.test_freq))
    per_pass, greedy = val_pass_samples(data.val_files)
    params = model_params(cfg.actor_rollout_ref.model.path)
    save_freq = int(trainer.save_freq)
    saves = _count(steps, save_freq)
    max_keep = trainer.get("max_actor_ckpt_to_keep") or saves
    kept = min(saves, int(max_keep))
    each = peak = after = hours = per_step = None
    if params is not None:
        each = FULL_CKPT_BYTES * params
        peak = kept * each
        after = {"all": peak, "final": WEIGHTS_BYTES * params if saves else 0.0}.get(keep)
        if after is None:
            after = min(saves, int(keep)) * each
        tokens = PROMPT_TOKENS + RESPONSE_FRACTION * int(data.max_response_length)
        actor = cfg.actor_rollout_ref.actor
        ref = 2 if (actor.get("use_kl_loss") or cfg.algorithm.get("use_kl_in_reward")) else 0
        # FLOPs per token: 8P per PPO epoch (forward + backward with activation recomputation), 2P for the
        # old-log-prob forward (and 2P for the reference's); generation 2P
        update = (8 * int(actor.get("ppo_epochs", 1)) + 2 + ref) * params * tokens * train_samples
        generated = 2 * params * tokens * (train_samples + (passes * per_pass if per_pass else 0))
        hours = (generated / (PEAK_FLOPS * GEN_MFU) + update / (PEAK_FLOPS * TRAIN_MFU)) / 3600
        if steps:
            step_gen = 2 * params * tokens * int(data.train_batch_size) * int(rollout.n)
            step_update = update / steps
            per_step = (step_gen / (PEAK_FLOPS * GEN_MFU) + step_update / (PEAK_FLOPS * TRAIN_MFU)) / 3600
    return RunCost(action, run, steps, train_samples, passes, per_pass, greedy, params, each, peak, after,
                   save_freq, hours, per_step)


def plan_costs(paper: str, only: str | None = None, overrides=(), keep: str | int = "final") -> list[RunCost]:
    """:func:`run_cost` of every step of ``catalogue.plan(paper, only)``; evaluation steps add ``eval=<paper>``."""
    from verl_hadw.repro.catalogue import plan
    from verl_hadw.repro.compose import compose_run

    out = []
    for action, run in plan(paper, only):
        extra = [f"eval={paper}"] if action == "eval" else []
        out.append(run_cost(compose_run(run, [*extra, *overrides]), action, run, keep))
    return out


def _n(value, scale=1.0, digits=0) -> str:
    return "?" if value is None else f"{value / scale:,.{digits}f}"


def render(costs: list[RunCost], keep: str | int = "final") -> str:
    """A fixed-width table, one line per plan step and a TOTAL line, then the assumptions."""
    head = (f"{'step':42} {'steps':>5} {'train samples':>13} {'val passes x per pass':>22} {'val samples':>11} "
            f"{'val %':>5} {'ckpt GB':>7} {'peak GB':>7} {'kept GB':>7} {'save_freq':>9} {'GPU-h':>6}")
    lines = [head, "-" * len(head)]
    for c in costs:
        val = c.val_samples
        share = None if val is None else 100 * val / max(1, val + c.train_samples)
        per = "?" if c.val_per_pass is None else f"{c.val_passes} x {c.val_per_pass:,}"
        lines.append(
            f"{c.action + ' ' + c.run:42} {c.steps:>5} {c.train_samples:>13,} {per:>22} {_n(val):>11} "
            f"{_n(share, digits=0):>5} {_n(c.ckpt_each, 1e9) if c.steps else '-':>7} {_n(c.ckpt_peak, 1e9):>7} "
            f"{_n(c.ckpt_after, 1e9):>7} {c.save_freq if c.steps else '-':>9} {_n(c.gpu_hours):>6}"
        )
    t = totals(costs)
    share = None if t["val_samples"] is None else 100 * t["val_samples"] / max(1, t["val_samples"] + t["train_samples"])
    lines.append("-" * len(head))
    counts = Counter(c.action for c in costs)
    label = "TOTAL (" + ", ".join(f"{n} {a}" for a, n in counts.items()) + ")"
    lines.append(f"{label:42} {t['steps']:>5} {t['train_samples']:>13,} {'':>22} "
                 f"{_n(t['val_samples']):>11} {_n(share, digits=0):>5} {'':>7} {_n(t['ckpt_peak'], 1e9):>7} "
                 f"{_n(t['ckpt_after'], 1e9):>7} {'':>9} {_n(t['gpu_hours']):>6}")
    lines.append(f"peak GB: checkpoints while a run trains (all runs at once: the sum); kept GB: after DONE with "
                 f"VERL_HADW_KEEP={keep}. A requeue loses at most save_freq steps. Each resume validates again only "
                 f"if the checkpoint's validation was not logged (scripts/train.sh).")
    lines.append(ASSUMPTIONS)
    return "\n".join(lines)


def totals(costs: list[RunCost]) -> dict:
    def total(attr):
        values = [getattr(c, attr) for c in costs]
        return None if any(v is None for v in values) else sum(values)

    return {k: total(k) for k in ("steps", "train_samples", "val_samples", "ckpt_peak", "ckpt_after", "gpu_hours")}

"""The verdict of ``scripts/gpu_smoke.sh``: what silently wastes GPU-days, checked on a few steps and a resume.

Inputs are what the script leaves behind: the run's resolved config (``verl-hadw configs --show``), verl's console
logs of the first phase (steps 1..S) and of the resumed phase (S+1..), verl's checkpoint folder, and the model's
tokenizer files (read as JSON; no weights are loaded). Each check returns PASS, FAIL or WARN with what to fix.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from verl_hadw.core.anchor import AnchorState
from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.launch import parse_steps

__all__ = ["Check", "HADW_METRICS", "DGPO_METRICS", "VERL_METRICS", "run_checks", "check_stop_tokens", "render"]

HADW_METRICS = (
    "hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t", "hadw/phi_mean",
    "hadw/phi_std", "hadw/phi_min", "hadw/phi_max", "hadw/frac_amplified", "hadw/actor_recoveries",
)
DGPO_METRICS = (
    "dgpo/valid_groups",
    "dgpo/zero_var_groups",
    "dgpo/valid_token_ratio",
    "dgpo/weight_min",
    "dgpo/weight_max",
)
# verl 0.9.1 trainer/ppo/metric_utils.py: clip_ratio = share of responses whose length equals max_response_length
VERL_METRICS = ("critic/score/mean", "critic/score/max", "response_length/mean", "response_length/clip_ratio")
# special tokens a chat template closes a turn with (Qwen/ChatML, Llama 3, Gemma)
TURN_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>")
STOP_FIX_KEY = "+actor_rollout_ref.rollout.engine_kwargs.vllm.generation_config"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASS | FAIL | WARN
    detail: str


def _get(config: dict, dotted: str, default=None):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


# ------------------------------------------------------------------------------------- log-based checks
def check_progress(first: dict, resumed: dict) -> Check:
    if not first or sorted(first) != list(range(1, max(first) + 1)):
        return Check(
            "steps",
            "FAIL",
            f"the first phase logged steps {sorted(first)}, not 1..N: training stopped early (read its log)",
        )
    saved = max(first)
    if not resumed:
        return Check(
            "steps", "FAIL", "the resumed phase logged no step: it crashed or had nothing left to train (read its log)"
        )
    if min(resumed) != saved + 1:
        return Check(
            "steps",
            "FAIL",
            f"the resumed phase started at step {min(resumed)}, not {saved + 1}: verl did not resume "
            f"from global_step_{saved} (trainer.resume_mode=auto and trainer.default_local_dir must match)",
        )
    return Check("steps", "PASS", f"steps 1..{saved}, then resumed at {saved + 1}..{max(resumed)}")


def check_metrics(steps: dict, estimator: str, base: str) -> Check:
    wanted = list(VERL_METRICS)
    if estimator == "hadw":
        wanted += HADW_METRICS + (DGPO_METRICS if base == "dgpo" else ())
    elif estimator == "dgpo":
        wanted += DGPO_METRICS
    missing = {step: [m for m in wanted if m not in values] for step, values in sorted(steps.items())}
    missing = {step: names for step, names in missing.items() if names}
    if missing:
        step, names = next(iter(missing.items()))
        return Check(
            "metrics",
            "FAIL",
            f"{len(missing)} step(s) lack metrics, e.g. step {step}: {', '.join(names)}. Keep "
            "'console' in trainer.logger; hadw/dgpo metrics need trainer.checkpoint_callback_class="
            "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback and algorithm.hadw.log_metrics=true",
        )
    return Check("metrics", "PASS", f"{len(wanted)} metrics on every step ({estimator})")


def check_truncation(steps: dict, max_response_length, limit: float) -> Check:
    clipped = [v["response_length/clip_ratio"] for v in steps.values() if "response_length/clip_ratio" in v]
    if not clipped:
        return Check("truncation", "FAIL", "no response_length/clip_ratio in the logs")
    share = sum(clipped) / len(clipped)
    mean_len = [v["response_length/mean"] for v in steps.values() if "response_length/mean" in v]
    text = (f"{share:.1%} of responses end at max_response_length={max_response_length} "
            f"(mean length {sum(mean_len) / max(len(mean_len), 1):.0f})")
    if share > limit:
        return Check(
            "truncation",
            "FAIL",
            f"{text}, more than {limit:.0%}: responses do not stop. Check the stop tokens "
            "(below) and the prompt template before spending GPU-days on cut-off answers",
        )
    return Check("truncation", "PASS", text)


def check_reward(steps: dict) -> Check:
    best = [v["critic/score/max"] for v in steps.values() if "critic/score/max" in v]
    mean = [v["critic/score/mean"] for v in steps.values() if "critic/score/mean" in v]
    if not best:
        return Check("reward", "FAIL", "no critic/score/max in the logs")
    text = f"best score {max(best):g}, mean score {sum(mean) / max(len(mean), 1):.3f} over {len(best)} steps"
    if max(best) <= 0:
        return Check("reward", "FAIL", f"{text}: no response was ever rewarded. The answer extraction or the data keys "
                     "(reward_model.ground_truth, data_source) are wrong: print a few responses and their ground truth")
    return Check("reward", "PASS", text)


# ----------------------------------------------------------------------------------- checkpoint checks
def check_checkpoints(ckpt_dir: Path, saved: int, estimator: str) -> Check:
    if not (ckpt_dir / f"global_step_{saved}").is_dir():
        return Check(
            "checkpoint",
            "FAIL",
            f"no {ckpt_dir}/global_step_{saved}: the first phase saved nothing to resume from "
            "(trainer.save_freq, trainer.default_local_dir)",
        )
    folders = sorted(ckpt_dir.glob("global_step_*"), key=lambda p: int(p.name.split("_")[-1]))
    if estimator != "hadw":
        return Check("checkpoint", "PASS", f"{len(folders)} verl checkpoint(s) (no anchor: estimator {estimator})")
    missing = [p.name for p in folders if not (p / STATE_FILE).is_file()]
    if missing:
        return Check(
            "checkpoint",
            "FAIL",
            f"{', '.join(missing)} hold no {STATE_FILE}: a resume would lose the HA-DW anchor. "
            "Set trainer.checkpoint_callback_class=verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback "
            "(v1 trainer)",
        )
    return Check("checkpoint", "PASS", f"{STATE_FILE} in all {len(folders)} checkpoint(s)")


def check_anchor_resume(first: dict, resumed: dict, ckpt_dir: Path) -> Check:
    """The resumed run's first prior is what the anchor saved at step S gives for that step's y (Eq. 12 for the
    Kalman anchor: C⁻_{S+1} = C⁺_S), and the saved anchor is the one the first phase logged at step S."""
    saved, nxt = max(first), max(first) + 1
    path = ckpt_dir / f"global_step_{saved}" / STATE_FILE
    if not path.is_file() or nxt not in resumed:
        return Check("anchor resume", "FAIL", f"cannot compare: {path} or step {nxt} of the resumed log is missing")
    state = AnchorState.from_dict(json.loads(path.read_text())["state"])
    posterior, logged_posterior = state.view().posterior, first[saved]["hadw/anchor_posterior"]
    if not math.isclose(posterior, logged_posterior, rel_tol=1e-9, abs_tol=1e-12):
        return Check("anchor resume", "FAIL", f"{path} holds posterior {posterior!r} but step {saved} logged "
                     f"{logged_posterior!r}: the file is not the anchor the run ended with")
    expected = state.observe(nxt, 0, resumed[nxt]["hadw/batch_acc"], 1).prior
    prior = resumed[nxt]["hadw/anchor_prior"]
    if not math.isclose(prior, expected, rel_tol=1e-9, abs_tol=1e-12):
        return Check(
            "anchor resume",
            "FAIL",
            f"step {nxt} used prior {prior!r} but the anchor saved at step {saved} gives "
            f"{expected!r} (posterior {posterior!r}): the resume started a new anchor",
        )
    return Check("anchor resume", "PASS", f"step {nxt} prior {prior:.6g} continues the anchor saved at step {saved} "
                 f"(posterior {posterior:.6g})")


# ------------------------------------------------------------------------------------------ stop tokens
def _model_file(model: str, name: str) -> Path | None:
    if os.path.isdir(model) or os.path.isabs(model):
        path = Path(model) / name
        return path if path.is_file() else None
    try:  # a Hugging Face id: its cached snapshot (main_ppo downloaded it), never the network
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, name)
    except (ImportError, ValueError):  # not a valid repo id either
        return None
    return Path(found) if isinstance(found, str) else None


def _ids(value) -> list[int]:
    return [] if value is None else [int(v) for v in (value if isinstance(value, list) else [value])]


def check_stop_tokens(model: str, fix_dir: str | None = None) -> Check:
    """Does generation stop at the token the chat template closes a turn with? (Qwen3-*-Base: <|im_end|> vs eos)"""
    tok_file = _model_file(model, "tokenizer_config.json")
    if tok_file is None:
        return Check("stop tokens", "WARN", f"not checked: no tokenizer_config.json for {model!r} on this machine")
    tok = json.loads(tok_file.read_text())
    added = {v["content"]: int(k) for k, v in tok.get("added_tokens_decoder", {}).items()}
    fast = _model_file(model, "tokenizer.json")  # transformers 5 keeps the special tokens' ids only here
    added.update(
        {t["content"]: int(t["id"]) for t in json.loads(fast.read_text()).get("added_tokens", [])} if fast else {}
    )
    template = tok.get("chat_template") or ""
    template = json.dumps(template) if not isinstance(template, str) else template  # a list of named templates
    jinja = _model_file(model, "chat_template.jinja")
    template += jinja.read_text() if jinja else ""
    gen_file, cfg_file = _model_file(model, "generation_config.json"), _model_file(model, "config.json")
    gen = json.loads(gen_file.read_text()) if gen_file else {}
    model_eos = gen.get("eos_token_id", json.loads(cfg_file.read_text()).get("eos_token_id") if cfg_file else None)
    eos = tok.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    stop = sorted(set(_ids(model_eos) + ([added[eos]] if eos in added else [])))
    ends = [t for t in TURN_END_TOKENS if t in template and t in added]
    missing = [t for t in ends if added[t] not in stop]
    if not missing:
        what = f"turns end with {', '.join(ends)}" if ends else "the chat template closes turns with no special token"
        return Check("stop tokens", "PASS", f"{what}; generation stops at ids {stop}")
    fixed = sorted(set(stop) | {added[t] for t in missing})
    detail = (
        f"the chat template closes each turn with {', '.join(f'{t} (id {added[t]})' for t in missing)} but generation "
        f"stops only at ids {stop} (tokenizer eos {eos!r}, generation_config eos_token_id): a response that writes "
        f"it runs on to max_response_length. Fix: eos_token_id {fixed} in the generation_config.json of a local copy "
        "of the model"
    )
    if fix_dir:
        os.makedirs(fix_dir, exist_ok=True)
        Path(fix_dir, "generation_config.json").write_text(json.dumps({**gen, "eos_token_id": fixed}, indent=2) + "\n")
        detail += f", or (vLLM rollout) {STOP_FIX_KEY}={os.path.abspath(fix_dir)} (written)"
    return Check("stop tokens", "FAIL", detail)


# ------------------------------------------------------------------------------------------------ verdict
def run_checks(config: dict, first_log: str, resumed_log: str, max_truncated: float = 0.25,
               fix_dir: str | None = None) -> list[Check]:
    """Every check on one smoke run; ``config`` is the run's resolved config as a plain dict."""
    first, resumed = parse_steps(first_log), parse_steps(resumed_log)
    steps = {**first, **resumed}
    estimator = _get(config, "algorithm.adv_estimator", "gae")
    base = _get(config, "algorithm.hadw.base", "grpo")
    checks = [check_progress(first, resumed)]
    if steps:
        checks += [check_metrics(steps, estimator, base), check_reward(steps),
                   check_truncation(steps, _get(config, "data.max_response_length"), max_truncated)]
    if first:
        ckpt_dir = Path(_get(config, "trainer.default_local_dir", "checkpoints"))
        checks.append(check_checkpoints(ckpt_dir, max(first), estimator))
        if estimator == "hadw":
            checks.append(check_anchor_resume(first, resumed, ckpt_dir))
    model = _get(config, "actor_rollout_ref.model.path")
    if model:
        checks.append(check_stop_tokens(str(model), fix_dir))
    return checks


def render(checks: list[Check]) -> str:
    lines = [f"{c.status:4s}  {c.name:13s} {c.detail}" for c in checks]
    failed = [c.name for c in checks if c.status == "FAIL"]
    warned = sum(c.status == "WARN" for c in checks)
    verdict = f"FAIL ({', '.join(failed)})" if failed else f"PASS ({len(checks)} checks, {warned} warning(s))"
    return "\n".join(lines + [f"smoke verdict: {verdict}"])

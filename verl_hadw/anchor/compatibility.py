"""Resume compatibility: which option changes a resume refuses, and which it continues under with a warning.

The criterion, applied to every option (a test fails when an option of ``options.py`` has no rule here):

- **meaning** — the option changes the units or meaning of the saved anchor (what its numbers measure), or
  the method being trained (the advantage the policy is optimised with). A resume that changes it is refused,
  naming the key, old -> new and the ways out: the saved anchor would be read as something it is not, or a
  run would silently switch methods in the middle of its curve.
- **tuning** — everything else: how fast or smoothly the anchor follows the batch accuracy, numerical guards,
  names, logging, how a missing file is handled. A resume that changes it continues under the new value and
  warns old -> new.

An option that neither the saved run nor this run uses (``used``: e.g. ``algorithm.dgpo.*`` when both run HA-DW
over GRPO) is only warned about, whatever its kind.

Anchor files record the run's options (``options_of``, flat ``algorithm.*`` keys). Files of schema 1 recorded
only the anchor options (``state.config``) and the state key; the others cannot be checked there and the resume
says so. Keys this version does not know (a newer verl-hadw's options or top-level keys) are ignored with one
warning naming them, by both back-ends alike.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable

from verl_hadw.errors import ALLOW_MISSING_STATE, ResumeConflictError
from verl_hadw.options import DgpoConfig, HadwConfig, grpo_norm_by_std, parse_dgpo, parse_hadw

__all__ = [
    "MEANING", "TUNING", "ADV_ESTIMATOR", "Rule", "RULES", "options_of", "declared_options", "check_resume",
    "rules_table",
]

logger = logging.getLogger(__name__)

MEANING, TUNING = "meaning", "tuning"
HADW, ANCHOR, DGPO = "algorithm.hadw.", "algorithm.hadw.anchor.", "algorithm.dgpo."
NORM_BY_STD = "algorithm.norm_adv_by_std_in_grpo"  # verl's key; HA-DW's GRPO base (and DGPO's with dgae=false)
ADV_ESTIMATOR = "algorithm.adv_estimator"  # verl's key: which method the checkpoint was trained with
STATE_KEY = HADW + "state_key"


def _always(options: dict) -> bool:
    return True


def _over_dgpo(options: dict) -> bool:
    return options.get(HADW + "base") == "dgpo"


def _by_accuracy(options: dict) -> bool:
    return options.get(HADW + "difficulty_from") == "accuracy"


def _over_grpo(options: dict) -> bool:
    return options.get(HADW + "base") == "grpo"


def _question_weights(options: dict) -> bool:
    return _over_dgpo(options) and options.get(DGPO + "dqw") is True


def _std_read(options: dict) -> bool:
    """The base divides by a group std: GRPO, or DGPO without its MAD normalisation."""
    return _over_grpo(options) or (_over_dgpo(options) and options.get(DGPO + "dgae") is False)


@dataclass(frozen=True)
class Rule:
    kind: str  # MEANING | TUNING
    why: str  # one line: what a change does (the docs' resume table)
    used: Callable[[dict], bool] = _always  # does a run with these options read the option?
    when: str = ""  # ``used`` in words (the docs' resume table)


RULES: dict[str, Rule] = {
    ADV_ESTIMATOR: Rule(MEANING, "the method (hadw, dgpo, ...): a switch would drop a saved HA-DW anchor, or start "
                        "HA-DW mid-run from a checkpoint that has none"),
    HADW + "lambda_scale": Rule(MEANING, "λ_scale of Eq. 16 scales every weight Φ: another objective"),
    HADW + "state_key": Rule(TUNING, "a name: the saved anchor is restored under the new one"),
    HADW + "success_threshold": Rule(
        MEANING, "what counts as a success: the units of y_t, p̂ and the saved anchor", _by_accuracy,
        "hadw.difficulty_from=accuracy"),
    HADW + "base": Rule(MEANING, "the base advantage (GRPO or DGPO): another method"),
    HADW + "difficulty_from": Rule(MEANING, "accuracy vs mean reward: the units of y_t, p̂ and the saved anchor"),
    HADW + "normalize_phi": Rule(MEANING, "rescales Φ to mean 1: another objective"),
    HADW + "allow_missing_state": Rule(TUNING, "what a resume does without an anchor file; not the anchor"),
    HADW + "log_metrics": Rule(TUNING, "logging only"),
    HADW + "epsilon": Rule(TUNING, "a numerical guard in the GRPO std", _over_grpo, "hadw.base=grpo"),
    ANCHOR + "mode": Rule(MEANING, "Kalman, moving average or fixed: what the anchor is, another method"),
    ANCHOR + "eta": Rule(TUNING, "how fast the anchor follows y_t (the freeze warning advises raising it)"),
    ANCHOR + "window": Rule(TUNING, "how many past values σ_t / the average read; the history is kept"),
    ANCHOR + "sigma_source": Rule(TUNING, "what σ_t measures, hence η_t: how fast the anchor follows y_t"),
    ANCHOR + "sigma_warmup": Rule(TUNING, "σ_t of the first two updates; a resumed anchor is past them"),
    ANCHOR + "eta_min": Rule(TUNING, "the floor of η_t: how fast the anchor follows y_t"),
    ANCHOR + "init": Rule(TUNING, "C⁻ of step 1: a resumed anchor never reads it"),
    ANCHOR + "include_current": Rule(
        MEANING, "paper vs released-code anchor in Eq. 13: another method",
        lambda o: o.get(ANCHOR + "mode") == "moving_average", "anchor.mode=moving_average"),
    ANCHOR + "fixed_value": Rule(
        MEANING, "the fixed anchor itself", lambda o: o.get(ANCHOR + "mode") == "fixed", "anchor.mode=fixed"),
    DGPO + "dgae": Rule(MEANING, "MAD vs std normalisation of the base advantage: another method", _over_dgpo,
                        "hadw.base=dgpo"),
    DGPO + "dqw": Rule(MEANING, "question weights on or off: another method", _over_dgpo, "hadw.base=dgpo"),
    DGPO + "temperature": Rule(MEANING, "T of Eq. 6 sets the question weights: another objective",
                               _question_weights, "hadw.base=dgpo, dgpo.dqw=true"),
    DGPO + "valid_token_norm": Rule(MEANING, "rescales every advantage: another objective", _over_dgpo,
                                    "hadw.base=dgpo"),
    DGPO + "success_threshold": Rule(MEANING, "what DQW counts as a success: the question weights",
                                     _question_weights, "hadw.base=dgpo, dgpo.dqw=true"),
    DGPO + "epsilon": Rule(TUNING, "a numerical guard in the MAD / std", _over_dgpo, "hadw.base=dgpo"),
    NORM_BY_STD: Rule(MEANING, "GRPO vs Dr.GRPO (no std) base advantage: another method", _std_read,
                      "the base divides by a std"),
}


# ------------------------------------------------------------------------------------------ the options
def _user_fields(cls: type, prefix: str) -> dict[str, dataclasses.Field]:
    out = {}
    for f in dataclasses.fields(cls):
        if "kind" not in f.metadata:
            continue
        if f.metadata["kind"] == "section":
            out.update(_user_fields(f.default_factory, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = f
    return out


def declared_options() -> list[str]:
    """Every option a user can set that reaches HA-DW: ``algorithm.hadw.*``, ``algorithm.dgpo.*`` and verl's
    ``algorithm.norm_adv_by_std_in_grpo``, as flat keys."""
    return [ADV_ESTIMATOR, *_user_fields(HadwConfig, HADW), *_user_fields(DgpoConfig, DGPO), NORM_BY_STD]


def options_of(algorithm: Any) -> dict[str, Any]:
    """The options of the run whose verl ``algorithm`` node (dict, DictConfig or None) is ``algorithm``, as flat
    keys: what an anchor file records and a resume compares."""
    out = {}
    for prefix, node in ((HADW, parse_hadw(algorithm)), (DGPO, parse_dgpo(algorithm))):
        for key in _user_fields(type(node), prefix):
            value = node
            for part in key[len(prefix):].split("."):
                value = getattr(value, part)
            out[key] = value
    out[NORM_BY_STD] = grpo_norm_by_std(algorithm)
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    out[ADV_ESTIMATOR] = str(estimator) if estimator is not None else None
    return out


def anchor_options(anchor_config: dict) -> dict[str, Any]:
    """A schema-1 file's ``state.config`` (the anchor options, all it recorded) as flat keys."""
    return {ANCHOR + k: v for k, v in anchor_config.items()}


# ------------------------------------------------------------------------------------------ the check
def check_resume(saved: dict, recorded_all: bool, now: dict, path: str, other_keys=()) -> None:
    """Apply the rules to a resume from ``path`` whose file recorded the options ``saved``; ``now``: this run's
    (both flat keys, ``options_of``).

    ``recorded_all``: the file records every option (schema 2); False for schema 1 (anchor options only).
    ``other_keys``: top-level keys of the file this version does not write (a newer version's).
    Raises ``ResumeConflictError`` for meaning changes; logs one warning for tuning changes, unknown keys and
    options the file did not record.
    """
    refused, changed = [], []
    for key, rule in RULES.items():
        if key not in saved or saved[key] == now[key]:
            continue
        change = f"{key}: {saved[key]!r} -> {now[key]!r}"
        used = rule.used(saved) or rule.used(now)
        if rule.kind == MEANING and used:
            refused.append((key, change, rule))
        else:
            changed.append(change if used else f"{change} (not used by either run)")
    if refused:
        lines = "; ".join(f"{change} ({rule.why})" for _, change, rule in refused)
        set_back = " ".join(f"{'' if key == ADV_ESTIMATOR else '+'}{key}={_override(saved[key])}"
                            for key, _, _ in refused)  # verl's own keys exist: no "+"
        raise ResumeConflictError(
            f"cannot resume from {path}: it was saved under other options that change the meaning of the anchor "
            f"or the method being trained: {lines}. Ways out: set them back ({set_back}); or, to change them on "
            f"purpose, keep the weights with a fresh anchor: move {path} away and {ALLOW_MISSING_STATE}; or train "
            "it as a new experiment (another trainer.default_local_dir, or trainer.resume_mode=disable)."
        )
    notes = []
    if changed:
        notes.append(
            f"was saved under another algorithm.hadw.anchor config or other tuning options ({'; '.join(changed)}): "
            "the anchor keeps its history and continues under this run's options"
        )
    unknown = sorted(saved.keys() - RULES.keys()) + [f"(top level) {k}" for k in other_keys]
    if unknown:
        notes.append(
            f"ignoring key(s) this verl-hadw does not know ({', '.join(unknown)}): written by a newer version?"
        )
    unrecorded = sorted(k for k in RULES if k not in saved)
    if unrecorded:
        why = "an older verl-hadw recorded only the anchor options" if not recorded_all else "not recorded"
        notes.append(f"cannot check {len(unrecorded)} option(s) the file lacks ({why}): {', '.join(unrecorded)}")
    if notes:
        logger.warning(f"HA-DW anchor {path}: " + "; ".join(notes))


def _override(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def rules_table() -> str:
    """The resume-compatibility table of docs/reliability.md (a test keeps the page equal to it)."""
    rows = ["| option | on resume | why | applies when |", "|---|---|---|---|"]
    for key, rule in RULES.items():
        verdict = "**refuse**" if rule.kind == MEANING else "warn, continue"
        rows.append(f"| `{key}` | {verdict} | {rule.why} | {rule.when or 'always'} |")
    return "\n".join(rows)

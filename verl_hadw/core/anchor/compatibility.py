"""Resume rules: a resume that changes an option refuses (its kind is *meaning*) or continues with a warning (*tuning*).

Anchor files record the run's options as flat ``algorithm.*`` keys (``flat_options``), the same for every framework;
a resume compares them with its own (``check_resume``).
"""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from verl_hadw.core.errors import ResumeConflictError
from verl_hadw.core.options import DgpoConfig, HadwConfig, declarations
from verl_hadw.core.terms import ALGORITHM_PREFIX, Terms

logger = logging.getLogger(__name__)

MEANING, TUNING = "meaning", "tuning"
HADW, ANCHOR, DGPO = "algorithm.hadw.", "algorithm.hadw.anchor.", "algorithm.dgpo."
NORM_BY_STD = "algorithm.norm_adv_by_std_in_grpo"  # verl's key; HA-DW's GRPO base (and DGPO's with dgae=false)
ADV_ESTIMATOR = "algorithm.adv_estimator"  # verl's key: which method the checkpoint was trained with
STATE_KEY = HADW + "state_key"
# the HF-Trainer adapters' reward columns (verl has one score: None)
ACCURACY_INDEX = "algorithm.accuracy_reward_index"
REWARD_WEIGHTS = "algorithm.reward_weights"
REWARD_FUNCS = "algorithm.reward_funcs"


def _over_dgpo(options: dict) -> bool:
    return options.get(HADW + "base") == "dgpo"


def _by_accuracy(options: dict) -> bool:
    return options.get(HADW + "difficulty_from") == "accuracy"


def _over_grpo(options: dict) -> bool:
    return options.get(HADW + "base") == "grpo"


def _question_weights(options: dict) -> bool:
    return _over_dgpo(options) and options.get(DGPO + "dqw") is True


def _reads_accuracy(options: dict) -> bool:  # y_t and p̂, or DGPO's question weights
    dqw = options.get(DGPO + "dqw") is True
    return _by_accuracy(options) or (dqw and (_over_dgpo(options) or options.get(ADV_ESTIMATOR) == "dgpo"))


def _std_read(options: dict) -> bool:  # the base divides by a group std
    return _over_grpo(options) or (_over_dgpo(options) and options.get(DGPO + "dgae") is False)


# meaning: the option changes what the saved anchor's numbers measure, or the method being trained: refused, since
# the anchor would be read as something it is not or a run would switch methods mid-curve. tuning: everything else
# (how fast the anchor follows, guards, names, logging): continued under the new value, with a warning. An option
# neither run uses (``Rule.used``) is only warned about. A test fails when an option has no rule here.
@dataclass(frozen=True)
class Rule:
    kind: str  # MEANING | TUNING
    why: str  # one line: what a change does (the docs' resume table)
    used: Callable[[dict], bool] = lambda options: True  # does a run with these options read the option?
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
    ACCURACY_INDEX: Rule(MEANING, "which reward function is the accuracy (TRL, ms-swift; verl: null): the units of "
                         "y_t, p̂, the saved anchor and DGPO's question weights", _reads_accuracy,
                         "hadw.difficulty_from=accuracy, or DGPO's question weights"),
    REWARD_WEIGHTS: Rule(MEANING, "the weights of the combined reward (TRL, ms-swift; verl: null): the advantage "
                         "the policy is optimised with, and the accuracy when none is named"),
    REWARD_FUNCS: Rule(MEANING, "the reward functions' names in order (TRL, ms-swift; verl: null): which function the "
                       "accuracy index and each weight name, so y_t is read from the same function after a resume"),
}
# keys a file of an earlier release lacks and a run without them (verl: null) has nothing to compare
_ADAPTER_KEYS = (ACCURACY_INDEX, REWARD_WEIGHTS, REWARD_FUNCS)


def declared_options() -> list[str]:
    """Every option that reaches HA-DW or DGPO, as flat keys (``algorithm.hadw.*``, ``algorithm.dgpo.*``, ...)."""
    options = [ALGORITHM_PREFIX + path for path, f in declarations().items() if f.metadata["kind"] != "section"]
    return [ADV_ESTIMATOR, *options, NORM_BY_STD, *_ADAPTER_KEYS]


def flat_options(hadw: HadwConfig, dgpo: DgpoConfig, norm_by_std: bool, estimator: str | None,
                 accuracy_index: int | None = None, reward_weights: list[float] | None = None,
                 reward_funcs: list[str] | None = None) -> dict[str, Any]:
    """A run's parsed options as flat keys: what an anchor file records and a resume compares. ``accuracy_index``,
    ``reward_weights``, ``reward_funcs`` (names, in order): the HF-Trainer adapters' reward columns (verl: None)."""
    sections = {"hadw": hadw, "dgpo": dgpo}
    out = {ALGORITHM_PREFIX + path: functools.reduce(getattr, path.split(".")[1:], sections[path.split(".")[0]])
           for path, f in declarations().items() if f.metadata["kind"] != "section"}
    out[NORM_BY_STD] = norm_by_std
    out[ADV_ESTIMATOR] = str(estimator) if estimator is not None else None
    out[ACCURACY_INDEX] = None if accuracy_index is None else int(accuracy_index)
    out[REWARD_WEIGHTS] = None if reward_weights is None else [float(w) for w in reward_weights]
    out[REWARD_FUNCS] = None if reward_funcs is None else [str(name) for name in reward_funcs]
    return out


def refuses(saved: dict, now: dict) -> bool:
    """Whether ``check_resume`` refuses a resume from the options ``saved`` to ``now`` (flat keys)."""
    return any(rule.kind == MEANING and key in saved and saved[key] != now.get(key) and (rule.used(saved) or
               rule.used(now)) for key, rule in RULES.items())


def check_resume(saved: dict, recorded_all: bool, now: dict, path: str, terms: Terms, other_keys=(),
                 earlier: Callable[[], str | None] | None = None) -> None:
    """Apply the rules to a resume from ``path``: raise ``ResumeConflictError`` for a changed meaning; log one warning
    for changed tuning, unknown keys and unrecorded options; a ``UserWarning`` for another ``state_key``.

    Args:
        saved, now: the file's and this run's options, as flat keys (``flat_options``).
        recorded_all: the file records every option (schema 2); False for schema 1 (the anchor options only).
        other_keys: top-level keys of the file this version does not write (a newer version's).
        earlier: on a refusal, the newest earlier checkpoint this run can continue (None: none).
    """
    refused, changed = [], []
    for key, rule in RULES.items():
        if key not in saved or saved[key] == now.get(key):
            continue
        change = f"{terms.flat(key)}: {saved[key]!r} -> {now.get(key)!r}"
        used = rule.used(saved) or rule.used(now)
        if rule.kind == MEANING and used:
            refused.append((key, change, rule))
        else:
            changed.append(change if used else f"{change} (not used by either run)")
    if refused:
        lines = "; ".join(f"{change} ({rule.why})" for _, change, rule in refused)
        set_back = " ".join(terms.setting(key.removeprefix(ALGORITHM_PREFIX), saved[key]) for key, _, _ in refused)
        back = earlier() if earlier is not None else None
        back = f"resume from {back}, the newest earlier checkpoint saved under this run's options; or " if back else ""
        raise ResumeConflictError(
            f"cannot resume from {path}: it was saved under other options that change the meaning of the anchor "
            f"or the method being trained: {lines}. Ways out: {back}set them back ({set_back}); or, to change them on "
            f"purpose, keep the weights with a fresh anchor: move {path} away and {terms.allow_missing_state}; or "
            f"train it as a new experiment ({terms.new_experiment})."
        )
    if STATE_KEY in saved and saved[STATE_KEY] != now.get(STATE_KEY):
        message = (
            f"HA-DW: {path} was saved by the run whose {terms.flat(STATE_KEY)} is {saved[STATE_KEY]!r}, not this "
            f"run's {now.get(STATE_KEY)!r}: its anchor (and the checkpoint's weights) continue under the new key. If "
            f"two experiments share one folder, that is the other experiment's checkpoint: {terms.resume_elsewhere}, "
            f"or give each experiment its own folder ({terms.new_experiment}).")
        warnings.warn(message, UserWarning, stacklevel=2)
    notes = []
    if changed:
        notes.append(f"was saved under {terms.anchor_tuning} or other tuning options ({'; '.join(changed)}): "
                     "the anchor keeps its history and continues under this run's options")
    unknown = sorted(saved.keys() - RULES.keys()) + [f"(top level) {k}" for k in other_keys]
    if unknown:
        notes.append(f"ignoring key(s) this verl-hadw does not know ({', '.join(unknown)}): a newer version's?")
    # an earlier release recorded no reward columns: nothing to compare for a run without them (verl's one score)
    unrecorded = sorted(k for k in RULES if k not in saved and not (k in _ADAPTER_KEYS and now.get(k) is None))
    if unrecorded:
        why = "an older verl-hadw recorded only the anchor options" if not recorded_all else "not recorded"
        named = ", ".join(terms.flat(k) for k in unrecorded)
        notes.append(f"cannot check {len(unrecorded)} option(s) the file lacks ({why}): {named}")
    if notes:
        logger.warning(f"HA-DW anchor {path}: " + "; ".join(notes))


def rules_table() -> str:
    """The resume-compatibility table of docs/reliability.md (a test keeps the page equal to it)."""
    rows = ["| option | on resume | why | applies when |", "|---|---|---|---|"]
    for key, rule in RULES.items():
        verdict = "**refuse**" if rule.kind == MEANING else "warn, continue"
        rows.append(f"| `{key}` | {verdict} | {rule.why} | {rule.when or 'always'} |")
    return "\n".join(rows)

"""Resume rules: a resume that changes an option refuses (its kind is *meaning*) or continues with a warning (*tuning*).

Anchor files record the run's options as flat ``algorithm.*`` keys (``flat_options``), the same for every framework;
a resume compares them with its own (``check_resume``)."""

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


def _is(key: str, value) -> Callable[[dict], bool]:
    """A ``Rule.used``: whether a run's option ``key`` is ``value``."""
    return lambda options: options.get(key) == value


_over_dgpo, _over_grpo = _is(HADW + "base", "dgpo"), _is(HADW + "base", "grpo")
_by_accuracy = _is(HADW + "difficulty_from", "accuracy")


def _question_weights(options: dict) -> bool:
    return _over_dgpo(options) and options.get(DGPO + "dqw") is True


def _reads_accuracy(options: dict) -> bool:  # y_t and p̂, or DGPO's question weights
    dqw = options.get(DGPO + "dqw") is True
    return _by_accuracy(options) or (dqw and (_over_dgpo(options) or options.get(ADV_ESTIMATOR) == "dgpo"))


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
    HADW + "lambda_scale": Rule(MEANING, "scales every difficulty weight: another objective"),
    HADW + "state_key": Rule(TUNING, "a name: the saved anchor is restored under the new one"),
    HADW + "success_threshold": Rule(MEANING, "what counts as a success: what the accuracies and the saved anchor "
                                     "measure", _by_accuracy, "hadw.difficulty_from=accuracy"),
    HADW + "base": Rule(MEANING, "the base advantage (GRPO or DGPO): another method"),
    HADW + "difficulty_from": Rule(MEANING, "accuracy vs mean reward: what the difficulties and the saved anchor "
                                   "measure"),
    HADW + "normalize_phi": Rule(MEANING, "rescales the difficulty weights to mean 1: another objective"),
    HADW + "allow_missing_state": Rule(TUNING, "what a resume does without an anchor file; not the anchor"),
    HADW + "log_metrics": Rule(TUNING, "logging only"),
    HADW + "epsilon": Rule(TUNING, "a numerical guard in the GRPO std", _over_grpo, "hadw.base=grpo"),
    ANCHOR + "mode": Rule(MEANING, "Kalman, moving average or fixed: what the anchor is, another method"),
    ANCHOR + "eta": Rule(TUNING, "how fast the anchor follows accuracy (the freeze warning advises raising it)"),
    ANCHOR + "window": Rule(TUNING, "how many past values the spread or average reads; the history is kept"),
    ANCHOR + "sigma_source": Rule(TUNING, "what the spread is taken over, hence how fast the anchor follows accuracy"),
    ANCHOR + "sigma_warmup": Rule(TUNING, "the spread of the first two updates; a resumed anchor is past them"),
    ANCHOR + "eta_min": Rule(TUNING, "the anchor's slowest speed towards accuracy"),
    ANCHOR + "init": Rule(TUNING, "the starting anchor: a resumed anchor never reads it"),
    ANCHOR + "include_current": Rule(MEANING, "the paper's anchor vs the released code's, which difficulty is measured "
                                     "against: another method", _is(ANCHOR + "mode", "moving_average"),
                                     "anchor.mode=moving_average"),
    ANCHOR + "fixed_value": Rule(MEANING, "the fixed anchor itself", _is(ANCHOR + "mode", "fixed"),
                                 "anchor.mode=fixed"),
    DGPO + "dgae": Rule(MEANING, "mean absolute deviation vs standard deviation in the base advantage: another "
                        "method", _over_dgpo, "hadw.base=dgpo"),
    DGPO + "dqw": Rule(MEANING, "question weights on or off: another method", _over_dgpo, "hadw.base=dgpo"),
    DGPO + "temperature": Rule(MEANING, "how sharply the question weights favour hard questions: another objective",
                               _question_weights, "hadw.base=dgpo, dgpo.dqw=true"),
    DGPO + "valid_token_norm": Rule(MEANING, "rescales every advantage: another objective", _over_dgpo,
                                    "hadw.base=dgpo"),
    DGPO + "success_threshold": Rule(MEANING, "what counts as a success for the question weights",
                                     _question_weights, "hadw.base=dgpo, dgpo.dqw=true"),
    DGPO + "epsilon": Rule(TUNING, "a numerical guard in the MAD / std", _over_dgpo, "hadw.base=dgpo"),
    NORM_BY_STD: Rule(MEANING, "GRPO vs Dr.GRPO (no std) base advantage: another method",
                      lambda o: _over_grpo(o) or (_over_dgpo(o) and o.get(DGPO + "dgae") is False),
                      "the base divides by a std"),
    ACCURACY_INDEX: Rule(MEANING, "which reward function is the accuracy (TRL, ms-swift, Axolotl; verl: null): what "
                         "the accuracies, the saved anchor and DGPO's question weights measure", _reads_accuracy,
                         "hadw.difficulty_from=accuracy, or DGPO's question weights"),
    REWARD_WEIGHTS: Rule(MEANING, "the weights of the combined reward (TRL, ms-swift, Axolotl; verl: null): the "
                         "advantage the policy is optimised with, and the accuracy when none is named"),
    REWARD_FUNCS: Rule(MEANING, "the reward functions' names in order (TRL, ms-swift, Axolotl; verl: null): which "
                       "function the accuracy index and each weight name, so the accuracy is read from the same "
                       "function after a resume"),
}


def declared_options() -> list[str]:
    """Every option that reaches HA-DW or DGPO, as flat keys (``algorithm.hadw.*``, ``algorithm.dgpo.*``, ...)."""
    return list(flat_options(HadwConfig(), DgpoConfig(), True, None))


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


def _changes(saved: dict, now: dict) -> list[tuple[str, Rule, bool]]:
    """(key, rule, whether either run uses it) of each option a resume from ``saved`` to ``now`` changes."""
    return [(key, rule, rule.used(saved) or rule.used(now)) for key, rule in RULES.items()
            if saved.get(key) != now.get(key)]


def refuses(saved: dict, now: dict) -> bool:
    """Whether ``check_resume`` refuses a resume from the options ``saved`` to ``now`` (flat keys)."""
    return any(rule.kind == MEANING and used for _, rule, used in _changes(saved, now))


def check_resume(saved: dict, now: dict, path: str, terms: Terms, other_keys=(),
                 earlier: Callable[[], str | None] | None = None) -> None:
    """Apply the rules to a resume from ``path`` (``saved``, ``now``: the file's and this run's flat options): raise
    ``ResumeConflictError`` for a changed meaning, naming ``earlier()``, the newest earlier checkpoint this run can
    continue (None: none); log one warning for changed tuning and unknown keys (``other_keys``: top-level keys this
    version does not write, a newer version's); a ``UserWarning`` for another ``state_key``."""
    refused, changed = [], []
    for key, rule, used in _changes(saved, now):
        change = f"{terms.flat(key)}: {saved[key]!r} -> {now.get(key)!r}"
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
            f"train it as a new experiment ({terms.new_experiment}).")
    if saved[STATE_KEY] != now.get(STATE_KEY):
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
    if unknown := sorted(saved.keys() - RULES.keys()) + [f"(top level) {k}" for k in other_keys]:
        notes.append(f"ignoring key(s) this verl-hadw does not know ({', '.join(unknown)}): a newer version's?")
    if notes:
        logger.warning(f"HA-DW anchor {path}: " + "; ".join(notes))


def rules_table() -> str:
    """The resume-compatibility table of docs/reliability.md (a test keeps the page equal to it)."""
    rows = ["| option | on resume | why | applies when |", "|---|---|---|---|"]
    for key, rule in RULES.items():
        verdict = "**refuse**" if rule.kind == MEANING else "warn, continue"
        rows.append(f"| `{key}` | {verdict} | {rule.why} | {rule.when or 'always'} |")
    return "\n".join(rows)

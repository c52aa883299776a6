"""The options as flat fields (verl's ``hadw.anchor.eta`` is ``hadw_anchor_eta``), read back through the core's
parser: ``OptionFields`` is mixed into TRL's config, ms-swift's arguments and Axolotl's training arguments; ``hf_terms``
names the fields."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import math
import numbers
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.errors import ConfigError, UnusedOptionsWarning
from verl_hadw.core.options import DgpoConfig, HadwConfig, declarations, parse_section
from verl_hadw.core.terms import Terms

ESTIMATORS = ("hadw", "dgpo")
ADAPTER_FIELDS = ("adv_estimator", "accuracy_reward_index")  # the adapters' own fields, beside the declared ones


@functools.lru_cache(maxsize=1)
def declared_fields() -> dict[str, tuple[str, dataclasses.Field]]:
    """Field name -> (option path, declaration), in declaration order: ``hadw_anchor_eta`` -> ``hadw.anchor.eta``."""
    return {path.replace(".", "_"): (path, f) for path, f in declarations().items() if f.metadata["kind"] != "section"}


def closest_field(unknown: str, known) -> str | None:
    """The field a user probably meant: one of ours that ``unknown`` ends, else the closest of ``known``, else None."""
    ours = [*declared_fields(), *ADAPTER_FIELDS]
    hint = [n for n in ours if n.endswith("_" + unknown)] or difflib.get_close_matches(unknown, sorted(known), n=1)
    return hint[0] if hint else None


KEYWORDS, FLAGS, YAML = "keywords", "flags", "yaml"  # how a framework's users write a setting


def spelled(style: str, name: str, value: Any) -> str:
    """A setting as a user writes it: ``loss_type='dapo'`` (``KEYWORDS``: a config), ``--loss_type dapo``
    (``FLAGS``: a command line), ``loss_type: dapo`` (``YAML``: a config file)."""
    if style == KEYWORDS:
        return f"{name}={value!r}"
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, (list, tuple)):
        text = f"[{', '.join(str(v) for v in value)}]" if style == YAML else " ".join(str(v) for v in value)
    else:
        text = "null" if value is None and style == YAML else str(value)
    return f"{name}: {text}" if style == YAML else f"--{name} {text}"


def hf_terms(framework: str, style: str, resume_from: str, new_experiment: str,
             names: dict[str, str] | None = None) -> Terms:
    """The core's ``Terms`` for an HF-Trainer-based framework whose users write settings in ``style``;
    ``resume_from``: how a run resumes from a folder; ``new_experiment``: how it starts anew; ``names``: where the
    framework's own settings live, if not at the top (Axolotl: ``{"scale_rewards": "trl.scale_rewards"}``)."""
    names = names or {}
    prefix = "--" if style == FLAGS else ""

    def key(option: str) -> str:
        if option == "norm_adv_by_std_in_grpo":
            scale = names.get("scale_rewards", "scale_rewards")
            return "scale_rewards=='group'" if style == KEYWORDS else prefix + scale
        return prefix + names.get(option, option.replace(".", "_"))

    def setting(option: str, value: Any) -> str:
        if option == "norm_adv_by_std_in_grpo":
            return spelled(style, names.get("scale_rewards", "scale_rewards"), "group" if value else "none")
        if isinstance(value, str) and style == KEYWORDS:  # an option's text as the user reads it back: unquoted
            return f"{key(option)}={value}"
        return spelled(style, names.get(option, option.replace(".", "_")), value)

    fresh = setting("hadw.allow_missing_state", True)
    return Terms(framework=framework, key=key, setting=setting, new_experiment=new_experiment,
                 allow_missing_state=f"{'add' if style == FLAGS else 'set'} {fresh} to continue with a fresh anchor",
                 fresh_anchor=f"({fresh}: continuing with a fresh anchor)",
                 resume_elsewhere=f"resume from another checkpoint ({resume_from})",
                 anchor_tuning=f"other {key('hadw.anchor.*')} values")


def check_accuracy_index(index: int | None, names: list[str], terms: Terms) -> None:
    """Raise ``ConfigError`` unless ``accuracy_reward_index`` is unset or names one of the reward functions."""
    if index is not None and index >= len(names):
        raise ConfigError(
            f"{terms.setting('accuracy_reward_index', index)} is out of range: there are {len(names)} reward "
            f"function(s) ({', '.join(f'{i}: {n}' for i, n in enumerate(names))}); valid: 0..{len(names) - 1}, or "
            "leave it unset.")


def _field(path: str) -> Any:
    """The field of the option at ``path``: its declared default; its doc and valid values as the help."""
    declared = declarations()[path]
    m = declared.metadata
    lo, hi = m["lo"], m["hi"]
    valid = {"integer": f">= {lo:g}", "init": "'first_batch' or [0, 1]"}.get(m["kind"], "")
    if m["kind"] == "number":
        valid = f"{'>' if m['lo_open'] else '>='} {lo:g}" if hi == math.inf else f"[{lo:g}, {hi:g}]"
    return field(default=declared.default, metadata={"help": f"{m['doc']}." + (f" Valid: {valid}." if valid else "")})


@dataclass
class OptionFields:
    """HA-DW's and DGPO's options as flat fields, declared once for TRL's config, ms-swift's arguments and Axolotl's
    training arguments (each ``hadw_*`` / ``dgpo_*`` field is one option of ``core.options``), read back through the
    core's parser; ``terms`` (set by the adapter) names them in the framework's words."""

    terms: ClassVar[Terms]

    adv_estimator: Literal["hadw", "dgpo"] = field(default="hadw", metadata={
        "help": "the advantage estimator: hadw (HA-DW; over DGPO with hadw_base dgpo) | dgpo."})
    accuracy_reward_index: int | None = field(default=None, metadata={
        "help": "which of the reward_funcs is the accuracy; unset: the combined reward, binary or thresholded."})
    hadw_lambda_scale: float = _field("hadw.lambda_scale")
    hadw_state_key: str = _field("hadw.state_key")
    hadw_success_threshold: float | None = _field("hadw.success_threshold")
    hadw_base: Literal["grpo", "dgpo"] = _field("hadw.base")
    hadw_difficulty_from: Literal["accuracy", "reward"] = _field("hadw.difficulty_from")
    hadw_normalize_phi: bool = _field("hadw.normalize_phi")
    hadw_allow_missing_state: bool = _field("hadw.allow_missing_state")
    hadw_log_metrics: bool = _field("hadw.log_metrics")
    hadw_epsilon: float = _field("hadw.epsilon")
    hadw_anchor_mode: Literal["kalman", "moving_average", "fixed"] = _field("hadw.anchor.mode")
    hadw_anchor_eta: float = _field("hadw.anchor.eta")
    hadw_anchor_window: int = _field("hadw.anchor.window")
    hadw_anchor_sigma_source: Literal["anchor", "accuracy"] = _field("hadw.anchor.sigma_source")
    hadw_anchor_sigma_warmup: float = _field("hadw.anchor.sigma_warmup")
    hadw_anchor_eta_min: float = _field("hadw.anchor.eta_min")
    hadw_anchor_init: float | str | None = _field("hadw.anchor.init")
    hadw_anchor_include_current: bool = _field("hadw.anchor.include_current")
    hadw_anchor_fixed_value: float = _field("hadw.anchor.fixed_value")
    dgpo_dgae: bool = _field("dgpo.dgae")
    dgpo_dqw: bool = _field("dgpo.dqw")
    dgpo_temperature: float = _field("dgpo.temperature")
    dgpo_valid_token_norm: bool = _field("dgpo.valid_token_norm")
    dgpo_success_threshold: float | None = _field("dgpo.success_threshold")
    dgpo_epsilon: float = _field("dgpo.epsilon")

    def check_adapter_fields(self) -> None:
        """Check ``adv_estimator``, ``accuracy_reward_index`` and every declared field (the core's parser)."""
        key = self.terms.key
        if self.adv_estimator not in ESTIMATORS:
            raise ConfigError(f"{key('adv_estimator')}={self.adv_estimator!r} is not valid; choose one of: hadw, dgpo.")
        index = self.accuracy_reward_index
        if index is not None and (isinstance(index, bool) or not isinstance(index, numbers.Integral) or index < 0):
            raise ConfigError(f"{key('accuracy_reward_index')}={index!r} is not valid. Give the position of the "
                              "accuracy among the reward functions (an integer >= 0), or leave it unset.")
        if index is not None:
            self.accuracy_reward_index = int(index)  # np.int64(0) is the integer 0
        if isinstance(self.hadw_anchor_init, str) and self.hadw_anchor_init != "first_batch":
            with contextlib.suppress(ValueError):  # the parser below names the field and what is valid
                self.hadw_anchor_init = float(self.hadw_anchor_init)
        self.hadw_options()
        self.dgpo_options()  # under either estimator: an option is checked at the same moment under every one

    def _section(self, section: str) -> dict:
        """The section's fields as nested options: {"anchor": {"eta": 8.0}, "lambda_scale": 1.3}."""
        out: dict = {}
        for name, (path, _) in declared_fields().items():
            if path.startswith(section + "."):
                *parents, leaf = path.split(".")[1:]
                node = out
                for p in parents:
                    node = node.setdefault(p, {})
                node[leaf] = getattr(self, name)
        return out

    def hadw_options(self) -> HadwConfig:
        return parse_section("hadw", self._section("hadw"), self.terms.key)

    def dgpo_options(self) -> DgpoConfig:
        return parse_section("dgpo", self._section("dgpo"), self.terms.key)

    def norm_by_std(self) -> bool:
        """verl's ``norm_adv_by_std_in_grpo``, read from ``scale_rewards`` ("group": true, "none": false)."""
        if self.scale_rewards not in ("group", "none"):
            raise ConfigError(
                f"{self.terms.key('norm_adv_by_std_in_grpo').split('=')[0]}={self.scale_rewards!r} has no counterpart "
                f"in {self.adv_estimator}, which normalises within each group. Use 'group' (GRPO's std) or 'none' "
                "(Dr.GRPO).")
        return self.scale_rewards == "group"

    def warn_unused_fields(self) -> list[str]:
        """Warn (``UnusedOptionsWarning``) of fields set off their default that this run never reads; returns them."""
        hadw, dgpo = self.adv_estimator == "hadw", self.uses_dgpo()
        shared = {"hadw_state_key", "hadw_log_metrics"}
        unused = [name for name, (path, f) in declared_fields().items() if getattr(self, name) != f.default and (
            (path.startswith("hadw.") and not hadw and name not in shared) or (path.startswith("dgpo.") and not dgpo))]
        if self.accuracy_reward_index is not None and not self.reads_accuracy():
            unused.append("accuracy_reward_index")
        if unused:
            key = self.terms.key
            names = ", ".join(key(n) if n in ADAPTER_FIELDS else key(declared_fields()[n][0]) for n in unused)
            it = "it" if len(unused) == 1 else "them"
            warnings.warn(
                f"{names} {'is' if len(unused) == 1 else 'are'} set but this run ({key('adv_estimator')}="
                f"{self.adv_estimator}, {key('hadw.base')}={self.hadw_base}, {key('hadw.difficulty_from')}="
                f"{self.hadw_difficulty_from}) does not read {it}: no effect. "
                f"Leave {'it at its default' if len(unused) == 1 else 'them at their defaults'}, or choose a run that "
                f"reads {it}.",
                UnusedOptionsWarning, stacklevel=3)
        return unused

    def reads_accuracy(self) -> bool:
        """The run reads an accuracy: HA-DW's y_t and p̂, or DGPO's question weights."""
        return (self.adv_estimator == "hadw" and self.hadw_options().difficulty_from == "accuracy") or (
            self.uses_dgpo() and self.dgpo_options().dqw)

    def uses_dgpo(self) -> bool:
        """DGPO runs: alone, or as HA-DW's base."""
        return self.adv_estimator == "dgpo" or self.hadw_options().base == "dgpo"

    def uses_valid_token_norm(self) -> bool:
        """DGPO's valid-token averaging (Eq. 3) is part of this run."""
        return self.uses_dgpo() and self.dgpo_options().valid_token_norm

    def algorithm_node(self) -> dict:
        """These options in the shape of verl's ``algorithm`` node (a plain dict, for comparisons with verl)."""
        return {"hadw": self._section("hadw"), "dgpo": self._section("dgpo"), "adv_estimator": self.adv_estimator,
                "norm_adv_by_std_in_grpo": self.norm_by_std()}

    def recorded_options(self, reward_weights: list[float] | None = None,
                         reward_funcs: list[str] | None = None) -> dict[str, Any]:
        """These options as an anchor file records them (verl's flat keys), with the reward functions'."""
        return flat_options(self.hadw_options(), self.dgpo_options(), self.norm_by_std(), self.adv_estimator,
                            accuracy_index=self.accuracy_reward_index, reward_weights=reward_weights,
                            reward_funcs=reward_funcs)


def parameters_doc() -> str:
    """The fields as the Parameters of a config's docstring, in TRL's layout (name, type and default; its help)."""
    lines = []
    for f in dataclasses.fields(OptionFields):
        default = f'"{f.default}"' if isinstance(f.default, str) else f.default
        lines += [f"        {f.name} (`{f.type}`, defaults to `{default}`):",
                  *textwrap.wrap(f.metadata["help"], 116, initial_indent=" " * 12, subsequent_indent=" " * 12)]
    return "\n".join(lines) + "\n"

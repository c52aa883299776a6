"""The options as flat fields (``hadw_lambda_scale``, ``dgpo_temperature``, ...), and the parsed options read back.

HF-Trainer-style frameworks take one flat argument per option: TRL's ``HadwGRPOConfig`` fields, ms-swift's
``--hadw_lambda_scale`` flags. Both are built here from the declarations (``options.declarations()``): verl's path
``algorithm.hadw.anchor.eta`` is the field ``hadw_anchor_eta`` (the dots become underscores), with the same default
and doc. ``OptionFields`` reads them back through the core's parser (``options.parse_section``), whose messages name
the framework's field (``Terms.key``). Two fields are the adapters' own: ``adv_estimator`` (verl's
``algorithm.adv_estimator``) and ``accuracy_reward_index`` (which reward function is the accuracy; verl has one
score). The framework's ``scale_rewards`` stands for verl's ``algorithm.norm_adv_by_std_in_grpo``. Pure Python.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import numbers
import warnings
from dataclasses import field
from typing import Any, Optional

from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.errors import ConfigError, UnusedOptionsWarning
from verl_hadw.core.options import DgpoConfig, HadwConfig, declarations, parse_section
from verl_hadw.core.terms import Terms

__all__ = ["ESTIMATORS", "ADAPTER_FIELDS", "field_name", "declared_fields", "field_help", "add_declared_fields",
           "nested", "closest_field", "OptionFields"]

ESTIMATORS = ("hadw", "dgpo")
ADAPTER_FIELDS = ("adv_estimator", "accuracy_reward_index")  # the adapters' own fields, beside the declared ones
# the field type of each declaration kind; ``init`` is "first_batch" or a number, so it arrives as text
_TYPES = {"number": float, "integer": int, "flag": bool, "choice": str, "text": str, "threshold": Optional[float],
          "init": str}


def field_name(path: str) -> str:
    """The flat field of an option path: ``"hadw.anchor.eta"`` -> ``hadw_anchor_eta``."""
    return path.replace(".", "_")


@functools.lru_cache(maxsize=1)
def declared_fields() -> dict[str, tuple[str, dataclasses.Field]]:
    """Field name -> (the option's dotted path under ``algorithm``, its declaration), in declaration order."""
    return {field_name(path): (path, f) for path, f in declarations().items() if f.metadata["kind"] != "section"}


def field_help(path: str, f: dataclasses.Field) -> dict:
    """The field's metadata: ``help`` (doc, range, verl's key), ``choices`` for a choice (HfArgumentParser reads
    both)."""
    m = f.metadata
    valid = {"number": f"a number in {'(' if m['lo_open'] else '['}{m['lo']}, {m['hi']}]", "integer": f">= {m['lo']}",
             "threshold": "a number, or unset", "init": "'first_batch' or a number in [0, 1]"}.get(m["kind"], "")
    text = f"{m['doc'] or path}. {'Valid: ' + valid + '. ' if valid else ''}verl: algorithm.{path}."
    return {"help": text, **({"choices": list(m["choices"])} if m["kind"] == "choice" else {})}


def add_declared_fields(cls: type) -> type:
    """Add one field per declared option to ``cls``'s annotations, before ``dataclass`` sees the class."""
    for name, (path, f) in declared_fields().items():
        cls.__annotations__[name] = _TYPES[f.metadata["kind"]]
        setattr(cls, name, field(default=f.default, metadata=field_help(path, f)))
    return cls


def nested(values: dict[str, Any]) -> dict:
    """{"hadw.anchor.eta": 8.0, ...} -> {"hadw": {"anchor": {"eta": 8.0}}, ...} (verl's node shape)."""
    out: dict = {}
    for path, value in values.items():
        *parents, leaf = path.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def closest_field(unknown: str, known) -> str | None:
    """The field a user probably meant by ``unknown``: one of ours it ends (``lambda_scale`` ->
    ``hadw_lambda_scale``), else the closest of ``known`` (every field the framework takes), else None."""
    ours = [*declared_fields(), *ADAPTER_FIELDS]
    hint = [n for n in ours if n.endswith("_" + unknown)] or difflib.get_close_matches(unknown, sorted(known), n=1)
    return hint[0] if hint else None


class OptionFields:
    """The parsed options of an object holding the declared fields, ``adv_estimator``, ``accuracy_reward_index``
    and ``scale_rewards`` (a dataclass adds the fields with ``add_declared_fields``). ``terms``: the framework's
    words (a class attribute), which every message uses."""

    terms: Terms

    def check_adapter_fields(self) -> None:
        """``adv_estimator`` and ``accuracy_reward_index`` valid, ``hadw_anchor_init`` given as text read as a
        number where it is one, and every declared field through the core's parser."""
        key = self.terms.key
        if self.adv_estimator not in ESTIMATORS:
            raise ConfigError(f"{key('adv_estimator')}={self.adv_estimator!r} is not valid; choose one of: hadw, "
                              "dgpo.")
        index = self.accuracy_reward_index
        if index is not None and (isinstance(index, bool) or not isinstance(index, numbers.Integral) or index < 0):
            raise ConfigError(f"{key('accuracy_reward_index')}={index!r} is not valid: give an integer >= 0 (the "
                              "position of the accuracy among the reward functions), or leave it unset.")
        if index is not None:
            self.accuracy_reward_index = int(index)  # np.int64(0) is the integer 0
        init = "hadw_anchor_init"  # "first_batch" or a number; a command line gives text
        if isinstance(getattr(self, init), str) and getattr(self, init) != "first_batch":
            try:
                setattr(self, init, float(getattr(self, init)))
            except ValueError:
                pass  # the parser below names the field and what is valid
        self.hadw_options()  # every declared field, by verl's parser
        self.dgpo_options()  # whichever estimator runs: an option is checked at the same moment under every one

    def _values(self, section: str) -> dict[str, Any]:
        return {path: getattr(self, name) for name, (path, _) in declared_fields().items()
                if path.startswith(section + ".")}

    def hadw_options(self) -> HadwConfig:
        """The HA-DW options, parsed by the core's parser; errors name the framework's field."""
        return parse_section("hadw", nested(self._values("hadw"))["hadw"], self.terms.key)

    def dgpo_options(self) -> DgpoConfig:
        """The DGPO options, parsed by the core's parser; errors name the framework's field."""
        return parse_section("dgpo", nested(self._values("dgpo"))["dgpo"], self.terms.key)

    def norm_by_std(self) -> bool:
        """verl's ``algorithm.norm_adv_by_std_in_grpo``, read from the framework's ``scale_rewards`` ("group" or
        "none"; any other value, e.g. set after construction, is refused rather than read as "none")."""
        if self.scale_rewards not in ("group", "none"):
            raise ConfigError(
                f"{self.terms.key('norm_adv_by_std_in_grpo').split('=')[0]}={self.scale_rewards!r} has no counterpart "
                f"in {self.adv_estimator}: it normalises within each group. Use 'group' (GRPO's std, verl's "
                "norm_adv_by_std_in_grpo=true) or 'none' (Dr.GRPO, false); both only matter where the base divides "
                "by a std."
            )
        return self.scale_rewards == "group"

    def unused_fields(self) -> list[str]:
        """The fields set (not at their default) that this run never reads, as verl's adapter reports unused
        options: ``hadw_*`` under DGPO (but ``hadw_state_key``, ``hadw_log_metrics``), ``dgpo_*`` under HA-DW over
        GRPO, ``accuracy_reward_index`` where neither y_t / p̂ (``hadw_difficulty_from="reward"`` reads the mean
        reward) nor DGPO's question weights read an accuracy."""
        hadw, dgpo = self.adv_estimator == "hadw", self.uses_dgpo()
        shared = {"hadw_state_key", "hadw_log_metrics"}
        unused = [name for name, (path, f) in declared_fields().items() if getattr(self, name) != f.default and (
            (path.startswith("hadw.") and not hadw and name not in shared) or (path.startswith("dgpo.") and not dgpo))]
        if self.accuracy_reward_index is not None and not self.reads_accuracy():
            unused.append("accuracy_reward_index")
        return unused

    def warn_unused_fields(self) -> list[str]:
        """``unused_fields``, as one ``UnusedOptionsWarning`` naming them in the framework's words."""
        unused = self.unused_fields()
        if unused:
            names = ", ".join(self.terms.key(n) if n in ADAPTER_FIELDS else self.terms.key(declared_fields()[n][0])
                              for n in unused)
            warnings.warn(
                f"{names} {'is' if len(unused) == 1 else 'are'} set but this run "
                f"({self.terms.key('adv_estimator')}={self.adv_estimator}, "
                f"{self.terms.key('hadw.base')}={self.hadw_base}, "
                f"{self.terms.key('hadw.difficulty_from')}={self.hadw_difficulty_from}) does not read "
                f"{'it' if len(unused) == 1 else 'them'}: no effect. hadw_* is read by hadw, dgpo_* by dgpo and by "
                "hadw over dgpo, accuracy_reward_index where an accuracy is read (difficulty_from=accuracy, or "
                "DGPO's question weights).", UnusedOptionsWarning, stacklevel=3)
        return unused

    def reads_accuracy(self) -> bool:
        """The run reads an accuracy: HA-DW's y_t and p̂ (``hadw_difficulty_from="accuracy"``) or DGPO's question
        weights (``dgpo_dqw``, DGPO alone or as HA-DW's base)."""
        return (self.adv_estimator == "hadw" and self.hadw_options().difficulty_from == "accuracy") or (
            self.uses_dgpo() and self.dgpo_options().dqw)

    def uses_dgpo(self) -> bool:
        """DGPO runs: alone, or as HA-DW's base."""
        return self.adv_estimator == "dgpo" or self.hadw_options().base == "dgpo"

    def uses_valid_token_norm(self) -> bool:
        """DGPO's valid-token averaging is part of this run (DGPO, or HA-DW over DGPO, with it on)."""
        return self.uses_dgpo() and self.dgpo_options().valid_token_norm

    def algorithm_node(self) -> dict:
        """These options in the shape of verl's ``algorithm`` node (a plain dict: for comparisons with verl)."""
        return {**nested({**self._values("hadw"), **self._values("dgpo")}), "adv_estimator": self.adv_estimator,
                "norm_adv_by_std_in_grpo": self.norm_by_std()}

    def recorded_options(self, reward_weights: list[float] | None = None,
                         reward_funcs: list[str] | None = None) -> dict[str, Any]:
        """These options as an anchor file records them and a resume compares (``compatibility.flat_options``:
        the same flat keys as verl's, so a file means the same under every adapter), with which reward function is
        the accuracy, the reward functions' weights (the trainer's, ``reward_weights``) and their names in order
        (``reward_funcs``: which function the index and each weight name)."""
        return flat_options(self.hadw_options(), self.dgpo_options(), self.norm_by_std(), self.adv_estimator,
                            accuracy_index=self.accuracy_reward_index, reward_weights=reward_weights,
                            reward_funcs=reward_funcs)

"""``HadwGRPOConfig``: TRL's ``GRPOConfig`` plus HA-DW's and DGPO's options, derived from ``options.py``.

Every ``algorithm.hadw.*`` / ``algorithm.dgpo.*`` declaration becomes one dataclass field with the same default and
doc: ``algorithm.hadw.lambda_scale`` -> ``hadw_lambda_scale``, ``algorithm.hadw.anchor.eta`` -> ``hadw_anchor_eta``,
``algorithm.dgpo.temperature`` -> ``dgpo_temperature`` (the dots of verl's path become underscores). Values are
checked by the core's parser (``core.options.parse_section``), which verl's adapter runs too; its messages name the
TRL field (``trl_terms.TRL``).
``HfArgumentParser`` (``trl grpo`` style scripts) shows each field with its doc as ``--help``.

Two fields are TRL's own: ``adv_estimator`` (verl's ``algorithm.adv_estimator``: ``hadw`` or ``dgpo``; HA-DW over
DGPO is ``hadw`` with ``hadw_base="dgpo"``, as in verl) and ``accuracy_reward_index`` (which of ``reward_funcs`` is
the accuracy; verl has one score). TRL's ``scale_rewards`` stands for verl's ``algorithm.norm_adv_by_std_in_grpo``
(``"group"``: true, ``"none"``: false). Pure configuration: importing it imports ``trl``, nothing runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from dataclasses import dataclass, field
from typing import Any, Optional

from trl import GRPOConfig

from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.errors import ConfigError
from verl_hadw.core.options import DgpoConfig, HadwConfig, declarations, parse_section
from verl_hadw.trl.loss_types import check_loss_type
from verl_hadw.trl.trl_terms import TRL, trl_key
from verl_hadw.trl.trl_version import check_trl_version, check_truncation

__all__ = ["HadwGRPOConfig", "declared_fields", "trl_key", "fields_table", "ESTIMATORS"]

ESTIMATORS = ("hadw", "dgpo")
# the CLI type of each declaration kind; ``init`` is "first_batch" or a number, so it arrives as text
_TYPES = {"number": float, "integer": int, "flag": bool, "choice": str, "text": str, "threshold": Optional[float],
          "init": str}


@functools.lru_cache(maxsize=1)
def declared_fields() -> dict[str, tuple[str, dataclasses.Field]]:
    """TRL field name -> (the option's dotted path under ``algorithm``, its declaration), in declaration order."""
    return {trl_key(path): (path, f) for path, f in declarations().items() if f.metadata["kind"] != "section"}


def _help(path: str, f: dataclasses.Field) -> dict:
    """The field's metadata: ``help`` for HfArgumentParser (doc, range, verl's key), ``choices`` for a choice."""
    m = f.metadata
    valid = {"number": f"a number in {'(' if m['lo_open'] else '['}{m['lo']}, {m['hi']}]", "integer": f">= {m['lo']}",
             "threshold": "null or a number", "init": "'first_batch' or a number in [0, 1]"}.get(m["kind"], "")
    text = f"{m['doc'] or path}. {'Valid: ' + valid + '. ' if valid else ''}verl: algorithm.{path}."
    return {"help": text, **({"choices": list(m["choices"])} if m["kind"] == "choice" else {})}


def _with_declared_options(cls: type) -> type:
    """Add one field per declared option to ``cls``'s annotations before ``dataclass`` sees the class."""
    for name, (path, f) in declared_fields().items():
        cls.__annotations__[name] = _TYPES[f.metadata["kind"]]
        setattr(cls, name, field(default=f.default, metadata=_help(path, f)))
    return cls


def _nested(values: dict[str, Any]) -> dict:
    """{"hadw.anchor.eta": 8.0, ...} -> {"hadw": {"anchor": {"eta": 8.0}}, ...} (verl's node shape)."""
    out: dict = {}
    for path, value in values.items():
        *parents, leaf = path.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


@dataclass
@_with_declared_options
class HadwGRPOConfig(GRPOConfig):
    """``GRPOConfig`` with HA-DW / DGPO advantages: ``adv_estimator``, ``accuracy_reward_index`` and one
    ``hadw_*`` / ``dgpo_*`` field per option of verl-hadw (docs/trl.md lists them). Invalid values, and TRL settings
    under which the method would not be the one named, raise ``ConfigError`` at construction."""

    adv_estimator: str = field(default="hadw", metadata={
        "help": "hadw (HA-DW; hadw_base=dgpo: HA-DW over DGPO) | dgpo. verl: algorithm.adv_estimator.",
        "choices": list(ESTIMATORS)})
    accuracy_reward_index: Optional[int] = field(default=None, metadata={
        "help": "which of reward_funcs is the accuracy (HA-DW's y_t and p̂, DGPO's question weights); None: the "
                "combined reward, binary or thresholded by *_success_threshold as in verl."})

    def __post_init__(self):
        super().__post_init__()
        if self.adv_estimator not in ESTIMATORS:
            raise ConfigError(f"adv_estimator={self.adv_estimator!r} is not valid; choose one of: hadw, dgpo.")
        index = self.accuracy_reward_index
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
            raise ConfigError(f"accuracy_reward_index={index!r} is not valid; use None or an integer >= 0.")
        init = "hadw_anchor_init"  # "first_batch" or a number; the CLI gives text
        if isinstance(getattr(self, init), str) and getattr(self, init) != "first_batch":
            try:
                setattr(self, init, float(getattr(self, init)))
            except ValueError:
                pass  # the parser below names the field and what is valid
        self.hadw_options()  # every declared field, by verl's parser
        if self.adv_estimator == "dgpo" or self.hadw_options().base == "dgpo":
            self.dgpo_options()
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ConfigError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r} normalises each reward function "
                f"on its own (GDPO); {self.adv_estimator} replaces TRL's advantage and reads the weighted sum of "
                "the rewards: use multi_objective_aggregation='sum_then_normalize'."
            )
        if self.scale_rewards not in ("group", "none"):
            raise ConfigError(
                f"scale_rewards={self.scale_rewards!r} has no counterpart in {self.adv_estimator}: it normalises "
                "within each group. Use scale_rewards='group' (GRPO's std, verl's norm_adv_by_std_in_grpo=true) or "
                "'none' (Dr.GRPO, false); both only matter where the base divides by a std."
            )
        if self.uses_valid_token_norm():
            check_loss_type(self.loss_type, self.steps_per_generation, self.gradient_accumulation_steps)
            check_truncation(self.mask_truncated_completions)

    # ---------------------------------------------------------------------------------- the parsed options
    def _values(self, section: str) -> dict[str, Any]:
        return {path: getattr(self, name) for name, (path, _) in declared_fields().items()
                if path.startswith(section + ".")}

    def hadw_options(self) -> HadwConfig:
        """The HA-DW options, parsed by the core's parser; errors name the TRL field."""
        return parse_section("hadw", _nested(self._values("hadw"))["hadw"], TRL.key)

    def dgpo_options(self) -> DgpoConfig:
        """The DGPO options, parsed by the core's parser; errors name the TRL field."""
        return parse_section("dgpo", _nested(self._values("dgpo"))["dgpo"], TRL.key)

    def norm_by_std(self) -> bool:
        """verl's ``algorithm.norm_adv_by_std_in_grpo``, read from TRL's ``scale_rewards``."""
        return self.scale_rewards == "group"

    def uses_valid_token_norm(self) -> bool:
        """DGPO's valid-token averaging is part of this run (DGPO, or HA-DW over DGPO, with it on)."""
        dgpo = self.adv_estimator == "dgpo" or self.hadw_options().base == "dgpo"
        return dgpo and self.dgpo_options().valid_token_norm

    def algorithm_node(self) -> dict:
        """These options in the shape of verl's ``algorithm`` node (a plain dict: for comparisons with verl)."""
        return {**_nested({**self._values("hadw"), **self._values("dgpo")}), "adv_estimator": self.adv_estimator,
                "norm_adv_by_std_in_grpo": self.norm_by_std()}

    def recorded_options(self) -> dict[str, Any]:
        """These options as an anchor file records them and a resume compares (``compatibility.flat_options``:
        the same flat keys as verl's, so a file means the same under either adapter)."""
        return flat_options(self.hadw_options(), self.dgpo_options(), self.norm_by_std(), self.adv_estimator)


def _suggest_fields(init):
    """Wrap the dataclass ``__init__``: a TRL outside ``TRL_RANGE`` is refused; an unknown keyword is a
    ``ConfigError`` with "did you mean"."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        check_trl_version("HadwGRPOConfig")  # first: another TRL's fields and checks would fail naming nothing
        names = {f.name for f in dataclasses.fields(HadwGRPOConfig)}
        for key in kwargs:
            if key in names:
                continue
            ours = list(declared_fields()) + ["adv_estimator", "accuracy_reward_index"]
            hint = [n for n in ours if n.endswith("_" + key)] or difflib.get_close_matches(key, sorted(names), n=1)
            raise ConfigError(
                f"Unknown HadwGRPOConfig field {key!r}.{f' Did you mean {hint[0]!r}?' if hint else ''} The HA-DW / "
                f"DGPO fields are: {', '.join(ours)} (docs/trl.md)."
            )
        init(self, *args, **kwargs)

    return __init__


HadwGRPOConfig.__init__ = _suggest_fields(HadwGRPOConfig.__init__)


def fields_table() -> str:
    """The docs' table of the fields (docs/trl.md, kept equal by a test)."""
    rows = ["| field | verl key | default | meaning |", "|---|---|---|---|"]
    for name, (path, f) in declared_fields().items():
        default = "None" if f.default is None else repr(f.default)
        doc = f.metadata["doc"].replace("|", "\\|")  # a table cell
        rows.append(f"| `{name}` | `algorithm.{path}` | `{default}` | {doc} |")
    return "\n".join(rows)

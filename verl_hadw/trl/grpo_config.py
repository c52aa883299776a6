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
import functools
from dataclasses import dataclass

from trl import GRPOConfig

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.option_fields import ADAPTER_FIELDS, ESTIMATORS, OptionFields, closest_field, declared_fields
from verl_hadw.hf_trainer.adapter_fields import add_adapter_fields
from verl_hadw.trl.refusals import check_settings
from verl_hadw.trl.terms import TRL, trl_key
from verl_hadw.trl.version import check_trl_version

__all__ = ["HadwGRPOConfig", "declared_fields", "trl_key", "fields_table", "ESTIMATORS"]


@dataclass
@add_adapter_fields
class HadwGRPOConfig(OptionFields, GRPOConfig):
    """``GRPOConfig`` with HA-DW / DGPO advantages: ``adv_estimator``, ``accuracy_reward_index`` and one
    ``hadw_*`` / ``dgpo_*`` field per option of verl-hadw (docs/trl.md lists them). Invalid values, and TRL settings
    under which the method would not be the one named, raise ``ConfigError`` at construction."""

    terms = TRL  # the core's messages name TRL's fields

    def __post_init__(self):
        super().__post_init__()
        self.check_hadw()

    def check_hadw(self) -> None:
        """Every check of HA-DW's and DGPO's fields and of the TRL settings they constrain (``refusals``).
        ``__post_init__`` runs it, and ``HadwGRPOTrainer`` again on the config it is handed (scripts set fields after
        building one)."""
        self.check_adapter_fields()  # adv_estimator, accuracy_reward_index, every declared field (the core's parser)
        check_settings(self)


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
            ours = [*declared_fields(), *ADAPTER_FIELDS]
            hint = closest_field(key, names)
            raise ConfigError(
                f"Unknown HadwGRPOConfig field {key!r}.{f' Did you mean {hint!r}?' if hint else ''} The HA-DW / "
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
        doc = f.metadata["doc"].replace("|", "\\|")  # inside a table
        rows.append(f"| `{name}` | `algorithm.{path}` | `{default}` | {doc} |")
    return "\n".join(rows)

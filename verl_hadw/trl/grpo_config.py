"""``HadwGRPOConfig``: TRL's ``GRPOConfig`` plus HA-DW's and DGPO's fields, one per option of
``verl_hadw.core.options`` (verl's ``algorithm.hadw.anchor.eta`` is ``hadw_anchor_eta``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trl import GRPOConfig

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import KEYWORDS, OptionFields, closest_field, hf_terms, parameters_doc
from verl_hadw.trl.checks import check_settings, check_trl_version

__all__ = ["HadwGRPOConfig"]

TRL = hf_terms("TRL", KEYWORDS, resume_from="train(resume_from_checkpoint=<its folder>)",
               new_experiment="another output_dir, or train() without resume_from_checkpoint")


class _CheckedKeywords:
    """Before the dataclass ``__init__`` runs: a TRL outside ``TRL_RANGE``, or an unknown keyword ("did you mean"),
    is a ``ConfigError``. A base class, so that tools read the dataclass ``__init__``'s signature."""

    def __new__(cls, *args, **kwargs):
        check_trl_version(cls.__name__)  # first: another TRL's fields and checks would fail naming nothing
        names = {f.name for f in dataclasses.fields(cls)}
        for key in kwargs:
            if key not in names:
                hint = closest_field(key, names)
                raise ConfigError(
                    f"Unknown {cls.__name__} field {key!r}.{f' Did you mean {hint!r}?' if hint else ''} The "
                    f"HA-DW / DGPO fields are: {', '.join(f.name for f in dataclasses.fields(OptionFields))}.")
        return super().__new__(cls)


@dataclass
class HadwGRPOConfig(_CheckedKeywords, OptionFields, GRPOConfig):
    r"""
    Configuration class for the [`HadwGRPOTrainer`]: [`GRPOConfig`] with HA-DW's or DGPO's advantage.

    Invalid values, and TRL settings under which the method would not be the one named, raise `ConfigError` at
    construction. TRL's `scale_rewards` stands for verl's `algorithm.norm_adv_by_std_in_grpo` (`"group"`: true,
    `"none"`: false). Each `hadw_*` / `dgpo_*` field is verl's `algorithm.hadw.*` / `algorithm.dgpo.*` option, its
    dots made underscores.

    Parameters:
    """

    terms = TRL  # the core's messages name TRL's fields

    def __post_init__(self):
        super().__post_init__()
        self.check_hadw()

    def check_hadw(self) -> None:
        """Check HA-DW's and DGPO's fields and the TRL settings they constrain; ``HadwGRPOTrainer`` runs it again."""
        self.check_adapter_fields()
        check_settings(self)


HadwGRPOConfig.__doc__ += parameters_doc()  # TRL's layout, from the fields' help: each option's words written once


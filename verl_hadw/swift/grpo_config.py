"""``HadwSwiftArguments``: the HA-DW / DGPO flags of ``verl-hadw-swift rlhf`` (``--adv_estimator``, ``--hadw_*``,
``--dgpo_*``), one field each, with the core's defaults and docs."""

from __future__ import annotations

from dataclasses import dataclass

from verl_hadw.hf_trainer.option_fields import FLAGS, OptionFields, hf_terms

__all__ = ["HadwSwiftArguments"]

SWIFT = hf_terms("ms-swift", FLAGS, resume_from="--resume_from_checkpoint <its folder>",
                 new_experiment="another --output_dir, or no --resume_from_checkpoint (or --resume_only_model true "
                                "--ignore_data_skip true: the weights only, a new run)")


@dataclass
class HadwSwiftArguments(OptionFields):
    """The HA-DW / DGPO options of one swift run, one flag per field; each ``--hadw_*`` / ``--dgpo_*`` flag is verl's
    ``algorithm.hadw.*`` / ``algorithm.dgpo.*`` option, its dots made underscores (``--help`` lists them)."""

    terms = SWIFT  # the core's messages name swift's flags
    scale_rewards = "group"  # swift's --scale_rewards, set from swift's arguments (not a flag of ours)

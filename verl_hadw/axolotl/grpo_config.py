"""The options on Axolotl's GRPO trainer: ``HadwTrainingArgs``, the ``OptionFields`` on the trainer's ``args``, set
from the YAML's keys (``HadwArgs``, args.py; ``KEYS``: each field's key), and the words the messages name them in."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from verl_hadw.axolotl.checks import TRL_KEYS
from verl_hadw.hf_trainer.option_fields import ADAPTER_FIELDS, YAML, OptionFields, hf_terms

# the option field -> its YAML key: every key the plugin adds starts with hadw_ or dgpo_, none bare beside Axolotl's
KEYS = {f.name: f"hadw_{f.name}" if f.name in ADAPTER_FIELDS else f.name for f in dataclasses.fields(OptionFields)}
AXOLOTL = hf_terms("Axolotl", YAML, resume_from="resume_from_checkpoint: <its folder>",
                   new_experiment="another output_dir, or no resume_from_checkpoint",
                   names={**TRL_KEYS, **{name: f"hadw_{name}" for name in ADAPTER_FIELDS}})


@dataclass
class HadwTrainingArgs(OptionFields):
    """The options on Axolotl's GRPO training arguments (``get_training_args_mixin``), set from the YAML's keys."""

    terms = AXOLOTL  # the core's messages name the YAML's keys


def option_values(config) -> dict:
    """The option fields' values of a validated Axolotl config (or of ``HadwArgs``), read from their keys."""
    return {name: getattr(config, key) for name, key in KEYS.items()}

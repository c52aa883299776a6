"""``HadwAxolotlGRPOTrainer``: Axolotl's ``AxolotlGRPOTrainer`` (TRL's ``GRPOTrainer`` with Axolotl's mixins)
training on HA-DW's or DGPO's advantage, which replaces TRL's in ``_generate_and_score_completions``
(``hf_trainer.trl_trainer``). ``HadwPlugin`` makes it the run's ``trainer_cls``."""

from __future__ import annotations

# internal: Axolotl's GRPO trainer class (checked on Axolotl 0.19.0 with TRL 1.9.0)
from axolotl.core.trainers.grpo.trainer import AxolotlGRPOTrainer

from verl_hadw.axolotl.checks import check_trainer_args
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.option_fields import OptionFields
from verl_hadw.hf_trainer.trl_trainer import TrlTrainerHooks


class HadwAxolotlGRPOTrainer(TrlTrainerHooks, AxolotlGRPOTrainer):
    """``AxolotlGRPOTrainer`` whose advantages are HA-DW's or DGPO's (``args``: Axolotl's GRPO config, which holds
    ``HadwTrainingArgs``' fields once ``HadwPlugin`` is listed under the YAML's ``plugins:``). A completion no reward
    function scored is TRL's (``excludes_unscorable``): Axolotl 0.19.0 runs its pinned TRL 1.9.0's step, which
    leaves it out of its group."""

    def __init__(self, *args, **kwargs):
        config = kwargs.get("args")
        if not isinstance(config, OptionFields):
            raise ConfigError(f"HadwAxolotlGRPOTrainer got args of type {type(config).__name__}, without the HA-DW / "
                              "DGPO keys. List verl_hadw.axolotl.HadwPlugin under the YAML's plugins:.")
        check_trainer_args(config)  # TRL's settings as Axolotl resolved them, before the trainer builds anything
        super().__init__(*args, **kwargs)
        self.start_hadw(self.args)

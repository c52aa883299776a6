"""``HadwGRPOTrainer``: TRL's ``GRPOTrainer`` training on HA-DW's or DGPO's advantage, which replaces TRL's
``advantages`` in ``_generate_and_score_completions`` (``hf_trainer.trl_trainer``)."""

from __future__ import annotations

from trl import GRPOTrainer

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.reward_matrix import check_weights
from verl_hadw.hf_trainer.trl_trainer import TrlTrainerHooks
from verl_hadw.trl.checks import check_trl_version
from verl_hadw.trl.grpo_config import HadwGRPOConfig


class HadwGRPOTrainer(TrlTrainerHooks, GRPOTrainer):
    """``GRPOTrainer`` whose advantages are HA-DW's or DGPO's (``args``: a ``HadwGRPOConfig``)."""

    def __init__(self, model, reward_funcs=None, args: HadwGRPOConfig | None = None, *rest, **kwargs):
        check_trl_version("HadwGRPOTrainer")
        if args is None:  # as TRL: a default config named after the model, here with HA-DW's defaults too
            # private API: transformers' config._name_or_path, as TRL reads it (transformers 5.10.4, TRL 1.16.0)
            name = model if isinstance(model, str) else getattr(model.config, "_name_or_path", "") or "model"
            args = HadwGRPOConfig(f"{name.split('/')[-1]}-GRPO")
        if not isinstance(args, HadwGRPOConfig):
            raise ConfigError(f"HadwGRPOTrainer got args of type {type(args).__name__}. Pass args=HadwGRPOConfig(...) "
                              "(GRPOConfig's fields plus adv_estimator, hadw_*, dgpo_*).")
        args.check_hadw()  # again, before TRL builds anything: a script may have set fields after construction
        if args.reward_weights is not None:
            check_weights(args.reward_weights, [], args)
        super().__init__(model, reward_funcs, args, *rest, **kwargs)
        self.start_hadw(args)

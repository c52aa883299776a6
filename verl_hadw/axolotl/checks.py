"""The Axolotl releases (``verl_hadw.AXOLOTL_RANGE``) and the Axolotl and TRL settings under which HA-DW and DGPO are
the methods named: checked on Axolotl's validated config, before the model loads, and on the trainer's arguments."""

from __future__ import annotations

import copy
from typing import Any, Callable

from verl_hadw import AXOLOTL_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checks import LossTypes, in_range, installed
from verl_hadw.hf_trainer.option_fields import YAML, check_accuracy_index
from verl_hadw.hf_trainer.reward_matrix import check_weights
from verl_hadw.hf_trainer.trl_trainer import TRL_LOSSES, check_trl_settings

TRAINER_PATH = "verl_hadw.axolotl.grpo_trainer.HadwAxolotlGRPOTrainer"  # the plugin sets trainer_cls to it
TRL_KEYS = {key: f"trl.{key}" for key in (  # TRL's settings the messages name, in Axolotl's trl: section
    "loss_type", "scale_rewards", "reward_weights", "multi_objective_aggregation", "mask_truncated_completions")}
LOSS_TYPES = LossTypes(TRL_LOSSES, YAML, {**TRL_KEYS, "steps_per_generation": "trl.generation_batch_size",  # in rows
                       "gradient_accumulation_steps": "micro_batch_size × gradient_accumulation_steps × ranks"})


def _trl(cfg, key: str, default: Any = None) -> Any:
    return getattr(cfg.trl, key, default) if cfg.trl is not None else default


# (the Axolotl setting as a user writes it, is it set? (read from Axolotl's validated config), why, the way out)
REFUSED_SETTINGS: list[tuple[str, Callable[[Any], bool], str, str]] = [
    ("rl other than grpo", lambda c: str(getattr(c.rl, "value", c.rl)) != "grpo",
     "HA-DW and DGPO replace GRPO's advantage, which other rl types do not compute (rl: gdpo normalises each reward "
     "function on its own); without GRPO, remove the plugin", "set rl: grpo"),
    ("context_parallel_size > 1", lambda c: (c.context_parallel_size or 1) > 1,
     "it selects AxolotlGRPOSequenceParallelTrainer, which computes GRPO's advantages in its own "
     "_generate_and_score_completions, where HA-DW's and DGPO's would not replace them",
     "set context_parallel_size: 1"),
    ("trl.async_prefetch, trl.use_data_producer",
     lambda c: bool(_trl(c, "async_prefetch") or _trl(c, "use_data_producer")),
     "they select AxolotlAsyncGRPOTrainer, which computes GRPO's advantages in its data producer, for batches "
     "generated ahead of the step that trains on them (and streamed, replayed or re-rolled), so the anchor's batch "
     "accuracy would not be the trained step's", "set both to false"),
    ("trl.use_liger_loss", lambda c: bool(_trl(c, "use_liger_loss")),
     "Liger's fused GRPO loss is not checked against DGPO's valid-token averaging and needs a GPU, where the adapter "
     "is not proven", "set trl.use_liger_loss: false"),
    ("trainer_cls", lambda c: c.trainer_cls not in (None, TRAINER_PATH) and not _ours(c.trainer_cls),
     f"the plugin trains through {TRAINER_PATH}, which another trainer_cls would replace",
     "remove trainer_cls, or name a subclass of HadwAxolotlGRPOTrainer"),
]


def _ours(path: str) -> bool:
    """Whether ``trainer_cls: <path>`` names ``HadwAxolotlGRPOTrainer`` or a subclass of it."""
    # internal: Axolotl's own reading of trainer_cls (checked on Axolotl 0.19.0 with TRL 1.9.0)
    from axolotl.utils.import_helper import get_cls_from_module_str

    try:
        found = get_cls_from_module_str(path)
    except (ImportError, AttributeError, ValueError):
        return False
    return any(f"{c.__module__}.{c.__qualname__}" == TRAINER_PATH for c in getattr(found, "__mro__", ()))


def check_axolotl_version() -> str:
    """The installed Axolotl's version; ``ConfigError`` where it lies outside ``AXOLOTL_RANGE``."""
    found = installed("axolotl", "axolotl")
    if not in_range(found, AXOLOTL_RANGE):
        raise ConfigError(f"verl-hadw's Axolotl adapter supports axolotl{AXOLOTL_RANGE}; the installed Axolotl is "
                          f'{found}. Install one of those releases: pip install "axolotl{AXOLOTL_RANGE}".')
    return found


def check_config(cfg, options) -> None:
    """Raise ``ConfigError`` for an option of ``options`` (``HadwTrainingArgs``) out of range, or a setting of ``cfg``
    (Axolotl's validated config) under which the method would not be the one named: what the trainer checks, here."""
    from trl import GRPOConfig

    check_axolotl_version()
    options.check_adapter_fields()
    method = options.terms.setting("adv_estimator", options.adv_estimator)  # hadw_adv_estimator: hadw
    for setting, is_set, why, way_out in REFUSED_SETTINGS:
        if is_set(cfg):
            raise ConfigError(f"{setting} is not supported with {method}: {why}. To use the plugin, {way_out}.")
    trl = {f.name: f.default for f in GRPOConfig.__dataclass_fields__.values()}  # TRL's defaults, then Axolotl's keys
    trl.update({k: v for k, v in (cfg.trl.model_dump() if cfg.trl is not None else {}).items() if v is not None})
    if funcs := trl.get("reward_funcs"):  # the reward weights and index, refused before the model loads
        check_weights(trl["reward_weights"] or [1.0] * len(funcs), funcs, options)
        check_accuracy_index(options.accuracy_reward_index, funcs, options.terms)
    for key in ("loss_type", "scale_rewards", "multi_objective_aggregation", "mask_truncated_completions",
                "top_entropy_quantile"):
        setattr(options, key, trl[key])
    options.scale_rewards = {True: "group", False: "none"}.get(options.scale_rewards, options.scale_rewards)  # as TRL
    options.steps_per_generation, options.gradient_accumulation_steps = trl["generation_batch_size"], (  # in rows
        (cfg.micro_batch_size or 1) * (cfg.gradient_accumulation_steps or 1) * (cfg.world_size or 1))
    check_trl_settings(options, LOSS_TYPES, installed("trl", "trl"))


def check_trainer_args(args) -> None:
    """Raise ``ConfigError`` for a TRL setting of the trainer's ``args`` as Axolotl built them (defaults resolved)."""
    rows = copy.copy(args)  # the generation batch in rows, as LOSS_TYPES names it
    rows.steps_per_generation, rows.gradient_accumulation_steps = args.generation_batch_size, (
        args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size)
    check_trl_settings(rows, LOSS_TYPES, installed("trl", "trl"))

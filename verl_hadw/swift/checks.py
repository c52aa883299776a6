"""The ms-swift releases (``verl_hadw.SWIFT_RANGE``) and swift settings under which HA-DW and DGPO are the methods."""

from __future__ import annotations

from typing import Any, Callable

from verl_hadw import SWIFT_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checks import GLOBAL_TOKENS, SEQUENCE_MEANS, LossTypes, in_range, installed
from verl_hadw.hf_trainer.option_fields import FLAGS
from verl_hadw.hf_trainer.reward_matrix import check_weights
from verl_hadw.swift.grpo_config import HadwSwiftArguments

__all__ = ["REFUSED_SETTINGS", "LOSS_TYPES", "installed_swift", "check_swift_version", "check_settings",
           "check_trainer"]

# loss_type -> (exact, why), for swift 4.3-4.6's GRPOTrainer loss
LOSS_TYPES = LossTypes({
    "dapo": (True, GLOBAL_TOKENS),
    "cispo": (True, GLOBAL_TOKENS),
    "grpo": (False, SEQUENCE_MEANS),
    "sapo": (False, "averages each completion over its own length first, like grpo"),
    "bnpo": (False, "divides by each process's micro-batch tokens, not by the generation batch's"),
    "dr_grpo": (False, "divides by a constant (batch size × max_completion_length), not by tokens"),
}, FLAGS)
SWIFT_LOSS_TYPES = (*LOSS_TYPES.table, "fipo", "real")  # every loss type of swift 4.3-4.6's GRPOTrainer

# (swift setting as a user writes it, is it set? (read from swift's parsed RLHFArguments), why it is refused)
_Check = Callable[[Any], bool]
REFUSED_SETTINGS: list[tuple[str, _Check, str]] = [
    ("--rlhf_type other than grpo", lambda a: a.rlhf_type != "grpo",
     "HA-DW and DGPO replace GRPO's advantage; other rlhf types run under swift rlhf"),
    ("--advantage_estimator rloo or reinforce_plus_plus", lambda a: a.advantage_estimator != "grpo",
     "their baselines are not GRPO's group mean, which HA-DW reweights and DGPO replaces"),
    ("--scale_rewards batch", lambda a: a.scale_rewards == "batch",
     "a batch-wide std has no counterpart: both methods normalise within each group (group: GRPO's std, none: "
     "Dr.GRPO)"),
    ("--scale_rewards gdpo", lambda a: a.scale_rewards == "gdpo",
     "GDPO normalises each reward function on its own; HA-DW and DGPO read the weighted sum of the rewards"),
    ("--dynamic_sample true", lambda a: bool(getattr(a, "dynamic_sample", False)),
     "DAPO's resampling drops and redraws groups, so the anchor would read the accuracy of a filtered batch"),
    ("--kl_in_reward true", lambda a: bool(getattr(a, "kl_in_reward", False)),
     "the KL penalty would enter the rewards the accuracy and difficulty are read from"),
    ("--sequence_parallel_size > 1", lambda a: (getattr(a, "sequence_parallel_size", 1) or 1) > 1,
     "swift regroups samples across the sequence-parallel group; the adapter is checked without it"),
    ("--use_flash_ckpt true", lambda a: bool(getattr(a, "use_flash_ckpt", False)),
     "flash checkpoints are written asynchronously outside checkpoint-N, where the anchor file is saved"),
    ("--advantage_reweight rlsd, --sdar_loss_coef > 0",
     lambda a: getattr(a, "advantage_reweight", None) is not None or (getattr(a, "sdar_loss_coef", 0) or 0) > 0,
     "they rewrite the advantage per token after it is computed; untested with HA-DW's and DGPO's"),
    ("--teacher_model, --teacher_model_server",
     lambda a: getattr(a, "teacher_model", None) is not None or getattr(a, "teacher_model_server", None) is not None,
     "OPD-RL adds a teacher's log-ratio to the advantage per token; untested with HA-DW's and DGPO's"),
    ("--loss_type real", lambda a: _loss_type(a) == "real",
     "REAL forces scale_rewards none and replaces the advantage-weighted loss"),
]


def installed_swift() -> str:
    """The installed ms-swift's version (its distribution's metadata)."""
    return installed("ms-swift", "swift")


def check_swift_version() -> str:
    """The installed ms-swift's version; ``ConfigError`` where it lies outside ``SWIFT_RANGE``."""
    found = installed_swift()
    if not in_range(found, SWIFT_RANGE):
        raise ConfigError(f"verl-hadw's swift adapter supports ms-swift{SWIFT_RANGE}; the installed ms-swift is "
                          f'{found}. Install one of those releases: pip install "ms-swift{SWIFT_RANGE}".')
    return found


def _loss_type(args) -> str:
    loss_type = getattr(args, "loss_type", None)
    return loss_type[0] if isinstance(loss_type, (list, tuple)) and len(loss_type) == 1 else loss_type


def check_settings(args, ours: HadwSwiftArguments) -> None:
    """Raise ``ConfigError`` for a ``REFUSED_SETTINGS`` setting, a reward weight, or a loss type DGPO cannot follow."""
    for setting, is_set, why in REFUSED_SETTINGS:
        if is_set(args):
            raise ConfigError(f"{setting} is not supported with --adv_estimator {ours.adv_estimator}: {why}. Leave "
                              "it at swift's default, or run swift rlhf.")
    loss_type = _loss_type(args)
    if loss_type not in SWIFT_LOSS_TYPES:  # swift itself would stop at its first loss, after a generation batch
        raise ConfigError(f"--loss_type {loss_type} is not one of swift's GRPO loss types. Use one of: "
                          f"{', '.join(SWIFT_LOSS_TYPES)}.")
    weights, names = getattr(args, "reward_weights", None), [str(n) for n in getattr(args, "reward_funcs", None) or []]
    if weights:
        check_weights(weights, names, ours)
    if ours.uses_valid_token_norm():
        LOSS_TYPES.check(_loss_type(args), getattr(args, "steps_per_generation", None),
                         args.gradient_accumulation_steps)
        LOSS_TYPES.check_masks(_token_masks(args))


def _token_masks(args) -> dict[str, tuple[object, str]]:
    """The swift settings that drop loss tokens inside the loss, after the advantages, with what each drops."""
    masks = {}
    if getattr(args, "overlong_filter", False):
        masks["overlong_filter"] = (True, "drops truncated completions' tokens")
    quantile = getattr(args, "top_entropy_quantile", 1.0)
    if quantile is not None and quantile < 1.0:
        masks["top_entropy_quantile"] = (quantile, "trains only each micro-batch's high-entropy tokens")
    return masks


def check_trainer(trainer, ours: HadwSwiftArguments) -> None:
    """Raise ``ConfigError`` for what swift decides only when it builds the trainer (sample counts, batch sizes)."""
    if getattr(trainer, "dynamic_num_samples", False):
        raise ConfigError(
            "this multi-turn run's sample count varies per prompt (swift's dynamic_num_samples), but HA-DW's and "
            "DGPO's groups are runs of --num_generations completions. Use a multi-turn scheduler that returns one "
            "sample per completion, or swift rlhf.")
    if ours.uses_valid_token_norm():
        decided = trainer.args  # as swift decided them, whichever flags set them
        LOSS_TYPES.check(_loss_type(decided), None, decided.gradient_accumulation_steps)
        try:
            LOSS_TYPES.check(_loss_type(decided), decided.steps_per_generation, decided.gradient_accumulation_steps)
        except ConfigError as refused:
            raise ConfigError(
                f"{refused} Swift derived --steps_per_generation {decided.steps_per_generation} from "
                f"--generation_batch_size {decided.generation_batch_size}, --per_device_train_batch_size "
                f"{decided.per_device_train_batch_size} and {decided.world_size} process(es): set "
                "--generation_batch_size to their product with --gradient_accumulation_steps, or leave it unset."
            ) from None

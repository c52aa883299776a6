"""The options of an HF-Trainer-based adapter as flat fields: the declared ones (``core.option_fields``) and the two
fields of the adapter's own, written once and spelled in the framework's words (``cls.terms``).

``adv_estimator`` is verl's ``algorithm.adv_estimator`` (``hadw``, or ``dgpo``; HA-DW over DGPO is ``hadw`` with
``hadw_base=dgpo``, as in verl); ``accuracy_reward_index`` says which of the reward functions is the accuracy (verl
has one score). TRL's ``HadwGRPOConfig`` and ms-swift's ``HadwSwiftArguments`` are built with ``add_adapter_fields``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.option_fields import ESTIMATORS, add_declared_fields

__all__ = ["add_adapter_fields", "check_accuracy_index"]


def add_adapter_fields(cls: type) -> type:
    """Add ``adv_estimator`` and ``accuracy_reward_index`` (first), then one field per declared option, to ``cls``
    (a class with ``terms``, before ``dataclass`` sees it). Their help names the framework's fields or flags."""
    key, setting = cls.terms.key, cls.terms.setting
    own = {
        "adv_estimator": (str, field(default="hadw", metadata={
            "help": f"hadw (HA-DW; {setting('hadw.base', 'dgpo')}: HA-DW over DGPO) | dgpo. verl: "
                    "algorithm.adv_estimator.", "choices": list(ESTIMATORS)})),
        "accuracy_reward_index": (Optional[int], field(default=None, metadata={
            "help": f"which of {key('reward_funcs')} is the accuracy (HA-DW's y_t and p̂, DGPO's question weights); "
                    "unset: the combined reward, binary or thresholded by *_success_threshold as in verl."})),
    }
    cls.__annotations__ = {**{name: kind for name, (kind, _) in own.items()}, **cls.__dict__.get("__annotations__", {})}
    for name, (_, value) in own.items():
        setattr(cls, name, value)
    return add_declared_fields(cls)


def check_accuracy_index(index: int | None, names: list[str], terms) -> None:
    """``accuracy_reward_index`` names one of the trainer's reward functions (``names``), once the trainer has them."""
    if index is not None and index >= len(names):
        raise ConfigError(
            f"{terms.setting('accuracy_reward_index', index)} is out of range: there are {len(names)} reward "
            f"function(s) ({', '.join(f'{i}: {n}' for i, n in enumerate(names))}); valid: 0..{len(names) - 1}, or "
            "leave it unset.")

"""One read of verl's config per estimator call: what the call needs, handed down and never read again.

verl passes each estimator call its ``algorithm`` node (an OmegaConf ``DictConfig``, a child of the full resolved
config). ``read_call`` reads it once: the plain, resolved ``algorithm`` section, the ``trainer`` node beside it (None
for a plain dict or a detached node, as in unit use) and the run's parsed options (``RunOptions``). The parse and the
checks (near misses raise; unused options, an anchor nobody saves and an ignored callback warn) run on the first call
of a configuration in this process only; a later call with the same configuration gets the same ``RunOptions`` and
runs no check. Everything after the read (the metrics switch, the anchor client, both checkpoint back-ends, the
estimator record) takes the ``CallConfig``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from verl_hadw.core.errors import ConfigError
from verl_hadw.verl_adapter.config.checks import check_algorithm, warn_ignored_callback, warn_unsaved_anchor
from verl_hadw.verl_adapter.config.run_options import RunOptions, parse_run
from verl_hadw.verl_adapter.process_state import PROCESS

__all__ = ["CallConfig", "read_call", "plain_algorithm", "trainer_of", "MAX_CONFIGS"]

MAX_CONFIGS = 16  # configurations remembered per process (a sweep in one notebook)
_SAVING = ("use_v1", "save_freq", "checkpoint_callback_class")  # the trainer keys the checks read


@dataclass(frozen=True, eq=False)
class CallConfig:
    """What one estimator call read of verl's config."""

    node: Any  # the node verl passed: it tells one run's calls from another's (by identity)
    algorithm: dict  # the ``algorithm`` section, plain and resolved
    trainer: Any  # verl's ``trainer`` node (a ``DictConfig``), or None outside a full verl config
    run: RunOptions  # the parsed options (parsed once per configuration)


def plain_algorithm(config: Any) -> dict:
    """verl's ``algorithm`` node (a ``DictConfig``, a mapping, a dataclass or None) as a plain dict, resolved."""
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        node = OmegaConf.to_container(config, resolve=True)
        if isinstance(node, dict):
            return node
    if isinstance(config, Mapping):
        return dict(config)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    raise ConfigError(f"algorithm must be a mapping, got {type(config).__name__}: {config!r}")


def trainer_of(algorithm: Any) -> Any:
    """verl's ``trainer`` node, reached from the ``algorithm`` node verl passes the estimators (a child of the full
    resolved config: ``OmegaConf.select(algorithm, "..trainer")``); None for a plain dict or a detached node."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(algorithm, DictConfig):
        return None
    try:
        trainer = OmegaConf.select(algorithm, "..trainer", default=None)
    except OmegaConfBaseException:  # the node has no parent
        return None
    return trainer if isinstance(trainer, DictConfig) else None


def _frozen(value: Any) -> Any:
    """``value`` (plain dicts, lists, scalars) as a hashable key."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def read_call(config: Any) -> CallConfig:
    """The one read of an estimator call's ``config`` (the node verl passes): parsed and checked on the first call
    of its configuration in this process (what identifies one: the ``algorithm`` section's values and the trainer
    keys the checks read)."""
    algorithm = plain_algorithm(config)
    trainer = trainer_of(config)
    saving = None if trainer is None else tuple(trainer.get(k, None) for k in _SAVING)
    key = (_frozen(algorithm), saving)
    checked = PROCESS.checked_configs
    run = checked.get(key)
    if run is None:
        check_algorithm(algorithm)  # also without the checkpoint callback: near misses raise, unused options warn
        warn_unsaved_anchor(algorithm, trainer)  # v1 trainer saving checkpoints without the callback: said at once
        warn_ignored_callback(algorithm, trainer)  # verl 0.9.0: the shipped YAMLs' checkpoint_callback_class
        run = checked[key] = parse_run(algorithm)  # remembered only once parsed: a bad option stops every call
        while len(checked) > MAX_CONFIGS:
            checked.pop(next(iter(checked)))
    return CallConfig(config, algorithm, trainer, run)

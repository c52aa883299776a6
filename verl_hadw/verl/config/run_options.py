"""verl's ``algorithm`` node as the core's options: ``read_call`` reads it once per estimator call, and parses and
checks it once per configuration (``parse_run``, ``checks``); what it read (``CallConfig``) is handed down."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verl_hadw.core import options as core_options
from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.errors import ConfigError
from verl_hadw.core.options import DgpoConfig, HadwConfig
from verl_hadw.verl.config.checks import check_algorithm, ignored_callback, unsaved_anchor, warn_once
from verl_hadw.verl.process_state import PROCESS
from verl_hadw.verl.verl_terms import VERL

__all__ = ["RunOptions", "parse_run", "CallConfig", "read_call", "plain_algorithm", "trainer_of"]

MAX_CONFIGS = 16  # configurations remembered per process (a sweep in one notebook)
_SAVING = ("use_v1", "save_freq", "checkpoint_callback_class")  # the trainer keys the checks read


@dataclass(frozen=True)
class RunOptions:
    """Every option one verl run has, parsed."""

    estimator: str | None  # algorithm.adv_estimator
    hadw: HadwConfig
    dgpo: DgpoConfig
    norm_by_std: bool  # algorithm.norm_adv_by_std_in_grpo

    def flat(self) -> dict[str, Any]:
        """The options as an anchor file records them (``compatibility.flat_options``)."""
        return flat_options(self.hadw, self.dgpo, self.norm_by_std, self.estimator)


def parse_run(algorithm: Mapping | None) -> RunOptions:
    """The run's ``RunOptions`` from verl's ``algorithm`` section (None: the defaults); ``ConfigError`` on a bad key."""
    algorithm = {} if algorithm is None else algorithm
    estimator = algorithm.get("adv_estimator", "gae")
    norm_by_std = core_options.plain_value(algorithm.get("norm_adv_by_std_in_grpo", True))
    if not isinstance(norm_by_std, bool):
        raise ConfigError(f"algorithm.norm_adv_by_std_in_grpo must be true or false, got {norm_by_std!r}.")
    sections = (core_options.parse_section(s, algorithm.get(s), VERL.key) for s in ("hadw", "dgpo"))
    return RunOptions(str(estimator) if estimator is not None else None, *sections, norm_by_std)


@dataclass(frozen=True, eq=False)
class CallConfig:
    """What one estimator call read of verl's config."""

    node: Any  # the node verl passed: it tells one run's calls from another's (by identity)
    algorithm: dict  # the ``algorithm`` section, plain and resolved
    trainer: Any  # verl's ``trainer`` node (a ``DictConfig``), or None outside a full verl config
    run: RunOptions


def plain_algorithm(config: Any) -> dict:
    """verl's ``algorithm`` node (a ``DictConfig``, a mapping, a dataclass or None) as a plain dict, resolved."""
    if type(config).__module__.startswith("omegaconf"):
        node = OmegaConf.to_container(config, resolve=True)
        if isinstance(node, dict):
            return node
    return core_options.plain_dict(config, "algorithm")


def trainer_of(algorithm: Any) -> Any:
    """verl's ``trainer`` node beside the ``algorithm`` node verl passes (None: a plain dict or a detached node)."""
    if not isinstance(algorithm, DictConfig):
        return None
    try:
        # verl internal: the trainers pass config.algorithm, a child of the full config (checked on verl 0.9.0, 0.9.1)
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
    """The one read of a call's ``config`` (verl's ``algorithm`` node), parsed and checked once per configuration."""
    algorithm, trainer = plain_algorithm(config), trainer_of(config)
    saving = None if trainer is None else tuple(trainer.get(k, None) for k in _SAVING)
    key = (_frozen(algorithm), saving)
    checked = PROCESS.checked_configs
    run = checked.get(key)
    if run is None:
        check_algorithm(algorithm)  # near misses raise, unused options warn
        warn_once(unsaved_anchor(algorithm, trainer))
        warn_once(ignored_callback(algorithm, trainer))
        run = checked[key] = parse_run(algorithm)  # remembered only once parsed: a bad option stops every call
        while len(checked) > MAX_CONFIGS:
            checked.pop(next(iter(checked)))
    return CallConfig(config, algorithm, trainer, run)

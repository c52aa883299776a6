"""verl's ``algorithm`` node as the core's options: read once, parsed once, handed down.

verl passes the estimator the raw ``algorithm`` node (an OmegaConf ``DictConfig``, never converted to a dataclass
in 0.9.1), so unknown keys would otherwise be accepted silently. ``parse_run`` turns the node into a plain dict
once and parses every option the run has with the core's parser, under verl's names (``verl_terms.VERL``):
``algorithm.hadw``, ``algorithm.dgpo``, ``algorithm.norm_adv_by_std_in_grpo`` and ``algorithm.adv_estimator``.
The estimators, the checkpoint callback, the metrics switch, the anchor client and both checkpoint back-ends read
that one ``RunOptions`` (``config_check.options_for_call`` parses once per configuration).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from verl_hadw.core import options as core_options
from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.errors import ConfigError
from verl_hadw.core.options import DgpoConfig, HadwConfig
from verl_hadw.verl_adapter.verl_terms import VERL

__all__ = [
    "RunOptions", "parse_run", "plain_algorithm", "algorithm_node", "parse_hadw", "parse_dgpo", "grpo_norm_by_std",
    "log_metrics", "options_of",
]


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


def algorithm_node(config: Any, name: str) -> dict:
    """``config.<name>`` of verl's ``algorithm`` node as a plain dict ({} when absent)."""
    node = plain_algorithm(config).get(name)
    if node is None:
        return {}
    if isinstance(node, Mapping):
        return plain_algorithm(node)
    raise ConfigError(f"algorithm.{name} must be a mapping, got {type(node).__name__}: {node!r}")


def _norm_by_std(node: Mapping) -> bool:
    value = core_options.plain_value(node.get("norm_adv_by_std_in_grpo", True))
    if not isinstance(value, bool):
        raise ConfigError(f"algorithm.norm_adv_by_std_in_grpo must be true or false, got {value!r}.")
    return value


def parse_run(config: Any) -> RunOptions:
    """The one parse of a verl config's options: both sections, the std switch and the estimator."""
    node = plain_algorithm(config)
    hadw = core_options.parse_section("hadw", node.get("hadw"), VERL.key)
    dgpo = core_options.parse_section("dgpo", node.get("dgpo"), VERL.key)
    estimator = node.get("adv_estimator", "gae")
    return RunOptions(str(estimator) if estimator is not None else None, hadw, dgpo, _norm_by_std(node))


# ------------------------------------------------------------------------------ one section (start-up, tests)
def parse_hadw(config: Any) -> HadwConfig:
    """Validated ``algorithm.hadw`` from verl's ``algorithm`` node (dict, DictConfig or None)."""
    return core_options.parse_section("hadw", plain_algorithm(config).get("hadw"), VERL.key)


def parse_dgpo(config: Any) -> DgpoConfig:
    """Validated ``algorithm.dgpo`` from verl's ``algorithm`` node (dict, DictConfig or None)."""
    return core_options.parse_section("dgpo", plain_algorithm(config).get("dgpo"), VERL.key)


def grpo_norm_by_std(config: Any) -> bool:
    """verl's ``algorithm.norm_adv_by_std_in_grpo`` (the GRPO base of HA-DW, and DGPO with ``dgae=false``)."""
    return _norm_by_std(plain_algorithm(config))


def log_metrics(config: Any) -> bool:
    """``algorithm.hadw.log_metrics``: the one switch for both estimators' metrics."""
    values = algorithm_node(config, "hadw")
    if "log_metrics" not in values:
        return True
    return core_options.check_option(values["log_metrics"], "hadw.log_metrics", VERL.key)


def options_of(config: Any) -> dict[str, Any]:
    """The run's options as flat keys (what an anchor file records and a resume compares)."""
    return parse_run(config).flat()

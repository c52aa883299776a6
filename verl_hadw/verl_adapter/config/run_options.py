"""verl's ``algorithm`` node as the core's options: read once, parsed once, handed down.

verl passes the estimator the raw ``algorithm`` node (an OmegaConf ``DictConfig``, never converted to a dataclass
in 0.9.1), so unknown keys would otherwise be accepted silently. ``parse_run`` parses every option the run has from
the plain section ``call_config.read_call`` read, with the core's parser, under verl's names (``verl_terms.VERL``):
``algorithm.hadw``, ``algorithm.dgpo``, ``algorithm.norm_adv_by_std_in_grpo`` and ``algorithm.adv_estimator``.
The estimators, the checkpoint callback, the metrics switch, the anchor client and both checkpoint back-ends read
that one ``RunOptions`` (``call_config.read_call`` parses once per configuration).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from verl_hadw.core import options as core_options
from verl_hadw.core.anchor.compatibility import flat_options
from verl_hadw.core.errors import ConfigError
from verl_hadw.core.options import DgpoConfig, HadwConfig
from verl_hadw.verl_adapter.verl_terms import VERL

__all__ = ["RunOptions", "parse_run"]


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


def _norm_by_std(node: Mapping) -> bool:
    value = core_options.plain_value(node.get("norm_adv_by_std_in_grpo", True))
    if not isinstance(value, bool):
        raise ConfigError(f"algorithm.norm_adv_by_std_in_grpo must be true or false, got {value!r}.")
    return value


def parse_run(algorithm: Mapping | None) -> RunOptions:
    """The one parse of a verl config's options: both sections, the std switch and the estimator. ``algorithm``: the
    plain ``algorithm`` section (``call_config.read_call`` reads it once per call), or any mapping (a ``DictConfig``
    is read key by key; None: every default)."""
    algorithm = {} if algorithm is None else algorithm
    estimator, norm_by_std = algorithm.get("adv_estimator", "gae"), _norm_by_std(algorithm)
    hadw = core_options.parse_section("hadw", algorithm.get("hadw"), VERL.key)
    dgpo = core_options.parse_section("dgpo", algorithm.get("dgpo"), VERL.key)
    return RunOptions(str(estimator) if estimator is not None else None, hadw, dgpo, norm_by_std)

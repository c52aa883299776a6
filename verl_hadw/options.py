"""Typed, validated options for ``algorithm.hadw`` and ``algorithm.dgpo``.

verl passes the estimator the raw ``algorithm`` node (an OmegaConf ``DictConfig``, never converted to a
dataclass in 0.9.1), so unknown keys would otherwise be accepted silently. Everything here is pure Python:
no verl, torch or Ray import, so the checkpoint callback can validate a config before the cluster starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = [
    "ConfigError",
    "AnchorConfig",
    "HadwConfig",
    "DgpoConfig",
    "parse_hadw",
    "parse_dgpo",
    "algorithm_node",
]

ANCHOR_MODES = ("kalman", "moving_average", "fixed")
SIGMA_SOURCES = ("anchor", "accuracy")
BASES = ("grpo", "dgpo")


class ConfigError(ValueError):
    """A bad ``algorithm.hadw`` / ``algorithm.dgpo`` value; the message names the key and what is valid."""


@dataclass(frozen=True)
class AnchorConfig:
    """``algorithm.hadw.anchor``: how the difficulty anchor C_t evolves (paper Eqs. 8-12, App. F, Table 2)."""

    mode: str = "kalman"
    # η of Eq. 11. The paper gives none; 16 is measured (benchmarks/anchor_time_constant.py, README): with the
    # literal Eq. 10 σ it tracks accuracy with a 11-21 step rise time (20-33 step lag) for batch-accuracy
    # noise 0.005-0.05, whereas η <= 1 (TRL PR #4872 used 0.1) leaves the anchor frozen at its first value.
    eta: float = 16.0
    window: int = 10  # m of Eqs. 9-10 / h of App. F
    sigma_source: str = "anchor"  # anchor: Eq. 10 literally (σ of past posteriors); accuracy: σ of past y_t
    sigma_warmup: float = 1.0  # σ_t while fewer than 2 past values exist (paper silent)
    eta_min: float = 0.0  # floor of η_t (Eq. 8 bounds η_t to [0, 1])
    init: Any = "first_batch"  # C⁻ of the first step: "first_batch" (= y_1) or a float in [0, 1]
    include_current: bool = False  # moving_average only: anchor includes y_t (the authors' released code)
    fixed_value: float = 0.5  # fixed mode: the constant anchor (Table 2 ablation)


@dataclass(frozen=True)
class DgpoConfig:
    """``algorithm.dgpo``: DGPO switches (MathForge paper §3.1, Table 3 ablation)."""

    dgae: bool = True  # MAD normalisation (Eqs. 4-5); off = GRPO std normalisation
    dqw: bool = True  # difficulty-aware question weights (Eq. 6)
    temperature: float = 2.0  # T of Eq. 6
    valid_token_norm: bool = True  # fold the valid-token loss denominator into the advantages
    success_threshold: float | None = None  # accuracy = score > threshold when scores are not binary
    epsilon: float = 1e-6
    norm_adv_by_std: bool = True  # not a user key: algorithm.norm_adv_by_std_in_grpo (used when dgae=false)


@dataclass(frozen=True)
class HadwConfig:
    """``algorithm.hadw``: HA-DW options (paper §3, Eqs. 7-17)."""

    lambda_scale: float = 1.3  # λ_scale of Eq. 16; 1.3 is the paper's best (Table 7)
    state_key: str = "default"  # one anchor per key; our configs use ${trainer.project_name}/${trainer.experiment_name}
    success_threshold: float | None = None  # required when scores are not binary {0, 1}
    base: str = "grpo"  # base advantage Â: grpo | dgpo
    # y_t and p̂ of Eqs. 7 and 13: "accuracy" (the paper) or "reward", the raw mean reward (the authors' released
    # code; no success_threshold needed, the anchor then lives in reward space). The base advantage is unchanged.
    difficulty_from: str = "accuracy"
    normalize_phi: bool = False  # rescale Φ to mean 1 over the step's valid responses
    allow_missing_state: bool = False  # resume without an anchor file starts a fresh anchor (with a warning)
    log_metrics: bool = True  # merge hadw/* and dgpo/* into verl's per-step Tracking.log call
    epsilon: float = 1e-6
    anchor: AnchorConfig = field(default_factory=AnchorConfig)
    # Not user keys: algorithm.norm_adv_by_std_in_grpo, and algorithm.dgpo (the base when base == "dgpo").
    norm_adv_by_std: bool = True
    dgpo: DgpoConfig = field(default_factory=DgpoConfig)


# --------------------------------------------------------------------------------------------- parsing
def _to_dict(node: Any, where: str) -> dict:
    if node is None:
        return {}
    from omegaconf import DictConfig, OmegaConf  # ships with verl (hydra-core)

    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)
    if isinstance(node, Mapping):
        return dict(node)
    if dataclasses.is_dataclass(node):
        return dataclasses.asdict(node)
    raise ConfigError(f"{where} must be a mapping, got {type(node).__name__}: {node!r}")


def algorithm_node(config: Any, name: str) -> dict:
    """``config.<name>`` of verl's ``algorithm`` node as a plain dict ({} when absent)."""
    if config is None:
        return {}
    node = config.get(name, None) if hasattr(config, "get") else getattr(config, name, None)
    return _to_dict(node, f"algorithm.{name}")


def _check_keys(values: Mapping, cls: type, where: str, hidden: tuple[str, ...] = ()) -> None:
    allowed = [f.name for f in dataclasses.fields(cls) if f.name not in hidden]
    for key in values:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            did_you_mean = f" Did you mean '{where}.{hint[0]}'?" if hint else ""
            raise ConfigError(
                f"Unknown key '{where}.{key}'.{did_you_mean} Valid keys under {where}: {', '.join(allowed)}."
            )


def _number(values: Mapping, key: str, where: str, default: float, lo=None, hi=None, lo_open=False) -> float:
    value = values.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}.{key} must be a finite number, got {value!r}.")
    value = float(value)
    if lo is not None and (value < lo or (lo_open and value == lo)):
        bracket = "(" if lo_open else "["
        raise ConfigError(f"{where}.{key}={value} is out of range; valid: {bracket}{lo}, {hi if hi is not None else 'inf'}].")
    if hi is not None and value > hi:
        raise ConfigError(f"{where}.{key}={value} is out of range; valid: [{lo}, {hi}].")
    return value


def _flag(values: Mapping, key: str, where: str, default: bool) -> bool:
    value = values.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, got {value!r}.")
    return value


def _choice(values: Mapping, key: str, where: str, default: str, choices: tuple[str, ...]) -> str:
    value = values.get(key, default)
    if value not in choices:
        raise ConfigError(f"{where}.{key}={value!r} is not valid; choose one of: {', '.join(choices)}.")
    return value


def _threshold(values: Mapping, where: str) -> float | None:
    if values.get("success_threshold") is None:
        return None
    return _number(values, "success_threshold", where, 0.0)


def _parse_anchor(values: Mapping, where: str) -> AnchorConfig:
    _check_keys(values, AnchorConfig, where)
    d = AnchorConfig()
    window = values.get("window", d.window)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"{where}.window={window!r} is out of range; valid: an integer >= 1.")
    init = values.get("init", d.init)
    if init != "first_batch":
        if isinstance(init, bool) or not isinstance(init, (int, float)) or not 0.0 <= init <= 1.0:
            raise ConfigError(f"{where}.init={init!r} is not valid; use 'first_batch' or a number in [0, 1].")
        init = float(init)
    return AnchorConfig(
        mode=_choice(values, "mode", where, d.mode, ANCHOR_MODES),
        # Eq. 8 bounds η_t = η·σ_t to [0, 1]; η itself must exceed 1 for σ_t ≈ 0.01-0.05 to move the anchor.
        eta=_number(values, "eta", where, d.eta, lo=0.0),
        window=window,
        sigma_source=_choice(values, "sigma_source", where, d.sigma_source, SIGMA_SOURCES),
        sigma_warmup=_number(values, "sigma_warmup", where, d.sigma_warmup, lo=0.0),
        eta_min=_number(values, "eta_min", where, d.eta_min, lo=0.0, hi=1.0),
        init=init,
        include_current=_flag(values, "include_current", where, d.include_current),
        fixed_value=_number(values, "fixed_value", where, d.fixed_value, lo=0.0, hi=1.0),
    )


def _parse_dgpo_values(values: Mapping, where: str, norm_adv_by_std: bool) -> DgpoConfig:
    _check_keys(values, DgpoConfig, where, hidden=("norm_adv_by_std",))
    d = DgpoConfig()
    return DgpoConfig(
        dgae=_flag(values, "dgae", where, d.dgae),
        dqw=_flag(values, "dqw", where, d.dqw),
        temperature=_number(values, "temperature", where, d.temperature, lo=0.0, lo_open=True),
        valid_token_norm=_flag(values, "valid_token_norm", where, d.valid_token_norm),
        success_threshold=_threshold(values, where),
        epsilon=_number(values, "epsilon", where, d.epsilon, lo=0.0, lo_open=True),
        norm_adv_by_std=norm_adv_by_std,
    )


def _norm_adv_by_std(config: Any) -> bool:
    if config is None:
        return True
    value = config.get("norm_adv_by_std_in_grpo", True) if hasattr(config, "get") else True
    if not isinstance(value, bool):
        raise ConfigError(f"algorithm.norm_adv_by_std_in_grpo must be true or false, got {value!r}.")
    return value


def parse_dgpo(config: Any) -> DgpoConfig:
    """Validated ``algorithm.dgpo`` from verl's ``algorithm`` node (dict, DictConfig or None)."""
    return _parse_dgpo_values(algorithm_node(config, "dgpo"), "algorithm.dgpo", _norm_adv_by_std(config))


def parse_hadw(config: Any) -> HadwConfig:
    """Validated ``algorithm.hadw`` from verl's ``algorithm`` node (dict, DictConfig or None)."""
    where = "algorithm.hadw"
    values = algorithm_node(config, "hadw")
    _check_keys(values, HadwConfig, where, hidden=("norm_adv_by_std", "dgpo"))
    d = HadwConfig()
    state_key = values.get("state_key", d.state_key)
    if not isinstance(state_key, str) or not state_key.strip():
        raise ConfigError(f"{where}.state_key must be a non-empty string, got {state_key!r}.")
    anchor = values.get("anchor", {})
    return HadwConfig(
        lambda_scale=_number(values, "lambda_scale", where, d.lambda_scale, lo=0.0, lo_open=True),
        state_key=state_key,
        success_threshold=_threshold(values, where),
        base=_choice(values, "base", where, d.base, BASES),
        difficulty_from=_choice(values, "difficulty_from", where, d.difficulty_from, ("accuracy", "reward")),
        normalize_phi=_flag(values, "normalize_phi", where, d.normalize_phi),
        allow_missing_state=_flag(values, "allow_missing_state", where, d.allow_missing_state),
        log_metrics=_flag(values, "log_metrics", where, d.log_metrics),
        epsilon=_number(values, "epsilon", where, d.epsilon, lo=0.0, lo_open=True),
        anchor=_parse_anchor(_to_dict(anchor, f"{where}.anchor"), f"{where}.anchor"),
        norm_adv_by_std=_norm_adv_by_std(config),
        dgpo=parse_dgpo(config),
    )

"""HA-DW's and DGPO's options (verl: ``algorithm.hadw`` / ``algorithm.dgpo``; TRL, ms-swift and Axolotl:
``hadw_*`` / ``dgpo_*``), each declared once with its default, range and doc; the parser of plain mappings; the docs'
options block."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.terms import yaml_value

#: How a framework names an option path (``"hadw.anchor.eta"``): ``Terms.key`` of its adapter.
Key = Callable[[str], str]

INF = math.inf


def option(default: Any, doc: str, *, kind: str, lo: float = -INF, hi: float = INF, lo_open: bool = False,
           choices: tuple = ()) -> Any:
    """A user option: ``kind`` is number | integer | flag | choice | text | threshold | init | section."""
    meta = {"doc": doc, "kind": kind, "lo": lo, "hi": hi, "lo_open": lo_open, "choices": choices}
    if kind == "section":
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class AnchorConfig:
    """``algorithm.hadw.anchor``: how the difficulty anchor C_t evolves (Eqs. 8-12, App. F, Table 2)."""

    mode: str = option("kalman", "how the anchor follows accuracy: kalman (Eqs. 8-12) | moving_average (App. F) | "
                       "fixed (Table 2)", kind="choice", choices=("kalman", "moving_average", "fixed"))
    # The paper gives no η; 16 tracks accuracy with an 11-21 step rise time for batch-accuracy noise 0.005-0.05, η <= 1
    # freezes the anchor (benchmarks/anchor_time_constant.py).
    eta: float = option(16.0, "how fast the anchor follows accuracy; 16 by measurement, see docs/choices.md "
                        "(η, Eq. 11)", kind="number", lo=0.0)
    window: int = option(10, "how many past steps the anchor's spread or average reads (m, Eqs. 9-10; h, App. F)",
                         kind="integer", lo=1)
    sigma_source: str = option(
        "anchor", "the spread that sets the anchor's speed: anchor, of its past values (paper) | accuracy, of past "
        "accuracies (σ_t, Eq. 10)", kind="choice", choices=("anchor", "accuracy"))
    sigma_warmup: float = option(1.0, "the spread used until two past values exist; the paper gives none (σ_t, Eq. 10)",
                                 kind="number", lo=0.0)
    # eta_min keeps C_t following y_t where equal first accuracies give σ_t = 0, so η_t = 0 forever (anchor_freeze.py)
    eta_min: float = option(0.05, "the anchor's slowest speed; 0 follows the paper and can freeze the anchor "
                            "(floor of η_t, Eq. 11)", kind="number", lo=0.0, hi=1.0)
    init: Any = option("first_batch", "the starting anchor: first_batch, the first call's accuracy, or a number in "
                       "[0, 1] (C⁻ of step 1)", kind="init")
    include_current: bool = option(False, "moving_average: count the current step's accuracy in the anchor, as the "
                                   "released code does", kind="flag")
    fixed_value: float = option(0.5, "the constant anchor of mode fixed", kind="number", lo=0.0, hi=1.0)


@dataclass(frozen=True)
class DgpoConfig:
    """``algorithm.dgpo``: DGPO switches (MathForge §3.1, Table 3 ablation)."""

    dgae: bool = option(True, "divide the advantage by the group's mean absolute deviation; false: by its standard "
                        "deviation, as GRPO (Eqs. 4-5)", kind="flag")
    dqw: bool = option(True, "weight each question by its difficulty, harder ones more (Eq. 6)", kind="flag")
    temperature: float = option(2.0, "how sharply the question weights favour hard questions; lower is sharper "
                                "(T, Eq. 6)", kind="number", lo=0.0, lo_open=True)
    valid_token_norm: bool = option(True, "average the loss over the tokens of groups whose scores differ, folded into "
                                    "the advantages (Eq. 3)", kind="flag")
    success_threshold: float | None = option(None, "when rewards are not binary: a score above it counts as correct "
                                             "for the question weights", kind="threshold")
    epsilon: float = option(1e-6, "added to the mean absolute deviation or standard deviation, so that it never "
                            "divides by zero", kind="number", lo=0.0, lo_open=True)


@dataclass(frozen=True)
class HadwConfig:
    """``algorithm.hadw``: HA-DW options (§3, Eqs. 7-17)."""

    lambda_scale: float = option(1.3, "scale of every difficulty weight on the advantage; 1.3 is the paper's best "
                                 "(λ_scale, Eq. 16, Table 7)", kind="number", lo=0.0, lo_open=True)
    state_key: str = option("default", "the name the anchor is saved and restored under; give each experiment its own",
                            kind="text")
    success_threshold: float | None = option(
        None, "required when rewards are not binary: a score above it counts as correct", kind="threshold")
    base: str = option("grpo", "the advantage HA-DW reweights: grpo | dgpo (DGPO's advantage)", kind="choice",
                       choices=("grpo", "dgpo"))
    difficulty_from: str = option(
        "accuracy", "what difficulty is read from: accuracy, the share of correct responses (paper) | reward, the "
        "mean reward (released code)", kind="choice", choices=("accuracy", "reward"))
    normalize_phi: bool = option(
        False, "rescale the difficulty weights to mean 1 over each call's valid responses (Φ, Eq. 16)", kind="flag")
    allow_missing_state: bool = option(
        False, "resume without an anchor file: start a fresh anchor (with a warning)", kind="flag")
    log_metrics: bool = option(True, "add hadw/* and dgpo/* to the trainer's logged metrics (both estimators)",
                               kind="flag")
    epsilon: float = option(1e-6, "added to GRPO's standard deviation, so that it never divides by zero",
                            kind="number", lo=0.0, lo_open=True)
    anchor: AnchorConfig = option(AnchorConfig, "", kind="section")


SECTIONS: dict[str, type] = {"hadw": HadwConfig, "dgpo": DgpoConfig}  # option path of a section -> its dataclass


def _walk(cls: type, path: str) -> dict[str, dataclasses.Field]:
    out = {}
    for f in dataclasses.fields(cls):
        if "kind" in f.metadata:
            out[f"{path}.{f.name}"] = f
            if f.metadata["kind"] == "section":
                out.update(_walk(f.default_factory, f"{path}.{f.name}"))
    return out


@functools.lru_cache(maxsize=1)
def declarations() -> dict[str, dataclasses.Field]:
    """Every declaration by option path (``"hadw.lambda_scale"``, ``"hadw.anchor"``, ``"hadw.anchor.eta"``), in
    declaration order: what the parser, the start-up checks, the resume rules and the docs read."""
    return {path: f for section, cls in SECTIONS.items() for path, f in _walk(cls, section).items()}


def plain_dict(node: Any, where: str) -> dict:
    """A section's values (a mapping, a dataclass; None: absent) as a dict; ``where`` names it in the error."""
    if node is None:
        return {}
    if isinstance(node, Mapping):
        return dict(node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return dataclasses.asdict(node)
    raise ConfigError(f"{where} must be a mapping, got {type(node).__name__}: {node!r}")


def _check(value: Any, f: dataclasses.Field, key: str) -> Any:
    """``value`` of option ``f`` (named ``key`` in messages) validated against its declaration."""
    m, value = f.metadata, plain_value(value)
    kind = m["kind"]
    if kind == "flag":
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}.")
        return value
    if kind == "choice":
        if value not in m["choices"]:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(m['choices'])}.")
        return value
    if kind == "text":
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{key} must be a non-empty string, got {value!r}.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: Ray, files and logs cannot carry it
            raise ConfigError(
                f"{key}={value!r} holds {value[exc.start]!r} at position {exc.start}, a lone surrogate that is not "
                "text (it cannot be written as UTF-8: Ray names the anchor's actor after it); use plain text."
            ) from None
        return str(value)
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int) or value < m["lo"]:
            raise ConfigError(f"{key}={value!r} is out of range; valid: an integer >= {int(m['lo'])}.")
        return value
    if kind == "init":
        if value == "first_batch":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"{key}={value!r} is not valid; use 'first_batch' or a number in [0, 1].")
        return float(value)
    if kind == "threshold" and value is None:
        return None
    # number / threshold
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{key} must be a finite number, got {value!r}.")
    value = float(value)
    if value < m["lo"] or (m["lo_open"] and value == m["lo"]) or value > m["hi"]:
        interval = f"{'(' if m['lo_open'] else '['}{m['lo']}, {'inf' if m['hi'] == INF else m['hi']}]"
        raise ConfigError(f"{key}={value} is out of range; valid: {interval}.")
    return value


def plain_value(value: Any) -> Any:
    """A numpy scalar as the Python value it stands for (``np.float32(1.3)``: 1.3, not 1.2999999523), else ``value``."""
    if type(value).__module__ != "numpy" or not hasattr(value, "item") or getattr(value, "ndim", 0) != 0:
        return value
    plain = value.item()
    if isinstance(plain, float) and math.isfinite(plain):
        return float(str(value))  # numpy's str of a float scalar: the shortest repr in its own precision
    return plain


def parse_section(section: str, values: Mapping | None, key: Key):
    """The options of ``section`` (``"hadw"`` or ``"dgpo"``) from ``values`` (a mapping; None: the defaults),
    checked; messages name options by ``key`` (``Terms.key``)."""
    return _parse(SECTIONS[section], plain_dict(values, key(section)), section, key)


def _parse(cls: type, values: Mapping, path: str, key: Key):
    """An instance of ``cls`` (the section at ``path``) from ``values``."""
    where = key(path)
    fields = [f for f in dataclasses.fields(cls) if "kind" in f.metadata]
    allowed = [f.name for f in fields]
    for name in values:
        if name not in allowed:
            hint = difflib.get_close_matches(str(name), allowed, n=1)
            elsewhere = [p for p, _, n in (d.rpartition(".") for d in declarations()) if n == name and p != path]
            did_you_mean = (
                f" Did you mean '{key(f'{path}.{hint[0]}')}'?" if hint
                else f" '{name}' is an option of {key(elsewhere[0])}: did you mean '{key(f'{elsewhere[0]}.{name}')}'?"
                if elsewhere else "")
            raise ConfigError(f"Unknown key '{where}.{name}'.{did_you_mean} Valid keys under {where}: "
                              f"{', '.join(allowed)}.")
    parsed = {}
    for f in fields:
        option = f"{path}.{f.name}"
        if f.metadata["kind"] == "section":
            parsed[f.name] = _parse(f.default_factory, plain_dict(values.get(f.name), key(option)), option, key)
        elif f.name in values:
            parsed[f.name] = _check(values[f.name], f, key(option))
    return cls(**parsed)


def _yaml_value(value: Any) -> str:
    return f"{value:.1e}" if isinstance(value, float) and value != 0 and abs(value) < 1e-3 else yaml_value(value)


def _yaml_lines(cls: type, indent: int) -> list[str]:
    lines, pad = [], " " * indent
    for f in (f for f in dataclasses.fields(cls) if "kind" in f.metadata):
        if f.metadata["kind"] == "section":
            lines += [f"{pad}{f.name}:", *_yaml_lines(f.default_factory, indent + 2)]
        else:
            lines.append(f"{pad}{f.name}: {_yaml_value(f.default)}".ljust(31) + f"# {f.metadata['doc']}")
    return lines


def options_yaml() -> str:
    """The options block of the README and docs/options.md: every option with its default and doc, as YAML."""
    return "\n".join(["algorithm:", "  hadw:", *_yaml_lines(HadwConfig, 4), "  dgpo:", *_yaml_lines(DgpoConfig, 4)])

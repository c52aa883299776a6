"""The estimator configurations the simulator compares, and the suites that group them.

Every method is one verl ``algorithm`` node plus the group size G and a learning-rate multiplier. HA-DW
runs use the package defaults (λ = 1.3, Kalman anchor with η = 16, m = 10, σ from the anchor) unless a
method overrides them; every (method, seed) run gets its own ``algorithm.hadw.state_key``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Method", "METHODS", "SUITES", "resolve"]


@dataclass(frozen=True)
class Method:
    name: str
    estimator: str  # "grpo" | "hadw" | "dgpo": verl's algorithm.adv_estimator
    family: str  # main | control | lambda | anchor | eta (which plot / table it belongs to)
    label: str
    group: int = 8  # G, rollouts per prompt
    lr_mult: float = 1.0  # multiplies both learning rates (the "GRPO with lr × λ" control)
    hadw: dict = field(default_factory=dict)  # overrides of algorithm.hadw
    dgpo: dict = field(default_factory=dict)  # algorithm.dgpo

    def algorithm(self, state_key: str) -> dict:
        """verl's ``algorithm`` node for this method (plain dict: pass it through ``OmegaConf.create``)."""
        return {
            "adv_estimator": self.estimator,
            "norm_adv_by_std_in_grpo": True,
            "hadw": {"state_key": state_key, **self.hadw},
            "dgpo": dict(self.dgpo),
        }

    @property
    def lambda_scale(self) -> float:
        return float(self.hadw.get("lambda_scale", 1.3)) if self.estimator == "hadw" else 1.0


def _kalman(eta: float, source: str = "anchor") -> dict:
    return {"anchor": {"mode": "kalman", "eta": eta, "sigma_source": source}}


_ALL = [
    # --- the paper's main comparisons (Tables 1, 3) and DGPO
    Method("grpo", "grpo", "main", "GRPO, G=8"),
    Method("grpo_G16", "grpo", "main", "GRPO, G=16", group=16),
    Method("hadw", "hadw", "main", "HA-DW (λ=1.3, η=16), G=8"),
    Method("dgpo", "dgpo", "main", "DGPO, G=8"),
    Method("hadw_dgpo", "hadw", "main", "HA-DW over DGPO, G=8", hadw={"base": "dgpo"}),
    # --- controls the paper does not run: step size vs re-direction
    Method("grpo_lrx1.3", "grpo", "control", "GRPO, lr × 1.3", lr_mult=1.3),
    *[Method(f"grpo_lrx{m:g}", "grpo", "control", f"GRPO, lr × {m:g}", lr_mult=m) for m in (1.6, 2.0)],
    Method("hadw_normphi", "hadw", "control", "HA-DW, normalize_phi (mean Φ = 1)", hadw={"normalize_phi": True}),
    # --- Table 7's λ sweep (1.3 is "hadw")
    *[
        Method(f"hadw_lam{lam:g}", "hadw", "lambda", f"HA-DW λ={lam:g}", hadw={"lambda_scale": lam})
        for lam in (0.5, 0.8, 1.0, 1.5, 1.7, 2.0)
    ],
    # --- Table 2: fixed vs dynamic anchor; App. F moving average; the authors' released code
    *[
        Method(f"hadw_fixed{v:g}", "hadw", "anchor", f"HA-DW fixed anchor {v:g}",
               hadw={"anchor": {"mode": "fixed", "fixed_value": v}})
        for v in (0.4, 0.5, 0.6)
    ],
    Method("hadw_ma", "hadw", "anchor", "HA-DW moving average m=10 (App. F)",
           hadw={"anchor": {"mode": "moving_average"}}),
    Method(
        "hadw_released",
        "hadw",
        "anchor",
        "HA-DW as released (MA incl. current, λ=1.5)",
        hadw={"lambda_scale": 1.5, "anchor": {"mode": "moving_average", "include_current": True}},
    ),
    # --- the anchor's σ source and η (16 with σ = anchor is "hadw")
    *[
        Method(f"hadw_eta{eta:g}", "hadw", "eta", f"HA-DW η={eta:g}, σ=anchor", hadw=_kalman(eta))
        for eta in (0.1, 1.0, 4.0, 64.0)
    ],
    *[
        Method(f"hadw_sigacc_eta{eta:g}", "hadw", "eta", f"HA-DW η={eta:g}, σ=accuracy",
               hadw=_kalman(eta, "accuracy"))
        for eta in (1.0, 4.0, 16.0)
    ],
]
METHODS: dict[str, Method] = {m.name: m for m in _ALL}

_REFERENCE = ["grpo", "hadw"]
SUITES: dict[str, list[str]] = {
    "main": ["grpo", "grpo_G16", "hadw", "dgpo", "hadw_dgpo"],
    "controls": _REFERENCE + ["grpo_lrx1.3", "grpo_lrx1.6", "grpo_lrx2", "hadw_normphi", "hadw_lam1"],
    "lambda": _REFERENCE + [m.name for m in _ALL if m.family == "lambda"],
    "anchor": _REFERENCE + [m.name for m in _ALL if m.family == "anchor"],
    "eta": _REFERENCE + [m.name for m in _ALL if m.family == "eta"],
    # everything except the extra GRPO learning rates of "controls" (they only map GRPO's step-size curve)
    "all": [m.name for m in _ALL if m.name not in ("grpo_lrx1.6", "grpo_lrx2")],
}


def resolve(suite_or_names: str | list[str]) -> list[Method]:
    """Methods of a suite name, or of a list / comma-separated string of method names (order kept)."""
    if isinstance(suite_or_names, str):
        names = SUITES.get(suite_or_names) or [n.strip() for n in suite_or_names.split(",") if n.strip()]
    else:
        names = list(suite_or_names)
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; suites: {', '.join(SUITES)}; methods: {', '.join(METHODS)}")
    return [METHODS[n] for n in dict.fromkeys(names)]

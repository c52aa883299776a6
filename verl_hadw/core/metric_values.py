"""Per-step ``hadw/*`` and ``dgpo/*`` metric values, logged under the same names by every adapter: what one call
records, how a step's calls combine, what is logged; the last ``MAX_STEPS`` steps are kept."""

from __future__ import annotations

import math
from collections import OrderedDict

import torch

from verl_hadw.core.anchor.machine import AnchorView

MAX_STEPS = 64
_SUM, _MIN, _MAX, _LAST = "sum", "min", "max", "last"
_COMBINE = {_SUM: lambda a, b: a + b, _MIN: min, _MAX: max}


class MetricBuffer:
    """step -> {name: (how it combines, value)}, oldest first."""

    def __init__(self):
        self.steps: OrderedDict = OrderedDict()

    def _record(self, step: int, values: dict[str, tuple[str, float]]) -> None:
        acc = self.steps.setdefault(step, {})
        for name, (how, value) in values.items():
            old = acc[name][1] if name in acc and how != _LAST else math.nan
            acc[name] = (how, _COMBINE[how](old, value) if not math.isnan(old) else value)
        while len(self.steps) > MAX_STEPS:
            self.steps.popitem(last=False)

    def record_hadw(self, view: AnchorView, phi: torch.Tensor, lambda_scale: float, recoveries: int = 0,
                    summary: tuple[float, ...] | None = None) -> None:
        """One HA-DW call: the anchor's view (the last call's wins), Φ (n,), the rebuilds of the anchor's store
        (verl's Ray actor), and Φ's ``phi_summary_terms`` as read by the call (None: read here)."""
        if summary is None:
            summary = torch.stack(phi_summary_terms(phi, lambda_scale)).tolist()
        total, sumsq, low, high, amplified = summary
        self._record(view.step, {
            "hadw/anchor_prior": (_LAST, view.prior),
            "hadw/anchor_posterior": (_LAST, view.posterior),
            "hadw/batch_acc": (_LAST, view.batch_acc),
            "hadw/eta_t": (_LAST, view.eta_t),
            "hadw/sigma_t": (_LAST, view.sigma_t),
            "hadw/actor_recoveries": (_LAST, float(recoveries)),
            "_phi_n": (_SUM, float(phi.numel())),
            "_phi_sum": (_SUM, total),
            "_phi_sumsq": (_SUM, sumsq),
            "_phi_amplified": (_SUM, amplified),  # Φ > λ: D = +1, the advantage is amplified
            "hadw/phi_min": (_MIN, low),
            "hadw/phi_max": (_MAX, high),
        })

    def record_dgpo(self, step: int, counts: dict[str, float]) -> None:
        """One DGPO call's group and token counts (``advantages.dgpo_advantage``)."""
        self._record(step, {
            "dgpo/valid_groups": (_SUM, counts["valid_groups"]),
            "dgpo/zero_var_groups": (_SUM, counts["groups"] - counts["valid_groups"]),
            "_tokens_all": (_SUM, counts["tokens_all"]),
            "_tokens_valid": (_SUM, counts["tokens_valid"]),
            "dgpo/weight_min": (_MIN, counts["weight_min"]),
            "dgpo/weight_max": (_MAX, counts["weight_max"]),
        })

    def peek(self, step: int) -> dict[str, float]:
        """The metrics recorded so far for ``step`` (left in the buffer)."""
        return _finalize(self.steps.get(step, {}))

    def pop(self, step: int) -> dict[str, float]:
        """The metrics of ``step``, removed from the buffer (empty if nothing was recorded)."""
        return _finalize(self.steps.pop(step, {}))


def phi_summary_terms(phi: torch.Tensor, lambda_scale: float) -> list[torch.Tensor]:
    """Σ Φ, Σ Φ², min, max and #(Φ > λ) of Φ (n,), in float64 on Φ's device: what ``record_hadw`` logs."""
    phi = phi.double()
    return [phi.sum(), (phi * phi).sum(), phi.min(), phi.max(), (phi > lambda_scale).sum().double()]


def _finalize(acc: dict[str, tuple[str, float]]) -> dict[str, float]:
    out = {name: value for name, (_, value) in acc.items() if not name.startswith("_")}
    if "_phi_n" in acc:
        n = acc["_phi_n"][1]
        mean = acc["_phi_sum"][1] / n
        out["hadw/phi_mean"] = mean
        out["hadw/phi_std"] = math.sqrt(max(acc["_phi_sumsq"][1] / n - mean * mean, 0.0))
        out["hadw/frac_amplified"] = acc["_phi_amplified"][1] / n
    if "_tokens_all" in acc:
        out["dgpo/valid_token_ratio"] = acc["_tokens_valid"][1] / acc["_tokens_all"][1]
    return out

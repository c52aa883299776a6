"""The admissible λ_scale range of HA-DW (paper Lemma 1 / Theorem 3): where the reweighted advantage's
expected bias shrinks toward zero. Notation as in ``theory``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from verl_hadw.research.theory import binom_pmf, check_group_size

__all__ = ["LambdaInterval", "lambda_interval"]


@dataclass(frozen=True)
class LambdaInterval:
    """Theorem 3's feasible λ_scale interval for one observed group (see ``lambda_interval``)."""

    p_hat: float
    G: int
    anchor: float
    side: str  # "hard" (p < p̂ is corrected) or "easy" (p > p̂)
    p_range: tuple[float, float]  # true accuracies the guarantee covers
    baseline_range: tuple[float, float]  # rectified baselines p̃ closer than p̂ to every p in p_range
    c_range: tuple[float, float]  # (c_low, c_high) with p̃ = c·p̂ (Lemma 1)
    lam_correct: tuple[float, float]  # λ that rectifies the correct responses' advantage
    lam_incorrect: tuple[float, float]  # λ that rectifies the incorrect responses' advantage
    lo: float  # the feasible λ_scale interval (lo, hi): both at once
    hi: float

    @property
    def feasible(self) -> bool:
        return self.lo < self.hi

    def contains(self, lam: float) -> bool:
        return self.lo < lam < self.hi


def _conditional_tail(G: int, k: int, p: float, upper: bool) -> float:
    """P(R ≥ k | S; p) (upper) or P(R ≤ k | S; p), R ~ Binomial(G, p) restricted to 1..G-1."""
    pmf = binom_pmf(G, np.asarray(p, dtype=float))
    inner = pmf[1:G]
    ks = np.arange(1, G)
    tail = inner[ks >= k].sum() if upper else inner[ks <= k].sum()
    return float(tail / inner.sum())


def lambda_interval(
    p_hat: float, G: int, Delta: float = 0.0, delta: float = 0.05, eps: float = 0.05, anchor: float = 0.5
) -> LambdaInterval:
    """Lemma 1 / Theorem 3: the λ_scale range for which HA-DW's weighted advantage Â·Φ is closer to the true
    advantage than Â, for one observed non-degenerate group (p̂ = k/G) and anchor C⁻ (Eqs. 13-16).

    docs/equations.md records only the paper's structure (a rectified baseline p̃ = c·p̂ with
    c ∈ (c_low, c_high), and a λ interval built from c_low, c_high, p̂ and exp(D·M)), not the formulas; we make
    it concrete:

    1. The true accuracies covered (side "hard" when p̂ < 0.5, "easy" when p̂ > 0.5: Theorem 1's
       direction; at p̂ = 0.5, our choice: "hard" when anchor >= 0.5, else "easy"):
       hard: p ∈ [p_lo, p_hi] with p_hi = min(0.5 - Δ, p̂ - ε) (hard prompt, Def. 3, whose baseline
       over-shoots by more than ε, Theorem 2) and p_lo the exact one-sided (1-δ) lower confidence bound
       for p given R = Gp̂ under the S-conditional binomial (smaller p would make the observation
       improbable). easy: mirrored, p ∈ [max(0.5 + Δ, p̂ + ε), upper (1-δ) bound].
    2. Lemma 1: |p̃ - p| < |p̂ - p| for every such p iff p̃ ∈ (2·p_hi - p̂, p̂) (hard) or (p̂, 2·p_lo - p̂)
       (easy); c = p̃/p̂.
    3. Â·Φ equals r - p̃ for an effective baseline p̃: incorrect responses (r = 0) give p̃ = λ·e^{D₀M}·p̂,
       correct ones (r = 1) give p̃ = 1 - λ·e^{D₁M}·(1 - p̂); e^{D·M} comes from the package's own
       ``core.advantages.hadw_weights`` (Eqs. 13-16). Each yields a λ interval; the feasible interval is their
       intersection (empty when p̂ = anchor, or when δ rules out every covered p).

    The GRPO std normalisation divides both responses' advantages by the same group std, so it does not move
    the interval. Returns a ``LambdaInterval`` (``lo >= hi`` when infeasible).
    """
    import torch

    from verl_hadw.core.advantages import hadw_weights

    G = check_group_size(G)
    k = round(p_hat * G)
    if not 1 <= k <= G - 1 or abs(k - p_hat * G) > 1e-9:
        raise ValueError(f"p_hat must be k/G with 1 <= k <= G-1 (a non-degenerate group), got {p_hat} for G={G}")
    for name, value in (("Delta", Delta), ("eps", eps)):
        if not 0.0 <= value < 0.5:
            raise ValueError(f"{name} must lie in [0, 0.5), got {value}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    p_hat = k / G
    side = "hard" if p_hat < 0.5 or (p_hat == 0.5 and anchor >= 0.5) else "easy"

    def bound(upper_tail: bool) -> float:
        # root of P(tail | S; p) = δ; the tail probability is monotone in p (monotone likelihood ratio)
        fn = lambda p: _conditional_tail(G, k, p, upper=upper_tail) - delta  # noqa: E731
        a, b = 1e-12, 1.0 - 1e-12
        if fn(a) * fn(b) > 0:
            return a if (fn(a) >= 0) == upper_tail else b  # the tail exceeds δ everywhere: no constraint
        return float(optimize.brentq(fn, a, b, xtol=1e-14))

    if side == "hard":
        p_lo, p_hi = bound(upper_tail=True), min(0.5 - Delta, p_hat - eps)
        b_lo, b_hi = 2 * p_hi - p_hat, p_hat
    else:
        p_lo, p_hi = max(0.5 + Delta, p_hat + eps), bound(upper_tail=False)
        b_lo, b_hi = p_hat, 2 * p_lo - p_hat
    if p_lo >= p_hi:  # no covered accuracy: infeasible
        b_lo = b_hi = p_hat

    # e^{D·M} for an incorrect (Â < 0) and a correct (Â > 0) response, from the estimator's own Φ (λ = 1).
    phi = hadw_weights(
        torch.tensor([-p_hat, 1.0 - p_hat], dtype=torch.float64),
        torch.tensor([p_hat, p_hat], dtype=torch.float64),
        float(anchor),
        1.0,
    ).tolist()
    e0, e1 = phi
    lam_incorrect = (b_lo / (e0 * p_hat), b_hi / (e0 * p_hat))  # p̃ = λ·e^{D₀M}·p̂, increasing in λ
    lam_correct = ((1.0 - b_hi) / (e1 * (1.0 - p_hat)), (1.0 - b_lo) / (e1 * (1.0 - p_hat)))  # decreasing
    lo, hi = max(lam_incorrect[0], lam_correct[0]), min(lam_incorrect[1], lam_correct[1])
    return LambdaInterval(
        p_hat=p_hat,
        G=G,
        anchor=float(anchor),
        side=side,
        p_range=(p_lo, p_hi),
        baseline_range=(b_lo, b_hi),
        c_range=(b_lo / p_hat, b_hi / p_hat),
        lam_correct=lam_correct,
        lam_incorrect=lam_incorrect,
        lo=lo,
        hi=hi,
    )

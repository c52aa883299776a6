"""Bias theory of group-relative advantages (HA-DW paper §2.2, §4, App. D) and DGPO's update magnitudes.

Equation, lemma and table numbers refer to ``papers.md`` (§1.7 for HA-DW, §2.1 for DGPO). Notation: a
prompt with success probability p, G binary rollouts, R = Σ_i r_i correct, group baseline p̂ = R/G,
non-degenerate event S = {1 ≤ R ≤ G-1} (Eq. 6), empirical advantage Â = r - p̂ and true advantage A = r - p,
so Â < A  ⟺  p̂ > p (the baseline over-shoots: the advantage is under-estimated).

Every function is vectorised over ``p`` (numpy broadcasting over the outcome count k = 0..G); integrals
over p are exact piecewise Gauss-Legendre quadratures (the integrands are smooth between the jump points
p = k/G). Only numpy/scipy are imported at module load; matplotlib (Agg) and the package's estimator code
are imported by the functions that need them. ``main`` is the ``verl-hadw theory`` command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import integrate, optimize, stats

from verl_hadw.plotting import pyplot, save_figure

__all__ = [
    "PAPER_TABLE4",
    "PAPER_TABLE5",
    "PAPER_TABLE6",
    "PAPER_TABLE6_POISSON",
    "PAPER_COROLLARY1",
    "p_nondegenerate",
    "expected_baseline",
    "bias",
    "prob_underestimate_at",
    "prob_overestimate_at",
    "prob_underestimate",
    "prob_overestimate",
    "prob_deviation",
    "table6_quantity",
    "table6_poisson_limit",
    "corollary1_bounds",
    "continuous_reward_bias",
    "beta_reward_bias",
    "truncnorm_reward_bias",
    "LambdaInterval",
    "lambda_interval",
    "grpo_update_magnitude",
    "dgae_update_magnitude",
    "plot_bias",
    "plot_update_magnitude",
    "theory_report",
    "main",
]

# ------------------------------------------------------------------------------------ the paper's values
PAPER_TABLE4 = {2: 0.999997499987, 4: 0.999995948256, 6: 0.827761785622, 8: 0.781129955681}  # P(G, 0, 0.25)
PAPER_TABLE5 = {2: 0.999994999975, 4: 0.776965795853, 6: 0.689721502158, 8: 0.640944744224}  # P(G, 0, 0.5)
PAPER_TABLE6 = {  # (G/2)·∫_0^{2/G} f(p) dp
    2: 0.499997499987,
    3: 0.749995833315,
    4: 0.776965795853,
    5: 0.780787089465,
    6: 0.781154327380,
}
PAPER_TABLE6_POISSON = 0.7818  # "≈ 0.7818"
# Corollary 1 (2 ≤ G ≤ 8, p ~ U): lower bounds on P(Â < A | S, p < hi) and, symmetrically,
# P(Â > A | S, p > 1 - hi). The p < 0.125 bound is an equality (= 1.00).
PAPER_COROLLARY1 = {0.5: 0.63, 0.25: 0.78, 0.125: 1.00}

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(48)  # per smooth piece: exact to ~1e-15


def _as_p(p) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"p must lie in [0, 1], got {p[(p < 0) | (p > 1)][:3]}")
    return p


def _check_G(G: int) -> int:
    if isinstance(G, bool) or int(G) != G or G < 2:
        raise ValueError(f"G (rollouts per prompt) must be an integer >= 2, got {G!r}")
    return int(G)


def _binom_pmf(G: int, p: np.ndarray) -> np.ndarray:
    """(..., G+1) P(R = k) for k = 0..G, broadcast over p."""
    k = np.arange(G + 1)
    return stats.binom.pmf(k, G, p[..., None])


# -------------------------------------------------------------------------------- binary rewards: Eq. 32
def p_nondegenerate(G: int, p) -> np.ndarray:
    """P(S) = 1 - (1-p)^G - p^G, the probability that a group is non-degenerate (Eq. 6's event S).

    Computed as -expm1(G·log1p(-p)) - p^G, accurate for small p and large G.
    """
    G, p = _check_G(G), _as_p(p)
    with np.errstate(divide="ignore"):
        return -np.expm1(G * np.log1p(-p)) - p**G


def expected_baseline(G: int, p) -> np.ndarray:
    """E[p̂ | S], the group baseline averaged over non-degenerate groups (Eq. 32). Shape of ``p``.

    At p = 0 and p = 1 (P(S) = 0) the limits 1/G and (G-1)/G are returned: the only non-degenerate group
    left is the one with a single success (failure).
    """
    G, p = _check_G(G), _as_p(p)
    ps = p_nondegenerate(G, p)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (p - p**G) / ps  # Eq. (32)
    return np.where(p == 0, 1.0 / G, np.where(p == 1, (G - 1.0) / G, value))


def bias(G: int, p) -> np.ndarray:
    """A - E[Â | S] = E[p̂ | S] - p (Lemma 2): > 0 for p < 0.5 (hard: Â under-estimates A), < 0 for p > 0.5,
    0 at p = 0.5 (Theorem 1). Shape of ``p``; limits 1/G at p = 0 and -1/G at p = 1."""
    G, p = _check_G(G), _as_p(p)
    ps = p_nondegenerate(G, p)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (p * (1 - p) ** G + p ** (G + 1) - p**G) / ps  # Lemma 2
    return np.where(p == 0, 1.0 / G, np.where(p == 1, -1.0 / G, value))


# -------------------------------------------------------------------------- binary rewards: Theorem 2
def prob_deviation(G: int, p, eps: float, side: str = "auto") -> np.ndarray:
    """Theorem 2: the probability, given S, that the baseline misses p by more than ``eps``.

    side="under" (hard prompts): P(A - Â > ε | S) = P(p̂ - p > ε | S)
        = Σ_{k=⌊G(p+ε)⌋+1}^{G-1} C(G,k) p^k (1-p)^{G-k} / (1 - (1-p)^G - p^G);
    side="over" (easy prompts, the symmetric case): P(Â - A > ε | S) = Σ_{k=1}^{⌈G(p-ε)⌉-1} (same terms) / P(S);
    side="auto": "under" where p ≤ 0.5 and "over" where p > 0.5 (our choice at p = 0.5, where both are equal).

    The paper states the hard case for ε ∈ (0, E[p̂|S] - p); the sums are valid for any ε ≥ 0 and are
    returned as such (ε = 0 gives ``prob_underestimate_at`` / ``prob_overestimate_at``). G(p ± ε) is rounded
    to 9 decimals before ⌊·⌋ / ⌈·⌉, so a tie in exact arithmetic (e.g. G = 8, p = 0.8, ε = 0.05: p̂ = 0.75
    is *not* more than ε below p) is not decided by floating-point noise. Shape of ``p``.
    """
    if side not in ("auto", "under", "over"):
        raise ValueError(f"side must be 'auto', 'under' or 'over', got {side!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    G, p = _check_G(G), _as_p(p)
    k = np.arange(G + 1)
    pmf = _binom_pmf(G, p)
    inner = (k >= 1) & (k <= G - 1)
    pp = p[..., None]
    lo_k, hi_k = np.round(G * (pp + eps), 9), np.round(G * (pp - eps), 9)  # exact ties stay exact (see above)
    under = inner & (k >= np.floor(lo_k) + 1)  # Theorem 2, hard prompt
    over = inner & (k <= np.ceil(hi_k) - 1)  # Theorem 2, easy prompt (symmetric)
    take = {"under": under, "over": over, "auto": np.where(pp <= 0.5, under, over)}[side]
    numerator = (pmf * take).sum(-1)
    denominator = (pmf * inner).sum(-1)  # = P(S) = 1 - (1-p)^G - p^G, summed term by term (no cancellation)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = numerator / denominator
    # p ∈ {0, 1}: S leaves only R = 1 (p = 0) or R = G-1 (p = 1); evaluate the limit directly.
    limit_under = (1.0 / G > p + eps).astype(float)
    limit_over = ((G - 1.0) / G < p - eps).astype(float)
    limit = {"under": limit_under, "over": limit_over, "auto": np.where(p <= 0.5, limit_under, limit_over)}[side]
    return np.where(denominator > 0, value, limit)


def prob_underestimate_at(G: int, p) -> np.ndarray:
    """f(p) = P(Â < A | S) = P(p̂ > p | S): Theorem 2's hard-prompt sum at ε = 0. Shape of ``p``."""
    return prob_deviation(G, p, 0.0, side="under")


def prob_overestimate_at(G: int, p) -> np.ndarray:
    """P(Â > A | S) = P(p̂ < p | S): Theorem 2's easy-prompt sum at ε = 0. Shape of ``p``."""
    return prob_deviation(G, p, 0.0, side="over")


def _average_over_p(fn, G: int, lo: float, hi: float, weighted: bool = False) -> float:
    """(1/(hi-lo)) ∫_lo^hi fn(p) dp, or with weighted=True ∫ fn·P(S) dp / ∫ P(S) dp.

    Gauss-Legendre on each piece between the jump points k/G (fn is smooth inside a piece).
    """
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"need 0 <= lo < hi <= 1, got lo={lo}, hi={hi}")
    G = _check_G(G)
    cuts = np.unique(np.concatenate([[lo, hi], np.arange(1, G) / G]))
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    a, b = cuts[:-1, None], cuts[1:, None]
    p = (a + b) / 2 + (b - a) / 2 * _GL_NODES[None, :]  # (pieces, nodes), never on a jump point
    w = (b - a) / 2 * _GL_WEIGHTS[None, :]
    values = fn(G, p)
    if not weighted:
        return float((w * values).sum() / (hi - lo))
    ps = p_nondegenerate(G, p)
    return float((w * values * ps).sum() / (w * ps).sum())


def prob_underestimate(G: int, lo: float, hi: float, weighted: bool = False) -> float:
    """P(G, lo, hi): the average over p ~ U(lo, hi) of P(Â < A | S) (Theorem 2; the paper's Tables 4-5).

    weighted=False is the paper's quantity (the plain average of the conditional probability; it reproduces
    Tables 4-5). weighted=True (our addition) weights each p by P(S | p), i.e. it is the fraction of the
    *non-degenerate groups* with p ∈ (lo, hi) whose advantage is under-estimated: what a training batch shows.
    """
    return _average_over_p(prob_underestimate_at, G, lo, hi, weighted)


def prob_overestimate(G: int, lo: float, hi: float, weighted: bool = False) -> float:
    """The average over p ~ U(lo, hi) of P(Â > A | S): the easy-prompt counterpart (Corollary 1's other half)."""
    return _average_over_p(prob_overestimate_at, G, lo, hi, weighted)


def table6_quantity(G: int) -> float:
    """(G/2)·∫_0^{2/G} f(p) dp with f = P(Â < A | S): the paper's Table 6 (Corollary 2's window p < 2/G)."""
    G = _check_G(G)
    return prob_underestimate(G, 0.0, min(2.0 / G, 1.0))


def table6_poisson_limit() -> float:
    """lim_{G→∞} of ``table6_quantity``: with p = x/G, R → Poisson(x) and S → {R ≥ 1}, so the limit is
    (1/2)·∫_0^2 P(R > x | R ≥ 1) dx (the paper: ≈ 0.7818)."""

    def f(x: float) -> float:
        return stats.poisson.sf(math.floor(x), x) / -math.expm1(-x)

    left, _ = integrate.quad(f, 0.0, 1.0, epsabs=1e-13, epsrel=1e-13)
    right, _ = integrate.quad(f, 1.0, 2.0, epsabs=1e-13, epsrel=1e-13)
    return 0.5 * (left + right)


def corollary1_bounds(groups=range(2, 9)) -> list[dict]:
    """Corollary 1 over G ∈ ``groups``: for each window, the smallest average P(Â < A | S, p < hi) and
    P(Â > A | S, p > 1 - hi) over G, the G attaining it, and the paper's bound."""
    rows = []
    for hi, paper in PAPER_COROLLARY1.items():
        under = {G: prob_underestimate(G, 0.0, hi) for G in groups}
        over = {G: prob_overestimate(G, 1.0 - hi, 1.0) for G in groups}
        g_under, g_over = min(under, key=under.get), min(over, key=over.get)
        rows.append(
            {
                "window": hi,
                "paper": paper,
                "min_under": under[g_under],
                "argmin_under": g_under,
                "min_over": over[g_over],
                "argmin_over": g_over,
            }
        )
    return rows


# --------------------------------------------------------------------- continuous rewards: Theorem 4
def continuous_reward_bias(G: int, dist, tau: float = 0.5) -> float:
    """Theorem 4 (continuous rewards r ∈ [0, 1]): E[p̂ | S_τ] - μ by numerical integration.

    ``dist`` is a frozen scipy distribution supported on [0, 1] (``pdf``, ``cdf``, ``mean``). papers.md
    states only that the bias persists for Beta and truncated-Gaussian rewards, not the event, so we choose
    the threshold generalisation of S: S_τ = {at least one r_i ≥ τ and at least one r_i < τ}, the groups an
    accuracy filter with success threshold τ keeps. With F = P(r < τ), m_lo = ∫_0^τ r f(r) dr and
    m_hi = ∫_τ^1 r f(r) dr, i.i.d. rewards give

        E[p̂ | S_τ] = (μ - m_lo·F^{G-1} - m_hi·(1-F)^{G-1}) / (1 - F^G - (1-F)^G),

    which for binary rewards (F = 1-p, m_lo = 0, m_hi = p) is exactly Eq. 32. The partial moments are
    computed with ``scipy.integrate.quad`` (integrated by parts over the CDF). Positive: the group baseline
    over-shoots (advantages of hard prompts are under-estimated), as in the binary case.
    """
    G = _check_G(G)
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau must lie in (0, 1), got {tau}")

    def moment(a: float, b: float) -> float:
        # ∫_a^b r f(r) dr = b·F(b) - a·F(a) - ∫_a^b F(r) dr (by parts: a bounded integrand, even for densities
        # with integrable spikes at 0 or 1 such as Beta(a < 1, b < 1))
        area = integrate.quad(lambda r: float(dist.cdf(r)), a, b, epsabs=1e-13, epsrel=1e-11, limit=200)[0]
        return b * float(dist.cdf(b)) - a * float(dist.cdf(a)) - area

    F = float(dist.cdf(tau))
    m_lo, m_hi = moment(0.0, tau), moment(tau, 1.0)
    mu = m_lo + m_hi
    p_s = 1.0 - F**G - (1.0 - F) ** G
    if p_s <= 0:
        raise ValueError(f"P(S_tau) = 0 for tau={tau}: every reward falls on one side of the threshold")
    return (mu - m_lo * F ** (G - 1) - m_hi * (1.0 - F) ** (G - 1)) / p_s - mu


def beta_reward_bias(G: int, a: float, b: float, tau: float = 0.5) -> float:
    """``continuous_reward_bias`` for r ~ Beta(a, b) (mean a/(a+b))."""
    return continuous_reward_bias(G, stats.beta(a, b), tau)


def truncnorm_reward_bias(G: int, mean: float, std: float, tau: float = 0.5) -> float:
    """``continuous_reward_bias`` for r ~ N(mean, std²) truncated to [0, 1] (``mean`` is the untruncated
    location; the truncated mean differs)."""
    lo, hi = (0.0 - mean) / std, (1.0 - mean) / std
    return continuous_reward_bias(G, stats.truncnorm(lo, hi, loc=mean, scale=std), tau)


# ------------------------------------------------------------------------------ Lemma 1 / Theorem 3
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
    pmf = _binom_pmf(G, np.asarray(p, dtype=float))
    inner = pmf[1:G]
    ks = np.arange(1, G)
    tail = inner[ks >= k].sum() if upper else inner[ks <= k].sum()
    return float(tail / inner.sum())


def lambda_interval(
    p_hat: float, G: int, Delta: float = 0.0, delta: float = 0.05, eps: float = 0.05, anchor: float = 0.5
) -> LambdaInterval:
    """Lemma 1 / Theorem 3: the λ_scale range for which HA-DW's weighted advantage Â·Φ is closer to the true
    advantage than Â, for one observed non-degenerate group (p̂ = k/G) and anchor C⁻ (Eqs. 13-16).

    papers.md gives only the structure (a rectified baseline p̃ = c·p̂ with c ∈ (c_low, c_high), and a λ
    interval built from c_low, c_high, p̂ and exp(D·M)), not the formulas; we make it concrete:

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
       ``estimators.hadw_weights`` (Eqs. 13-16). Each yields a λ interval; the feasible interval is their
       intersection (empty when p̂ = anchor, or when δ rules out every covered p).

    The GRPO std normalisation divides both responses' advantages by the same group std, so it does not move
    the interval. Returns a ``LambdaInterval`` (``lo >= hi`` when infeasible).
    """
    import torch

    from verl_hadw.estimators import hadw_weights

    G = _check_G(G)
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


# ------------------------------------------------------------------------------- DGPO Theorems 1-2
def grpo_update_magnitude(G: int, p, unbiased_std: bool = False) -> np.ndarray:
    """Σ_i |Â_GR,i| for a group with success rate p = k/G under GRPO (DGPO Theorem 1): 2G·sqrt(p(1-p)).

    The theorem divides by the population std. verl's ``grpo`` (and HA-DW's base) divides by the unbiased
    std (``torch.std``), which is larger by sqrt(G/(G-1)): unbiased_std=True returns
    2G·sqrt(p(1-p))·sqrt((G-1)/G). Degenerate groups (p ∈ {0, 1}) give 0.
    """
    G, p = _check_G(G), _as_p(p)
    total = 2 * G * np.sqrt(p * (1 - p))  # DGPO Theorem 1
    return total * math.sqrt((G - 1) / G) if unbiased_std else total


def dgae_update_magnitude(G: int, p=None) -> np.ndarray:
    """Σ_i |Â_DG,i| = G for any non-degenerate group under DGAE's MAD normalisation (DGPO Theorem 2);
    0 for a degenerate group (p ∈ {0, 1}). Shape of ``p`` (a scalar G when ``p`` is None)."""
    G = _check_G(G)
    if p is None:
        return np.asarray(float(G))
    p = _as_p(p)
    return np.where((p > 0) & (p < 1), float(G), 0.0)  # DGPO Theorem 2


# ------------------------------------------------------------------------------------------- plots
def plot_bias(path, groups=(2, 4, 8, 16, 32)) -> Path:
    """PNG of bias(G, p) = E[p̂ | S] - p (Lemma 2) over p for several G, with P(Â < A | S) below."""
    plt = pyplot()
    p = np.linspace(0.0, 1.0, 801)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 7.5), sharex=True)
    for G in groups:
        top.plot(p, bias(G, p), label=f"G = {G}")
        bottom.plot(p, prob_underestimate_at(G, p), label=f"G = {G}", lw=1)
    top.axhline(0.0, color="k", lw=0.5)
    top.axvline(0.5, color="k", lw=0.5, ls=":")
    top.set_ylabel("bias = E[p̂ | S] − p  (Lemma 2)")
    top.set_title("Group baseline bias on non-degenerate groups: > 0 ⇒ hard-prompt advantages under-estimated")
    top.title.set_fontsize(9)
    top.legend(fontsize=8)
    bottom.set_ylabel("P(Â < A | S)  (Theorem 2, ε = 0)")
    bottom.set_xlabel("p = P(correct) of the prompt")
    return save_figure(fig, path, dpi=120)


def plot_update_magnitude(path, groups=(8, 16)) -> Path:
    """PNG of the total update magnitude per question, Σ_i|Â_i| / G, under GRPO (DGPO Theorem 1; population
    and verl's unbiased std) and DGAE (DGPO Theorem 2), with the achievable points p = k/G marked."""
    plt = pyplot()
    p = np.linspace(0.0, 1.0, 401)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.plot(p, grpo_update_magnitude(2, p) / 2, color="C0", label="GRPO, population std: 2·sqrt(p(1−p))")
    for i, G in enumerate(groups):
        k = np.arange(0, G + 1) / G
        ax.plot(k, grpo_update_magnitude(G, k, unbiased_std=True) / G, "o", ms=3, color=f"C{i + 1}",
                label=f"GRPO, verl unbiased std, G = {G} (p = k/G)")
    ax.plot(p, np.where((p > 0) & (p < 1), 1.0, np.nan), color="C3", lw=2, label="DGAE (MAD): G, any p")
    ax.set_xlabel("group accuracy p")
    ax.set_ylabel("Σ_i |Â_i| / G  (per-question update magnitude)")
    ax.set_title("DGPO Theorems 1-2: GRPO under-weights hard and easy questions; DGAE does not")
    ax.title.set_fontsize(9)
    ax.set_ylim(0, 1.15)
    ax.legend(fontsize=8, loc="lower center")
    return save_figure(fig, path, dpi=120)


# ---------------------------------------------------------------------------------------- the report
def _table(title: str, paper: dict, ours) -> list[str]:
    lines = [title, f"{'G':>4} {'paper':>16} {'ours (exact)':>16} {'ours - paper':>13}"]
    for G, value in paper.items():
        mine = ours(G)
        lines.append(f"{G:>4} {value:>16.12f} {mine:>16.12f} {mine - value:>13.2e}")
    return lines


def theory_report(out_dir=None, plots: bool = True) -> str:
    """The text ``verl-hadw theory`` prints (paper values beside ours); writes the PNGs into ``out_dir``."""
    lines = [
        "HA-DW bias theory (papers.md §1.7) and DGPO update magnitudes (§2.1); exact quadrature, no sampling.",
        "",
    ]
    lines += _table("Table 4: P(G, 0, 0.25) = avg over p ~ U(0, 0.25) of P(Â < A | S)", PAPER_TABLE4,
                    lambda G: prob_underestimate(G, 0.0, 0.25))
    lines += [""] + _table("Table 5: P(G, 0, 0.5)", PAPER_TABLE5, lambda G: prob_underestimate(G, 0.0, 0.5))
    lines += [""] + _table("Table 6: (G/2)·∫_0^{2/G} f(p) dp", PAPER_TABLE6, table6_quantity)
    lines.append(f"  G → ∞ (Poisson limit): paper ≈ {PAPER_TABLE6_POISSON}, ours {table6_poisson_limit():.6f}; "
                 f"G = 64: {table6_quantity(64):.6f}")
    lines += [
        "  (The paper's G = 2 and G = 4 entries of Table 4 must be exactly 1 by Corollary 3, p < 1/G; the",
        "   paper's values sit 2.5e-6 to 5.0e-6 below the exact integrals everywhere: its quadrature error.)",
        "",
        "Corollary 1 (2 <= G <= 8): min over G of the average probability; paper's bound",
        f"{'window':>22} {'paper':>7} {'min P(Â<A|S)':>13} {'at G':>5} {'min P(Â>A|S)':>13} {'at G':>5}",
    ]
    for row in corollary1_bounds():
        hi = row["window"]
        lines.append(
            f"{f'p < {hi} | p > {1 - hi}':>22} {row['paper']:>7.2f} {row['min_under']:>13.6f} {row['argmin_under']:>5} "
            f"{row['min_over']:>13.6f} {row['argmin_over']:>5}"
        )
    groups = (2, 4, 8, 16, 32)
    lines += ["", "Lemma 2: bias(G, p) = E[p̂ | S] - p", f"{'p':>6} " + " ".join(f"{f'G={G}':>9}" for G in groups)]
    for p in (0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9):
        lines.append(f"{p:>6} " + " ".join(f"{float(bias(G, p)):>9.4f}" for G in groups))
    lines += [
        "",
        "Theorem 4 (continuous rewards, our S_τ = {some r >= τ, some r < τ}, τ = 0.5), G = 8: E[p̂|S_τ] - μ",
    ]
    for a, b in ((0.5, 4.5), (1, 3), (2, 2), (3, 1)):
        lines.append(f"  Beta({a}, {b}) (μ = {a / (a + b):.2f}): {beta_reward_bias(8, a, b):+.4f}")
    for m, s in ((0.2, 0.2), (0.5, 0.2), (0.8, 0.2)):
        lines.append(f"  truncated N({m}, {s}²) on [0, 1]: {truncnorm_reward_bias(8, m, s):+.4f}")
    lines += [
        "",
        "Theorem 3 (our concrete form, see lambda_interval): λ_scale making Â·Φ closer to A than Â, G = 8,",
        "anchor C⁻ = 0.5, Δ = 0.05, δ = 0.05, ε = 0.05",
        f"{'p̂':>7} {'side':>5} {'p covered':>17} {'c range':>15} {'λ interval':>17}",
    ]
    for k in range(1, 8):
        iv = lambda_interval(k / 8, 8, Delta=0.05, delta=0.05, eps=0.05, anchor=0.5)
        lam = f"({iv.lo:.3f}, {iv.hi:.3f})" if iv.feasible else "empty"
        lines.append(f"{k / 8:>7.3f} {iv.side:>5} ({iv.p_range[0]:.3f}, {iv.p_range[1]:.3f}) "
                     f"({iv.c_range[0]:.3f}, {iv.c_range[1]:.3f}) {lam:>17}")
    lines += [
        "",
        "DGPO Theorems 1-2: per-question total update magnitude Σ_i |Â_i|, G = 8",
        f"{'p':>7} {'GRPO 2G·sqrt(p(1-p))':>21} {'GRPO, verl std':>15} {'DGAE':>6}",
    ]
    for k in range(0, 9):
        p = k / 8
        grpo, grpo_verl = float(grpo_update_magnitude(8, p)), float(grpo_update_magnitude(8, p, unbiased_std=True))
        lines.append(f"{p:>7.3f} {grpo:>21.4f} {grpo_verl:>15.4f} {float(dgae_update_magnitude(8, p)):>6.1f}")
    if plots and out_dir is not None:
        out_dir = Path(out_dir)
        lines += ["", f"wrote {plot_bias(out_dir / 'bias.png')}",
                  f"wrote {plot_update_magnitude(out_dir / 'dgpo_update_magnitude.png')}"]
    return "\n".join(lines)


def main(args) -> int:
    """``verl-hadw theory``: print the report, write the PNGs into ``args.out``."""
    import warnings

    # the λ table imports verl (for the estimator's Φ): silence its optional-engine notices, as pytest.ini does
    warnings.filterwarnings("ignore", message=r".* engine is not available", category=UserWarning)
    print(theory_report(out_dir=None if args.no_plots else args.out, plots=not args.no_plots))
    return 0

"""Bias theory of group-relative advantages (HA-DW paper §2.2, §4, App. D) and DGPO's update magnitudes.

Numbering and notation (p, G, R, p̂ = R/G, S = {1 ≤ R ≤ G-1}, Â = r - p̂, A = r - p) are ``docs/equations.md``'s.
Every function is vectorised over ``p``; integrals over p are exact piecewise Gauss-Legendre quadratures.
Lemma 1 / Theorem 3 (the λ range) are in ``lambda_range``; the plots and ``verl-hadw theory`` in ``theory_report``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, stats

# only numpy and scipy at import: matplotlib (Agg) and the package's estimators are imported by the functions using them

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
    "grpo_update_magnitude",
    "dgae_update_magnitude",
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


def check_group_size(G: int) -> int:
    """G (rollouts per prompt) as an int, refused unless an integer >= 2."""
    if isinstance(G, bool) or int(G) != G or G < 2:
        raise ValueError(f"G (rollouts per prompt) must be an integer >= 2, got {G!r}")
    return int(G)


def binom_pmf(G: int, p: np.ndarray) -> np.ndarray:
    """(..., G+1) P(R = k) for k = 0..G, broadcast over p."""
    k = np.arange(G + 1)
    return stats.binom.pmf(k, G, p[..., None])


# -------------------------------------------------------------------------------- binary rewards: Eq. 32
def p_nondegenerate(G: int, p) -> np.ndarray:
    """P(S) = 1 - (1-p)^G - p^G, the probability that a group is non-degenerate (Eq. 6's event S).

    Computed as -expm1(G·log1p(-p)) - p^G, accurate for small p and large G.
    """
    G, p = check_group_size(G), _as_p(p)
    with np.errstate(divide="ignore"):
        return -np.expm1(G * np.log1p(-p)) - p**G


def expected_baseline(G: int, p) -> np.ndarray:
    """E[p̂ | S], the group baseline averaged over non-degenerate groups (Eq. 32). Shape of ``p``.

    At p = 0 and p = 1 (P(S) = 0) the limits 1/G and (G-1)/G are returned: the only non-degenerate group
    left is the one with a single success (failure).
    """
    G, p = check_group_size(G), _as_p(p)
    ps = p_nondegenerate(G, p)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (p - p**G) / ps  # Eq. (32)
    return np.where(p == 0, 1.0 / G, np.where(p == 1, (G - 1.0) / G, value))


def bias(G: int, p) -> np.ndarray:
    """A - E[Â | S] = E[p̂ | S] - p (Lemma 2): > 0 for p < 0.5 (hard: Â under-estimates A), < 0 for p > 0.5,
    0 at p = 0.5 (Theorem 1). Shape of ``p``; limits 1/G at p = 0 and -1/G at p = 1."""
    G, p = check_group_size(G), _as_p(p)
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
    G, p = check_group_size(G), _as_p(p)
    k = np.arange(G + 1)
    pmf = binom_pmf(G, p)
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
    G = check_group_size(G)
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
    G = check_group_size(G)
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

    ``dist`` is a frozen scipy distribution supported on [0, 1] (``pdf``, ``cdf``, ``mean``). The equation sheet
    records only that the bias persists for Beta and truncated-Gaussian rewards, not the event, so we choose
    the threshold generalisation of S: S_τ = {at least one r_i ≥ τ and at least one r_i < τ}, the groups an
    accuracy filter with success threshold τ keeps. With F = P(r < τ), m_lo = ∫_0^τ r f(r) dr and
    m_hi = ∫_τ^1 r f(r) dr, i.i.d. rewards give

        E[p̂ | S_τ] = (μ - m_lo·F^{G-1} - m_hi·(1-F)^{G-1}) / (1 - F^G - (1-F)^G),

    which for binary rewards (F = 1-p, m_lo = 0, m_hi = p) is exactly Eq. 32. The partial moments are
    computed with ``scipy.integrate.quad`` (integrated by parts over the CDF). Positive: the group baseline
    over-shoots (advantages of hard prompts are under-estimated), as in the binary case.
    """
    G = check_group_size(G)
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


# ------------------------------------------------------------------------------- DGPO Theorems 1-2
def grpo_update_magnitude(G: int, p, unbiased_std: bool = False) -> np.ndarray:
    """Σ_i |Â_GR,i| for a group with success rate p = k/G under GRPO (DGPO Theorem 1): 2G·sqrt(p(1-p)).

    The theorem divides by the population std. verl's ``grpo`` (and HA-DW's base) divides by the unbiased
    std (``torch.std``), which is larger by sqrt(G/(G-1)): unbiased_std=True returns
    2G·sqrt(p(1-p))·sqrt((G-1)/G). Degenerate groups (p ∈ {0, 1}) give 0.
    """
    G, p = check_group_size(G), _as_p(p)
    total = 2 * G * np.sqrt(p * (1 - p))  # DGPO Theorem 1
    return total * math.sqrt((G - 1) / G) if unbiased_std else total


def dgae_update_magnitude(G: int, p=None) -> np.ndarray:
    """Σ_i |Â_DG,i| = G for any non-degenerate group under DGAE's MAD normalisation (DGPO Theorem 2);
    0 for a degenerate group (p ∈ {0, 1}). Shape of ``p`` (a scalar G when ``p`` is None)."""
    G = check_group_size(G)
    if p is None:
        return np.asarray(float(G))
    p = _as_p(p)
    return np.where((p > 0) & (p < 1), float(G), 0.0)  # DGPO Theorem 2

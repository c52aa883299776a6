"""verl_hadw.research.theory: the paper's Tables 4-6 and Corollaries 1-3, Monte-Carlo checks of every formula,
Theorem 4's continuous-reward bias, Theorem 3's λ interval against the real estimator, DGPO Theorems 1-2
against the real estimators, and the ``verl-hadw theory`` command."""

import math

import numpy as np
import pytest
from batches import algo, make_inputs, row_adv
from scipy import stats
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from verl_hadw.research import theory as A
from verl_hadw.research.lambda_range import lambda_interval
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage


def sample_groups(rng, G, p, n):
    """(n,) numbers of correct responses R ~ Binomial(G, p) for a scalar or (n,) array p."""
    return rng.binomial(G, p, size=n)


# ------------------------------------------------------------------------------ the paper's tables
@pytest.mark.parametrize(
    "paper, ours",
    [(A.PAPER_TABLE4, lambda G: A.prob_underestimate(G, 0.0, 0.25)),
     (A.PAPER_TABLE5, lambda G: A.prob_underestimate(G, 0.0, 0.5)),
     (A.PAPER_TABLE6, A.table6_quantity)],
    ids=["table4", "table5", "table6"],
)
def test_tables_match_the_paper_to_its_quadrature_error(paper, ours):
    for G, value in paper.items():
        mine = ours(G)
        # The paper's 12-digit values are 2.5e-6..5.0e-6 *below* the exact integrals, every one of them.
        assert 0.0 <= mine - value < 6e-6, (G, mine, value)


def test_corollary3_cases_are_exactly_one_and_table6_tends_to_the_poisson_limit():
    for G in range(2, 17):
        assert A.prob_underestimate(G, 0.0, 1.0 / G) == pytest.approx(1.0, abs=1e-13)  # p < 1/G: certain
        assert A.prob_overestimate(G, 1.0 - 1.0 / G, 1.0) == pytest.approx(1.0, abs=1e-13)
    assert A.prob_underestimate(2, 0.0, 0.25) == pytest.approx(1.0, abs=1e-13)  # Table 4, G = 2 and 4
    assert A.prob_underestimate(4, 0.0, 0.25) == pytest.approx(1.0, abs=1e-13)
    limit = A.table6_poisson_limit()
    assert limit == pytest.approx(A.PAPER_TABLE6_POISSON, abs=5e-5)
    assert abs(A.table6_quantity(400) - limit) < 2e-4 < abs(A.table6_quantity(6) - limit)


def test_corollary1_bounds_hold_and_the_two_sides_are_symmetric():
    rows = {r["window"]: r for r in A.corollary1_bounds()}
    assert rows[0.5]["min_under"] > 0.63 and rows[0.25]["min_under"] > 0.78
    assert rows[0.125]["min_under"] == pytest.approx(1.0, abs=1e-13)
    assert rows[0.5]["argmin_under"] == 8 and rows[0.25]["argmin_under"] == 8
    for row in rows.values():
        assert row["min_over"] == pytest.approx(row["min_under"], abs=1e-12)  # p -> 1 - p symmetry
    # Corollary 2 (G >= 6): P(Â < A | S, p < 2/G) > 0.78
    assert all(A.table6_quantity(G) > 0.78 for G in range(6, 33))


# -------------------------------------------------------------------------- Eq. 32, Lemma 2, Theorem 1
def test_eq32_and_lemma2_agree_and_have_theorem1_signs():
    p = np.linspace(0.0, 1.0, 201)
    for G in (2, 3, 8, 16, 64):
        b = A.bias(G, p)
        assert np.allclose(b, A.expected_baseline(G, p) - p, atol=1e-12)  # Lemma 2 = Eq. 32 - p
        assert np.all(b[p < 0.5] > 0) and np.all(b[p > 0.5] < 0) and abs(b[100]) < 1e-12  # Theorem 1
        assert b[0] == pytest.approx(1 / G) and b[-1] == pytest.approx(-1 / G)  # limits at p = 0, 1
    assert float(A.bias(8, 1e-9)) == pytest.approx(1 / 8, rel=1e-6)  # continuous at the limit (no 0/0)


@pytest.mark.parametrize("G, p", [(2, 0.1), (4, 0.3), (8, 0.05), (8, 0.7), (16, 0.02)])
def test_expected_baseline_matches_monte_carlo(G, p):
    rng = np.random.default_rng(G * 1000 + int(p * 100))
    R = sample_groups(rng, G, p, 400_000)
    kept = R[(R >= 1) & (R <= G - 1)] / G  # p̂ on the non-degenerate event S
    se = kept.std() / math.sqrt(kept.size)
    assert abs(kept.mean() - float(A.expected_baseline(G, p))) <= 4 * se + 1e-12  # (G = 2: p̂ ≡ 0.5)


@pytest.mark.parametrize("G, p, eps", [(8, 0.1, 0.05), (8, 0.2, 0.1), (16, 0.15, 0.05), (8, 0.8, 0.06), (4, 0.9, 0.1)])
def test_theorem2_deviation_probability_matches_monte_carlo_and_enumeration(G, p, eps):
    rng = np.random.default_rng(7)
    R = sample_groups(rng, G, p, 400_000)
    S = (R >= 1) & (R <= G - 1)
    p_hat = R[S] / G
    event = (p_hat - p > eps) if p <= 0.5 else (p - p_hat > eps)
    mine = float(A.prob_deviation(G, p, eps))
    assert abs(event.mean() - mine) < 4 * math.sqrt(mine * (1 - mine) / S.sum()) + 1e-9
    # exact enumeration from the definition (not the floor/ceil index bounds)
    k = np.arange(1, G)
    pmf = stats.binom.pmf(k, G, p)
    hit = (k / G - p > eps) if p <= 0.5 else (p - k / G > eps)
    assert mine == pytest.approx(pmf[hit].sum() / pmf.sum(), abs=1e-12)


def test_theorem2_index_bounds_follow_exact_arithmetic_at_ties():
    k = np.arange(1, 8)
    pmf = stats.binom.pmf(k, 8, 0.8)
    # p̂ = 0.75 is exactly ε = 0.05 below p = 0.8: not "more than ε" (float: 0.8 - 0.75 > 0.05 is True)
    assert float(A.prob_deviation(8, 0.8, 0.05)) == pytest.approx(pmf[k <= 5].sum() / pmf.sum(), abs=1e-12)
    pmf = stats.binom.pmf(k, 8, 0.2)
    assert float(A.prob_deviation(8, 0.2, 0.05)) == pytest.approx(pmf[k >= 3].sum() / pmf.sum(), abs=1e-12)


@pytest.mark.parametrize("G, lo, hi", [(8, 0.0, 0.25), (6, 0.0, 0.5), (4, 0.1, 0.6)])
def test_interval_averages_match_monte_carlo(G, lo, hi):
    rng = np.random.default_rng(11)
    n = 600_000
    p = rng.uniform(lo, hi, n)
    R = sample_groups(rng, G, p, n)
    S = (R >= 1) & (R <= G - 1)
    under = (R / G > p) & S
    # weighted=True: the fraction of non-degenerate groups (p ~ U, R ~ Bin) that under-estimate: pure MC
    frac = under.sum() / S.sum()
    assert abs(frac - A.prob_underestimate(G, lo, hi, weighted=True)) < 4 * math.sqrt(frac * (1 - frac) / S.sum())
    # the paper's plain average over p of P(Â < A | S): E_p[ 1{p̂ > p, S} / P(S | p) ]
    x = under / A.p_nondegenerate(G, p)
    assert abs(x.mean() - A.prob_underestimate(G, lo, hi)) < 4 * x.std() / math.sqrt(n)


# --------------------------------------------------------------------------- Theorem 4 (continuous)
@pytest.mark.parametrize("dist", [stats.beta(1, 3), stats.beta(0.5, 4.5), stats.truncnorm(-1, 4, loc=0.2, scale=0.2)])
def test_continuous_reward_bias_matches_monte_carlo(dist):
    G, tau, n = 8, 0.5, 100_000
    r = dist.rvs(size=(n, G), random_state=np.random.default_rng(3))
    high = (r >= tau).sum(1)
    S = (high >= 1) & (high <= G - 1)
    p_hat = r[S].mean(1)
    se = p_hat.std() / math.sqrt(S.sum())
    mine = A.continuous_reward_bias(G, dist, tau)
    assert mine > 0.01  # hard-ish reward distributions: the baseline over-shoots
    assert abs((p_hat.mean() - dist.mean()) - mine) < 4 * se + 1e-4


def test_continuous_reward_bias_is_antisymmetric_and_vanishes_at_the_centre():
    assert A.beta_reward_bias(8, 1, 3) == pytest.approx(-A.beta_reward_bias(8, 3, 1), abs=1e-10)
    assert A.beta_reward_bias(8, 2, 2) == pytest.approx(0.0, abs=1e-10)
    assert A.truncnorm_reward_bias(8, 0.2, 0.2) == pytest.approx(-A.truncnorm_reward_bias(8, 0.8, 0.2), abs=1e-10)
    # a reward concentrated near {0, 1} behaves like the binary case (Eq. 32)
    p = 0.2
    nearly_binary = stats.beta(0.02 * p, 0.02 * (1 - p))
    assert A.continuous_reward_bias(8, nearly_binary, 0.5) == pytest.approx(float(A.bias(8, p)), abs=2e-3)


# ------------------------------------------------------------------------- Theorem 3 (λ interval)
def _hadw_row_advantages(k, G, lam, anchor):
    """The real estimator's Â·Φ (no std normalisation: Â = r - p̂) for k correct of G, fixed anchor."""
    scores = [1] * k + [0] * (G - k)
    rewards, mask, index = make_inputs(scores, ["g"] * G)
    config = algo(norm=False, lambda_scale=lam, state_key=f"thm3-{lam}-{k}",
                  anchor={"mode": "fixed", "fixed_value": anchor})
    adv, _ = compute_hadw_outcome_advantage(rewards, mask, index, config=config)
    out = row_adv(adv, mask)
    return float(out[0]), float(out[-1])  # a correct and an incorrect response


@pytest.mark.parametrize("k, anchor", [(2, 0.5), (1, 0.4), (3, 0.6), (6, 0.5), (7, 0.45)])
def test_lambda_interval_rectifies_the_real_estimators_advantage(k, anchor):
    G = 8
    iv = lambda_interval(k / G, G, Delta=0.05, delta=0.05, eps=0.05, anchor=anchor)
    assert iv.feasible and iv.c_range[0] < iv.c_range[1]
    p_grid = np.linspace(*iv.p_range, 41)
    p_hat = k / G

    def improves(lam):
        pos, neg = _hadw_row_advantages(k, G, lam, anchor)
        better_pos = np.abs(pos - (1 - p_grid)) < np.abs((1 - p_hat) - (1 - p_grid))  # correct: A = 1 - p
        better_neg = np.abs(neg - (0 - p_grid)) < np.abs((0 - p_hat) - (0 - p_grid))  # incorrect: A = -p
        return bool(np.all(better_pos) and np.all(better_neg))

    width = iv.hi - iv.lo
    for t in (0.02, 0.5, 0.98):
        assert improves(iv.lo + t * width), t
    assert not improves(iv.lo - 0.02 * width - 1e-3) and not improves(iv.hi + 0.02 * width + 1e-3)


def test_lambda_interval_confidence_bound_and_infeasible_cases():
    G, k, delta = 8, 2, 0.05
    iv = lambda_interval(k / G, G, Delta=0.05, delta=delta, eps=0.05, anchor=0.5)
    p_lo = iv.p_range[0]
    pmf = stats.binom.pmf(np.arange(1, G), G, p_lo)
    assert pmf[k - 1:].sum() / pmf.sum() == pytest.approx(delta, abs=1e-9)  # P(R >= k | S; p_lo) = δ
    assert iv.p_range[1] == pytest.approx(0.2)  # min(0.5 - Δ, p̂ - ε)
    assert (iv.lo, iv.hi) == pytest.approx((0.7788, 0.8826), abs=1e-4)  # the CLI's table row
    assert not lambda_interval(0.25, 8, eps=0.05, anchor=0.25).feasible  # p̂ = anchor: Φ = λ for both
    assert not lambda_interval(0.5, 8, Delta=0.05, eps=0.05).feasible  # moderate p̂ with a 0.5 anchor
    assert not lambda_interval(0.375, 8, Delta=0.05, delta=0.5, eps=0.3).feasible  # δ rules out p < 0.075
    with pytest.raises(ValueError, match="k/G"):
        lambda_interval(0.3, 8)


# ------------------------------------------------------------------------ DGPO Theorems 1-2
def test_update_magnitudes_match_verls_grpo_and_the_dgpo_estimator():
    G = 8
    scores, groups = [], []
    for k in range(0, G + 1):
        scores += [1] * k + [0] * (G - k)
        groups += [f"k{k}"] * G
    rewards, mask, index = make_inputs(scores, groups)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": index}
    )
    grpo = row_adv(compute_advantage(data, "grpo").batch["advantages"], mask).view(G + 1, G)
    config = {"dgpo": {"dqw": False, "valid_token_norm": False}}
    dgpo = row_adv(compute_dgpo_outcome_advantage(rewards, mask, index, config=config)[0], mask).view(G + 1, G)
    p = np.arange(G + 1) / G
    assert np.allclose(grpo.abs().sum(1).numpy(), A.grpo_update_magnitude(G, p, unbiased_std=True), rtol=1e-5)
    assert np.allclose(dgpo.abs().sum(1).numpy(), A.dgae_update_magnitude(G, p), rtol=1e-5)
    # the theorem's population-std form peaks at p = 0.5 with value G
    assert A.grpo_update_magnitude(G, 0.5) == pytest.approx(G) and A.grpo_update_magnitude(G, 0.125) < 0.67 * G


# ---------------------------------------------------------------------------------- CLI and plots
def test_theory_command_prints_paper_values_beside_ours_and_writes_pngs(tmp_path, capsys):
    from verl_hadw.cli import main

    assert main(["theory", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for value in (*A.PAPER_TABLE4.values(), *A.PAPER_TABLE5.values(), *A.PAPER_TABLE6.values()):
        assert f"{value:.12f}" in out
    assert f"{A.prob_underestimate(8, 0.0, 0.5):.12f}" in out and "0.781133320993" in out
    assert "Corollary 1" in out and "Poisson limit" in out and "Theorem 3" in out and "DGPO" in out
    for name in ("bias.png", "dgpo_update_magnitude.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, name


def test_input_validation():
    with pytest.raises(ValueError, match="G"):
        A.bias(1, 0.3)
    with pytest.raises(ValueError, match="p must lie"):
        A.expected_baseline(8, 1.2)
    with pytest.raises(ValueError, match="lo < hi"):
        A.prob_underestimate(8, 0.5, 0.5)
    with pytest.raises(ValueError, match="side"):
        A.prob_deviation(8, 0.2, 0.1, side="left")
    with pytest.raises(ValueError, match="tau"):
        A.beta_reward_bias(8, 1, 3, tau=1.0)

"""The core's equations with no framework (only ``verl_hadw.core``, torch, numpy: the TRL and ms-swift environments
run it): ``core.groups.prepare_batch`` + ``core.advantages`` against float64 references written straight from
docs/equations.md (GRPO / Dr.GRPO, DGPO Eqs. 3-6, HA-DW Eqs. 7 and 13-16), one group at a time."""

import copy
import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from verl_hadw.core.advantages import HadwCall, dgpo_advantage, dgpo_call, grpo_advantage, hadw_call, hadw_weights
from verl_hadw.core.anchor.machine import AnchorState
from verl_hadw.core.groups import prepare_batch
from verl_hadw.core.options import AnchorConfig, DgpoConfig, HadwConfig

LENGTH = 6
FIXED = AnchorConfig(mode="fixed", fixed_value=0.4)
CLOSE = {"rtol": 1e-5, "atol": 1e-6}


def key(path: str) -> str:
    """A framework's option names (``Terms.key``): verl's spelling."""
    return f"algorithm.{path}"


# ------------------------------------------------------------------------------------------------ batches
@dataclass
class Case:
    """One call's rows: score, group label and response length (0 = a padding row, response mask all zero)."""

    scores: list
    labels: list
    lengths: list

    @property
    def valid(self) -> np.ndarray:
        return np.array(self.lengths) > 0

    def batch(self, pad_reward: float = 0.0):
        """``prepare_batch`` of the rows: the score on the last response token; a padding row carries ``pad_reward``
        on its first token (under a zero mask, it must not count)."""
        mask = (torch.arange(LENGTH)[None, :] < torch.as_tensor(self.lengths)[:, None]).float()
        rewards = torch.zeros(len(self.scores), LENGTH)
        for i, (s, n_tok) in enumerate(zip(self.scores, self.lengths)):
            rewards[i, n_tok - 1 if n_tok else 0] = s if n_tok else pad_reward
        return prepare_batch(rewards, mask, np.array([str(g) for g in self.labels], dtype=object))

    def permuted(self, perm) -> "Case":
        return Case(*([seq[i] for i in perm] for seq in (self.scores, self.labels, self.lengths)))


def random_case(seed: int, values=(0.0, 1.0), n_groups: int = 12, n_pad: int = 2) -> Case:
    """Groups of 1-8 responses (singletons included), some all-equal groups, lengths 1-6, padding rows, shuffled."""
    rng = np.random.default_rng(seed)
    scores, labels, lengths = [], [], []
    for g in range(n_groups):
        size, flat, first = int(rng.integers(1, 9)), rng.random() < 0.25, float(rng.choice(values))
        scores += [first if flat else float(rng.choice(values)) for _ in range(size)]
        labels += [f"q{g}"] * size
        lengths += [int(n) for n in rng.integers(1, LENGTH + 1, size=size)]
    scores, lengths = scores + [0.0] * n_pad, lengths + [0] * n_pad
    labels += [f"q{int(g)}" for g in rng.integers(0, n_groups, size=n_pad)]
    return Case(scores, labels, lengths).permuted(rng.permutation(len(scores)))


def on_rows(b, per_valid_row: torch.Tensor) -> np.ndarray:
    """A core result (n,) over the batch's valid rows as (N,) float64, 0 on padding rows."""
    out = np.zeros(b.n_rows)
    out[b.rows.numpy()] = per_valid_row.double().numpy()
    return out


# ------------------------------------------------------------------------- references from docs/equations.md
def groups_of(case: Case) -> list:
    """Positions of each group's valid rows."""
    out: dict = {}
    for i in np.flatnonzero(case.valid):
        out.setdefault(case.labels[i], []).append(i)
    return list(out.values())


def ref_grpo(case: Case, eps: float, norm: bool) -> np.ndarray:
    """(N,) GRPO (App. B Eq. 24): (r - mean)/(std + ε), unbiased std; r - mean without the std (Dr.GRPO).
    Single responses: mean 0, std 1 (verl's convention); all-equal groups of >= 2: exactly 0."""
    s, out = np.array(case.scores, dtype=np.float64), np.zeros(len(case.scores))
    for rows in groups_of(case):
        r = s[rows]
        if len(r) > 1 and r.max() == r.min():
            continue
        mean, std = (0.0, 1.0) if len(r) == 1 else (r.mean(), r.std(ddof=1))
        out[rows] = (r - mean) / (std + eps) if norm else r - mean
    return out


def ref_dgpo(case: Case, cfg: DgpoConfig, norm: bool, threshold=None) -> tuple[np.ndarray, dict]:
    """(N,) DGPO: Eqs. 4-5 (MAD), Eq. 6 (λ_s = B_v softmax(D_s/T), D_s = -acc, -1 when acc = 0), Eq. 3 (valid-token
    ratio); invalid groups (< 2 responses or all equal) get 0. And the call's counts."""
    s = np.array(case.scores, dtype=np.float64)
    acc, lengths = (s if threshold is None else (s > threshold) * 1.0), np.array(case.lengths, dtype=np.float64)
    grpo, groups, out = ref_grpo(case, cfg.epsilon, norm), groups_of(case), np.zeros(len(s))
    valid = [rows for rows in groups if len(rows) >= 2 and s[rows].max() != s[rows].min()]
    for rows in valid:
        r = s[rows]
        out[rows] = (r - r.mean()) / (np.abs(r - r.mean()).mean() + cfg.epsilon) if cfg.dgae else grpo[rows]
    weights = [1.0] * len(valid)
    if cfg.dqw and valid:
        e = np.exp(np.array([-acc[rows].mean() if acc[rows].mean() > 0 else -1.0 for rows in valid]) / cfg.temperature)
        weights = len(valid) * e / e.sum()
        for rows, w in zip(valid, weights):
            out[rows] *= w
    tokens_all, tokens_valid = lengths.sum(), sum(lengths[rows].sum() for rows in valid)
    if cfg.valid_token_norm and tokens_valid > 0:
        out *= tokens_all / tokens_valid
    return out, {"groups": len(groups), "valid_groups": len(valid), "tokens_all": tokens_all,
                 "tokens_valid": tokens_valid, "weight_min": min(weights, default=math.nan),
                 "weight_max": max(weights, default=math.nan)}


def ref_phi(adv: np.ndarray, p_hat: np.ndarray, prior: float, lam: float) -> np.ndarray:
    """Φ = λ exp(D·M), D = -sgn(Â) sgn(p̂ - C⁻) (Eq. 14), M = |p̂ - C⁻| (Eqs. 13, 15, 16)."""
    diff = p_hat - prior
    return lam * np.exp(-np.sign(adv) * np.sign(diff) * np.abs(diff))


def ref_hadw(case: Case, cfg: HadwConfig, dgpo_cfg: DgpoConfig, norm: bool, prior: float):
    """(N,) Â·Φ, (N,) Φ (normalised to mean 1 over valid rows with normalize_phi), and (K_t, B_t) of Eq. 7."""
    s = np.array(case.scores, dtype=np.float64)
    th = cfg.success_threshold if cfg.difficulty_from == "accuracy" else None
    y = s if th is None else (s > th) * 1.0
    base = (ref_dgpo(case, dgpo_cfg, norm, dgpo_cfg.success_threshold)[0] if cfg.base == "dgpo"
            else ref_grpo(case, cfg.epsilon, norm))
    p_hat = np.zeros(len(s))
    for rows in groups_of(case):
        p_hat[rows] = y[rows].mean()
    phi = ref_phi(base, p_hat, prior, cfg.lambda_scale) * case.valid
    phi = phi / phi[case.valid].mean() if cfg.normalize_phi else phi
    return base * phi, phi, (y[case.valid].sum(), int(case.valid.sum()))


class Anchor:
    """An anchor where a trainer keeps one: ``observe`` / ``preview`` as hadw_call takes them (as TRL's)."""

    def __init__(self, cfg: AnchorConfig):
        self.state, self.step, self.call, self.observed = AnchorState(config=cfg), 1, 0, []

    def next_step(self):
        self.step, self.call = self.step + 1, 0

    def observe(self, correct, count):
        self.observed.append((correct, count))
        self.call += 1
        return self.state.observe(self.step, self.call - 1, correct, count)

    def preview(self, correct, count):
        return copy.deepcopy(self.state).observe(self.step, self.call, correct, count)


def run_hadw(case: Case, cfg: HadwConfig, dgpo_cfg=None, norm=True, anchor=None, pad_reward=0.0):
    anchor, b = anchor or Anchor(cfg.anchor), case.batch(pad_reward)
    call = hadw_call(b, cfg, dgpo_cfg or DgpoConfig(), norm, anchor.observe, key, preview=anchor.preview)
    assert isinstance(call, HadwCall)
    return b, call, anchor


# ---------------------------------------------------------------------------------------------- GRPO
def test_grpo_by_hand_with_epsilon_and_dr_grpo():
    b = Case([1, 0, 0, 0, 1, 1, 1, 0, 1], ["h"] * 4 + ["e"] * 4 + ["solo"], [LENGTH] * 9).batch()
    a_pos, a_neg = 0.75 / (0.5 + 1e-6), -0.25 / (0.5 + 1e-6)  # the unbiased std of [1, 0, 0, 0] is 0.5
    expected = [a_pos, a_neg, a_neg, a_neg, -a_neg, -a_neg, -a_neg, -a_pos, 1 / (1 + 1e-6)]  # singleton: mean 0, std 1
    assert np.allclose(on_rows(b, grpo_advantage(b, 1e-6, True)), expected, **CLOSE)
    dr = [0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75, 1.0]
    assert np.allclose(on_rows(b, grpo_advantage(b, 1e-6, False)), dr, **CLOSE)
    assert on_rows(b, grpo_advantage(b, 0.5, True))[0] == pytest.approx(0.75, rel=1e-6)  # ε on the std, not the var


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("eps", [1e-6, 0.3])
@pytest.mark.parametrize("seed", [0, 1])
def test_grpo_matches_the_reference_on_random_batches(seed, eps, norm):
    case = random_case(seed, values=(0.0, 0.25, 0.3, 1.0, -1.2))
    b = case.batch()
    got = on_rows(b, grpo_advantage(b, eps, norm))
    assert np.allclose(got, ref_grpo(case, eps, norm), **CLOSE) and np.abs(got).sum() > 0


# ---------------------------------------------------------------------------------------------- DGPO
def test_dgpo_by_hand_mad_question_weights_and_valid_token_ratio():
    case = Case([1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0], ["h"] * 4 + ["e"] * 4 + ["c"] * 2 + ["w"] * 2,
                [2] * 8 + [5] * 4)  # c: all correct, w: all wrong
    b = case.batch()
    got, counts = dgpo_call(b, DgpoConfig(), True, key)
    a_pos, a_neg = 0.75 / (0.375 + 1e-6), -0.25 / (0.375 + 1e-6)  # Eqs. 4-5: MAD = (0.75 + 3·0.25)/4
    z = math.exp(-0.25 / 2) + math.exp(-0.75 / 2)  # Eq. 6 over the 2 valid groups, D = -acc, T = 2
    w_h, w_e = 2 * math.exp(-0.25 / 2) / z, 2 * math.exp(-0.75 / 2) / z
    expected = np.array([a_pos * w_h, *[a_neg * w_h] * 3, *[-a_neg * w_e] * 3, -a_pos * w_e, 0, 0, 0, 0])
    assert np.allclose(on_rows(b, got), expected * 36 / 16, **CLOSE)  # Eq. 3: all tokens / the valid groups' tokens
    assert counts == pytest.approx({"groups": 4, "valid_groups": 2, "tokens_all": 36, "tokens_valid": 16,
                                    "weight_min": w_e, "weight_max": w_h}, rel=1e-6)
    assert w_h + w_e == pytest.approx(2)  # Σ λ_s = B_v
    dgae, _ = dgpo_call(b, DgpoConfig(dqw=False, valid_token_norm=False), True, key)
    assert float(dgae[:4].abs().sum()) == pytest.approx(4, rel=1e-5)  # DGPO Theorem 2: Σ|Â_DG| = G


SWITCHES = [DgpoConfig(), DgpoConfig(temperature=0.5), DgpoConfig(dgae=False), DgpoConfig(dqw=False),
            DgpoConfig(valid_token_norm=False), DgpoConfig(dgae=False, dqw=False, valid_token_norm=False, epsilon=0.1)]


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("cfg", SWITCHES, ids=lambda c: f"dgae{int(c.dgae)}-dqw{int(c.dqw)}"
                         f"-vtn{int(c.valid_token_norm)}-T{c.temperature}")
def test_dgpo_matches_the_reference_under_every_switch(cfg, norm):
    for seed in (2, 3):
        case = random_case(seed)
        b = case.batch()
        acc = torch.tensor(case.scores, dtype=torch.float32)[b.rows]  # binary scores: their own accuracy
        got, counts = dgpo_advantage(b, acc, cfg, norm)
        ref, ref_counts = ref_dgpo(case, cfg, norm)
        assert np.allclose(on_rows(b, got), ref, **CLOSE) and np.abs(ref).sum() > 0
        assert counts == pytest.approx(ref_counts, rel=1e-6, nan_ok=True)
        same, same_counts = dgpo_call(b, cfg, norm, key)  # dgpo_call reads the accuracy from the scores
        assert torch.equal(same, got) and same_counts == counts


def test_dgpo_floor_difficulty_threshold_lengths_and_no_valid_group():
    """An all-wrong valid group takes D = -1; a threshold reads accuracy; ``lengths`` (TRL's loss mask) sets the
    token counts; a call without a valid group gives 0."""
    case = Case([0.0, -0.5, 1.0, 0.0], ["x", "x", "y", "y"], [LENGTH] * 4)  # threshold 0.5: acc [0, 0], [1, 0]
    cfg, b = DgpoConfig(success_threshold=0.5, valid_token_norm=False), case.batch()
    got = on_rows(b, dgpo_call(b, cfg, True, key)[0])
    z = math.exp(-1 / 2) + math.exp(-0.5 / 2)  # D_x = -1 (the floor), D_y = -0.5
    assert np.allclose(np.abs(got), [2 * math.exp(-1 / 2) / z] * 2 + [2 * math.exp(-0.5 / 2) / z] * 2, **CLOSE)
    assert np.allclose(got, ref_dgpo(case, cfg, True, threshold=0.5)[0], **CLOSE)
    with pytest.raises(ValueError, match=r"not binary.*set algorithm\.dgpo\.success_threshold=<threshold>.*other way"):
        dgpo_call(b, DgpoConfig(), True, key, accuracy_hint="; or the other way")
    b = Case([1, 0, 1, 1], ["a", "a", "b", "b"], [LENGTH] * 4).batch()  # b is all correct: not valid
    lengths = torch.tensor([1.0, 3.0, 4.0, 4.0])  # TRL's loss mask, not the response mask
    got, counts = dgpo_call(b, DgpoConfig(dqw=False), True, key, lengths=lengths)
    assert (counts["tokens_all"], counts["tokens_valid"]) == (12, 4)
    assert np.allclose(on_rows(b, got), np.array([1, -1, 0, 0]) * 12 / 4 * 0.5 / (0.5 + 1e-6), **CLOSE)
    adv, counts = dgpo_call(Case([1, 1, 0, 0, 1], list("aabbs"), [LENGTH] * 5).batch(), DgpoConfig(), True, key)
    assert torch.equal(adv, torch.zeros(5)) and counts["valid_groups"] == 0 and math.isnan(counts["weight_min"])


# ---------------------------------------------------------------------------------------------- HA-DW
def test_hadw_weights_follow_eqs_13_to_16():
    rng = np.random.default_rng(5)
    adv, p_hat = rng.normal(size=200), rng.choice([0.0, 0.125, 0.4, 0.5, 0.875, 1.0], size=200)
    adv[::7] = 0.0  # sgn(Â) = 0: D = 0
    for prior, lam in ((0.4, 1.3), (0.0, 1.0), (1.0, 0.5)):
        got = hadw_weights(torch.tensor(adv).float(), torch.tensor(p_hat).float(), prior, lam).double().numpy()
        assert np.allclose(got, ref_phi(adv, p_hat, prior, lam), **CLOSE)
        assert np.all(got >= lam / math.e * (1 - 1e-6)) and np.all(got <= lam * math.e * (1 + 1e-6))
        assert np.all(got[(adv == 0) | (p_hat == prior)] == np.float32(lam))
    # the paper's sign conventions: a hard prompt (p̂ < C⁻) amplifies its correct responses, damps its wrong ones
    phi = hadw_weights(torch.tensor([1.0, -1.0, 1.0, -1.0]), torch.tensor([0.25, 0.25, 0.75, 0.75]), 0.5, 1.0)
    assert torch.allclose(phi, torch.tensor([0.25, -0.25, -0.25, 0.25]).exp())


HADW_CASES = {
    "grpo": (HadwConfig(anchor=FIXED), DgpoConfig(), True),
    "grpo-dr": (HadwConfig(lambda_scale=0.8, anchor=FIXED), DgpoConfig(), False),
    "grpo-normalize": (HadwConfig(normalize_phi=True, anchor=FIXED), DgpoConfig(), True),
    "grpo-kalman": (HadwConfig(), DgpoConfig(), True),
    "dgpo": (HadwConfig(base="dgpo", anchor=FIXED), DgpoConfig(), True),
    "dgpo-plain": (HadwConfig(base="dgpo", anchor=FIXED), DgpoConfig(dqw=False, dgae=False), True),
}


@pytest.mark.parametrize("name", list(HADW_CASES))
def test_hadw_call_is_the_base_times_phi_of_the_reference(name):
    cfg, dgpo_cfg, norm = HADW_CASES[name]
    for seed in (6, 7):
        case = random_case(seed)
        b, call, anchor = run_hadw(case, cfg, dgpo_cfg, norm)
        prior = FIXED.fixed_value if cfg.anchor.mode == "fixed" else call.view.prior
        adv, phi, (k, n) = ref_hadw(case, cfg, dgpo_cfg, norm, prior)
        assert np.allclose(on_rows(b, call.advantages), adv, **CLOSE) and np.abs(adv).sum() > 0
        assert np.allclose(on_rows(b, call.phi), phi, **CLOSE)
        assert anchor.observed == [(k, n)] and call.view.batch_acc == pytest.approx(k / n)  # Eq. 7: valid rows
        assert prior == pytest.approx(k / n if cfg.anchor.mode == "kalman" else 0.4)  # first step: C_0 = y_1
        assert (call.dgpo_counts is not None) == (cfg.base == "dgpo")
        assert not cfg.normalize_phi or float(call.phi.mean()) == pytest.approx(1.0, abs=1e-6)


def test_hadw_thresholds_reward_difficulty_and_an_accuracy_column():
    """HA-DW's y_t and p̂ use hadw.success_threshold, DQW dgpo.success_threshold; difficulty_from=reward uses the
    raw mean reward (the released code); ``acc_scores`` (TRL, ms-swift) is the accuracy reward's column."""
    case = Case([0.9, 0.4, 0.1, 0.0, 0.8, 0.7, 0.6, 0.2], ["a"] * 4 + ["b"] * 4, [LENGTH] * 8)
    with pytest.raises(ValueError, match=r"set algorithm\.hadw\.success_threshold=<threshold>"):
        run_hadw(case, HadwConfig(anchor=FIXED))
    cfg, dgpo_cfg = HadwConfig(base="dgpo", success_threshold=0.3, anchor=FIXED), DgpoConfig(success_threshold=0.5)
    b, call, anchor = run_hadw(case, cfg, dgpo_cfg)
    adv, _, counts = ref_hadw(case, cfg, dgpo_cfg, True, 0.4)
    assert np.allclose(on_rows(b, call.advantages), adv, **CLOSE)
    assert anchor.observed == [counts] == [(5.0, 8)]  # 0.9, 0.4, 0.8, 0.7, 0.6 > 0.3 (DGPO's 0.5 would give 4)
    reward = HadwConfig(difficulty_from="reward", anchor=FIXED, lambda_scale=1.0)
    b, call, anchor = run_hadw(case, reward)
    adv, _, (k, n) = ref_hadw(case, reward, DgpoConfig(), True, 0.4)
    assert np.allclose(on_rows(b, call.advantages), adv, **CLOSE)
    assert anchor.observed[0][0] == pytest.approx(k, rel=1e-6) and k == pytest.approx(3.7)
    acc, anchor = torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 0]), Anchor(FIXED)
    call = hadw_call(b, HadwConfig(anchor=FIXED), None, True, anchor.observe, key, acc_scores=acc,
                     preview=anchor.preview)
    base, p_hat = ref_grpo(case, 1e-6, True), np.array([0.25] * 4 + [0.75] * 4)
    assert np.allclose(on_rows(b, call.advantages), base * ref_phi(base, p_hat, 0.4, 1.3), **CLOSE)
    assert anchor.observed == [(4.0, 8)]

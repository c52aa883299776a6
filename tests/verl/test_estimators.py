"""Hand-computed cases for every equation (HA-DW Eqs. 7, 13-16; DGPO Eqs. 3-6) and every data error."""

import math

import numpy as np
import pytest
import torch
from batches import algo, make_inputs, row_adv
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from verl_hadw.verl import metrics, process_state
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw

LAM = 1.3
FIXED = {"mode": "fixed", "fixed_value": 0.5}


def adv_of(fn, scores, groups, lengths=None, **config):
    rewards, mask, index = make_inputs(scores, groups, lengths)
    adv, ret = fn(token_level_rewards=rewards, response_mask=mask, index=index, config=algo(**config))
    assert torch.equal(adv, ret) and adv.shape == mask.shape
    assert torch.all(adv[mask == 0] == 0)
    return row_adv(adv, mask)


# ------------------------------------------------------------------------------------------------ HA-DW
def test_hadw_sign_conventions_hard_and_easy_prompts():
    # Hard group "h": p̂ = 0.25 < C⁻ = 0.5. Easy group "e": p̂ = 0.75 > C⁻.
    scores = [1, 0, 0, 0, 1, 1, 1, 0]
    groups = ["h"] * 4 + ["e"] * 4
    got = adv_of(hadw, scores, groups, lambda_scale=LAM, anchor=FIXED)
    m = 0.25  # M = |p̂ - C⁻| (Eq. 15)
    # GRPO base: group std (unbiased) of [1,0,0,0] is 0.5 -> Â = +1.5 for the correct, -0.5 for the wrong ones.
    a_pos, a_neg = 0.75 / (0.5 + 1e-6), -0.25 / (0.5 + 1e-6)
    expected = [
        a_pos * LAM * math.exp(+m),  # hard, correct: D = -sgn(+)·sgn(-) = +1 -> amplified
        *[a_neg * LAM * math.exp(-m)] * 3,  # hard, wrong: D = -1 -> damped
        *[-a_neg * LAM * math.exp(-m)] * 3,  # easy, correct: D = -sgn(+)·sgn(+) = -1 -> damped
        -a_pos * LAM * math.exp(+m),  # easy, wrong: D = +1 -> amplified
    ]
    assert torch.allclose(got, torch.tensor(expected), rtol=1e-5)


def test_hadw_phi_is_lambda_when_group_accuracy_equals_anchor_and_zero_for_degenerate_groups():
    scores = [1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    groups = ["m"] * 4 + ["c"] * 4 + ["w"] * 4
    got = adv_of(hadw, scores, groups, lambda_scale=LAM, anchor=FIXED)
    std = math.sqrt(1 / 3)  # unbiased std of [1,0,1,0]
    a = 0.5 / (std + 1e-6)
    assert torch.allclose(got[:4], torch.tensor([a, -a, a, -a]) * LAM, rtol=1e-5)  # diff_his = 0 -> Φ = λ
    assert torch.all(got[4:] == 0)  # all-correct / all-wrong groups: Â = 0


def test_hadw_without_std_normalisation_and_single_response_groups_follow_verl_grpo():
    scores = [1, 0, 0, 0, 1]
    groups = ["g"] * 4 + ["solo"]
    got = adv_of(hadw, scores, groups, norm=False, lambda_scale=1.0, anchor={"mode": "fixed", "fixed_value": 0.25})
    # Group g: p̂ = C⁻ -> Φ = λ = 1, Â = s - mean. Singleton (verl grpo: mean 0, std 1): Â = 1, p̂ = 1 > 0.25,
    # D = -1, M = 0.75.
    assert torch.allclose(got, torch.tensor([0.75, -0.25, -0.25, -0.25, math.exp(-0.75)]), rtol=1e-6)


def test_grpo_base_equals_verl_grpo_on_random_batch():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(20), rng.integers(1, 9, size=20))
    scores = rng.integers(0, 2, size=len(groups)).astype(float)
    rewards, mask, index = make_inputs(scores, groups)
    ref, _ = compute_grpo_outcome_advantage(rewards, mask, index)
    # λ = 1 and a fixed anchor C⁻ = 0 give Φ = exp(-sgn(Â)·p̂): HA-DW must be verl's grpo times that.
    got = adv_of(hadw, scores, groups, lambda_scale=1.0, anchor={"mode": "fixed", "fixed_value": 0.0})
    p_hat = torch.tensor([scores[groups == g].mean() for g in groups], dtype=torch.float32)
    base = row_adv(ref, mask)
    phi = torch.exp(-torch.sign(base) * torch.sign(p_hat) * p_hat)
    assert torch.allclose(got, base * phi, atol=1e-5)


def test_hadw_padding_rows_get_zero_and_do_not_count_in_batch_accuracy():
    scores = [1, 0, 0, 0, 0]
    lengths = [3, 4, 2, 5, 0]  # last row: verl padding (response_mask all zero), same uid as nothing else
    got = adv_of(hadw, scores, ["a", "a", "a", "a", "pad"], lengths=lengths, state_key="pad-test")
    assert got[4] == 0
    assert process_state.PROCESS.pending_metrics.peek(1)["hadw/batch_acc"] == 0.25  # 1 of 4 valid responses (Eq. 7)


def test_hadw_threshold_turns_dapo_style_rewards_into_accuracy():
    # DAPO: ±1 with an overlong penalty; accuracy = score > 0.
    scores = [1.0, -1.0, -1.2, 0.9]
    got = adv_of(hadw, scores, ["g"] * 4, success_threshold=0.0, anchor=FIXED, lambda_scale=1.0)
    assert process_state.PROCESS.pending_metrics.peek(1)["hadw/batch_acc"] == 0.5
    # p̂ = 0.5 = C⁻ -> Φ = 1: the result is plain GRPO on the composite reward.
    s = torch.tensor(scores)
    assert torch.allclose(got, (s - s.mean()) / (s.std() + 1e-6), atol=1e-5)


def test_hadw_normalize_phi_gives_unit_mean():
    scores = [1, 0, 0, 0, 1, 1, 1, 0]
    adv_of(hadw, scores, ["h"] * 4 + ["e"] * 4, normalize_phi=True, anchor=FIXED)
    assert process_state.PROCESS.pending_metrics.peek(1)["hadw/phi_mean"] == pytest.approx(1.0, abs=1e-6)


def test_hadw_over_dgpo_base_is_dgpo_times_phi():
    scores = [1, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    groups = ["h"] * 4 + ["e"] * 4 + ["w"] * 2
    base = adv_of(dgpo, scores, groups)
    process_state.reset()
    got = adv_of(hadw, scores, groups, base="dgpo", anchor=FIXED, lambda_scale=LAM, state_key="over-dgpo")
    p_hat = torch.tensor([0.25] * 4 + [0.75] * 4 + [0.0] * 2)
    phi = LAM * torch.exp(-torch.sign(base) * torch.sign(p_hat - 0.5) * (p_hat - 0.5).abs())
    assert torch.allclose(got, base * phi, rtol=1e-6)
    assert process_state.PROCESS.pending_metrics.peek(1)["dgpo/valid_groups"] == 2


def test_hadw_over_dgpo_each_threshold_governs_its_own_accuracy():
    """HA-DW's y_t and p̂ use algorithm.hadw.success_threshold, DQW uses algorithm.dgpo.success_threshold:
    HA-DW's threshold no longer falls back to DGPO's."""
    scores = [0.9, 0.4, 0.1, 0.0, 0.8, 0.7, 0.6, 0.2]
    groups = ["a"] * 4 + ["b"] * 4
    with pytest.raises(ValueError, match="set algorithm.hadw.success_threshold"):
        adv_of(hadw, scores, groups, base="dgpo", anchor=FIXED, dgpo={"success_threshold": 0.5})
    base = adv_of(dgpo, scores, groups, dgpo={"success_threshold": 0.5})
    process_state.reset()
    got = adv_of(hadw, scores, groups, base="dgpo", anchor=FIXED, lambda_scale=LAM, success_threshold=0.3,
                 dgpo={"success_threshold": 0.5})
    p_hat = torch.tensor([0.5] * 4 + [0.75] * 4)  # accuracy at HA-DW's threshold 0.3 (DGPO's 0.5: 0.25, 0.75)
    phi = LAM * torch.exp(-torch.sign(base) * torch.sign(p_hat - 0.5) * (p_hat - 0.5).abs())
    assert torch.allclose(got, base * phi, rtol=1e-6)


def test_hadw_metrics_of_one_step():
    scores = [1, 0, 0, 0, 1, 1, 1, 0]
    adv_of(hadw, scores, ["h"] * 4 + ["e"] * 4, lambda_scale=LAM, anchor=FIXED)
    m = metrics.pop(1)
    phis = [LAM * math.exp(0.25)] * 2 + [LAM * math.exp(-0.25)] * 6
    assert m["hadw/anchor_prior"] == 0.5 and m["hadw/batch_acc"] == 0.5
    assert m["hadw/phi_max"] == pytest.approx(max(phis), rel=1e-6)
    assert m["hadw/phi_min"] == pytest.approx(min(phis), rel=1e-6)
    assert m["hadw/phi_mean"] == pytest.approx(np.mean(phis), rel=1e-6)
    assert m["hadw/phi_std"] == pytest.approx(np.std(phis), rel=1e-5)
    assert m["hadw/frac_amplified"] == 0.25
    assert metrics.pop(1) == {}


# ------------------------------------------------------------------------------------------------- DGPO
def test_dgpo_dgae_dqw_and_valid_token_ratio_by_hand():
    scores = [1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0]
    groups = ["h"] * 4 + ["e"] * 4 + ["c"] * 2 + ["w"] * 2  # c: all correct, w: all wrong (zero variance)
    lengths = [2, 2, 2, 2, 2, 2, 2, 2, 5, 5, 5, 5]
    got = adv_of(dgpo, scores, groups, lengths=lengths)
    mad = 0.375  # MAD of [1,0,0,0] = (0.75 + 3·0.25)/4
    a_pos, a_neg = 0.75 / (mad + 1e-6), -0.25 / (mad + 1e-6)  # Eqs. 4-5
    z = math.exp(-0.25 / 2) + math.exp(-0.75 / 2)  # Eq. 6 over the 2 valid groups, D = -acc, T = 2
    w_h, w_e = 2 * math.exp(-0.25 / 2) / z, 2 * math.exp(-0.75 / 2) / z
    ratio = 36 / 16  # all valid tokens / tokens of rows in valid groups (Eq. 3 denominator)
    expected = [a_pos * w_h, *[a_neg * w_h] * 3, *[-a_neg * w_e] * 3, -a_pos * w_e, 0, 0, 0, 0]
    assert torch.allclose(got, torch.tensor(expected) * ratio, rtol=1e-5)
    m = metrics.pop(1)
    assert m["dgpo/valid_groups"] == 2 and m["dgpo/zero_var_groups"] == 2
    assert m["dgpo/valid_token_ratio"] == pytest.approx(16 / 36)
    assert m["dgpo/weight_min"] == pytest.approx(w_e, rel=1e-6) and m["dgpo/weight_max"] == pytest.approx(w_h, rel=1e-6)


def test_dgpo_all_wrong_rows_in_a_valid_group_use_floor_difficulty_minus_one():
    # A group with accuracy 0 can still be valid on a composite reward: D = -1 (paper App. G).
    scores = [0.0, -0.5, 1.0, 0.0]  # threshold 0.5 -> accuracies [0, 0] and [1, 0]
    got = adv_of(dgpo, scores, ["x", "x", "y", "y"], dgpo={"success_threshold": 0.5, "valid_token_norm": False})
    z = math.exp(-1 / 2) + math.exp(-0.5 / 2)
    assert torch.allclose(got[:2].abs(), torch.full((2,), 2 * math.exp(-1 / 2) / z), rtol=1e-5)
    assert torch.allclose(got[2:].abs(), torch.full((2,), 2 * math.exp(-0.5 / 2) / z), rtol=1e-5)


def test_dgpo_switches_for_the_table3_ablation():
    scores = [1, 0, 0, 0, 1, 1, 1, 0]
    groups = ["h"] * 4 + ["e"] * 4
    plain = adv_of(dgpo, scores, groups, dgpo={"dgae": False, "dqw": False, "valid_token_norm": False})
    rewards, mask, index = make_inputs(scores, groups)
    assert torch.allclose(plain, row_adv(compute_grpo_outcome_advantage(rewards, mask, index)[0], mask))
    dgae_only = adv_of(dgpo, scores, groups, dgpo={"dqw": False, "valid_token_norm": False})
    for g in range(2):  # Theorem 2: Σ_i |Â_DG,i| = G per valid group
        assert dgae_only[4 * g : 4 * g + 4].abs().sum() == pytest.approx(4.0, rel=1e-5)


def test_dgpo_single_response_groups_are_not_valid_and_non_binary_scores_need_dqw_threshold():
    got = adv_of(dgpo, [0.3, 0.7, 0.9], ["g", "g", "solo"], dgpo={"dqw": False})
    assert got[2] == 0 and got[0] < 0 < got[1]
    with pytest.raises(ValueError, match="set algorithm.dgpo.success_threshold=<threshold>"):
        adv_of(dgpo, [0.3, 0.7, 0.9], ["g", "g", "solo"])


# ------------------------------------------------------------------------------------------ data errors
@pytest.mark.parametrize("fn", [hadw, dgpo])
def test_data_errors_say_what_is_wrong(fn):
    rewards, mask, index = make_inputs([1, 0, 1, 0], ["a"] * 4)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'index'"):  # as verl's estimators
        fn(token_level_rewards=rewards, response_mask=mask, config=algo())
    with pytest.raises(ValueError, match="no 'index'.*data.non_tensor_batch\\['uid'\\]"):
        fn(token_level_rewards=rewards, response_mask=mask, index=None, config=algo())
    bad = rewards.clone()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite \(NaN/Inf\) rewards in rows \[1\]"):
        fn(token_level_rewards=bad, response_mask=mask, index=index, config=algo())
    with pytest.raises(ValueError, match="empty batch"):
        fn(token_level_rewards=rewards[:0], response_mask=mask[:0], index=index[:0], config=algo())
    with pytest.raises(ValueError, match="none with a response token"):
        fn(token_level_rewards=rewards, response_mask=torch.zeros_like(mask), index=index, config=algo())
    with pytest.raises(ValueError, match="index has 3 entries but the batch has 4 rows"):
        fn(token_level_rewards=rewards, response_mask=mask, index=index[:3], config=algo())


def test_hadw_non_binary_scores_without_threshold_name_the_key():
    rewards, mask, index = make_inputs([1.0, -1.0, 0.5, 0.0], ["a"] * 4)
    with pytest.raises(ValueError, match=r"not binary accuracies.*set algorithm.hadw.success_threshold=<threshold>"):
        hadw(token_level_rewards=rewards, response_mask=mask, index=index, config=algo())


def test_config_errors_surface_from_the_estimator():
    rewards, mask, index = make_inputs([1, 0], ["a"] * 2)
    with pytest.raises(ValueError, match="Did you mean 'algorithm.hadw.lambda_scale'"):
        hadw(token_level_rewards=rewards, response_mask=mask, index=index, config=algo(lamda_scale=1.3))


# ------------------------------------------------------------------------------------------- group ids
def _uids(n, group, rng):
    """verl-style: a random uid per prompt, repeated over its responses (sorted order != appearance order)."""
    prompts = [f"{rng.integers(1 << 40):010x}" for _ in range(n // group)]
    return np.array([prompts[i // group] for i in range(n)], dtype=object)


@pytest.mark.parametrize("normalize_phi", [False, True])
def test_hadw_over_grpo_is_bit_identical_with_unsorted_group_ids(normalize_phi):
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 9, size=40)
    labels = np.repeat(_uids(40, 1, rng), sizes)  # varied group sizes, singletons included
    n = len(labels)
    scores = rng.normal(size=n).round(3)  # non-binary: float rounding would show any change of order
    lengths = rng.integers(0, 7, size=n)  # some verl padding rows (length 0)
    rewards, mask, _ = make_inputs(scores, labels, lengths)
    codes = np.unique(labels, return_inverse=True)[1].astype(np.int64)  # ints: verl's sorted path
    from verl_hadw.core.groups import group_ids

    valid = labels[lengths > 0]
    assert not torch.equal(group_ids(valid, "cpu", sorted_ids=False)[0], group_ids(valid, "cpu")[0])  # fast path
    cfg = dict(success_threshold=0.0, normalize_phi=normalize_phi, anchor={"mode": "fixed", "fixed_value": 0.4})
    fast, _ = hadw(token_level_rewards=rewards, response_mask=mask, index=labels, config=algo(**cfg))
    ref, _ = hadw(token_level_rewards=rewards, response_mask=mask, index=codes, config=algo(**cfg))
    assert torch.equal(fast, ref) and fast.abs().sum() > 0


def test_group_stats_are_bit_identical_to_verls_group_mean_std():
    from verl.utils.groupwise import group_mean_std

    from verl_hadw.core.groups import group_stats

    rng = np.random.default_rng(5)
    gid = torch.from_numpy(np.repeat(rng.permutation(30), rng.integers(1, 9, size=30)))  # singletons included
    scores = torch.from_numpy(rng.normal(size=gid.numel()).astype(np.float32) * 3)
    mean, std, count, group_mean = group_stats(scores, gid, 30)
    ref_mean, ref_std, ref_count = group_mean_std(scores, gid, eps=0.0, device="cpu")
    assert torch.equal(mean, ref_mean) and torch.equal(std, ref_std) and torch.equal(count, ref_count)
    sums = torch.zeros(30).index_add_(0, gid, scores)
    assert torch.equal(group_mean, sums / count) and (count == 1).any()


# ------------------------------------------------------------------------------------------ verl's calling convention
@pytest.mark.parametrize("fn, options", [(hadw, {}), (hadw, {"base": "dgpo"}), (dgpo, {})])
def test_the_signature_is_verls_and_epsilon_and_norm_must_agree_with_the_config(fn, options):
    """verl's order (token_level_rewards, response_mask, index, epsilon, norm_adv_by_std_in_grpo, config), plus what
    else verl's compute_advantage passes; epsilon and norm_adv_by_std_in_grpo are the config's, given or not."""
    import inspect

    from verl_hadw.core.errors import ConfigError

    names = list(inspect.signature(fn).parameters)
    assert names == list(inspect.signature(compute_grpo_outcome_advantage).parameters) + ["kwargs"]
    rewards, mask, index = make_inputs([1, 0, 0, 0, 1, 1, 0, 1], ["a"] * 4 + ["b"] * 4)
    process_state.reset()
    expected, _ = fn(rewards, mask, index, config=algo("hadw" if fn is hadw else "dgpo", **options))
    process_state.reset()
    got, _ = fn(rewards, mask, index, 1e-6, True, algo("hadw" if fn is hadw else "dgpo", **options),
                reward_baselines=torch.zeros(8))
    assert torch.equal(got, expected)
    section = "dgpo" if fn is dgpo or options else "hadw"
    with pytest.raises(ConfigError, match=f"epsilon=0.1 but the config has algorithm.{section}.epsilon=1e-06"):
        fn(rewards, mask, index, epsilon=0.1, config=algo(**options))
    with pytest.raises(ConfigError, match="norm_adv_by_std_in_grpo=False but the config has algorithm.norm_adv_by_std"):
        fn(rewards, mask, index, norm_adv_by_std_in_grpo=False, config=algo(**options))

"""What no equation may do, with no framework (only ``verl_hadw.core``): groups whose scores are all equal get
exactly 0, padding rows and row order change nothing, a refused call leaves the anchor as it was. The batches and
references are test_core_equations.py's."""

import copy

import numpy as np
import pytest
import torch
from test_core_equations import CLOSE, LENGTH, Anchor, Case, key, on_rows, random_case, run_hadw

from verl_hadw.core.advantages import HadwCall, dgpo_call, grpo_advantage
from verl_hadw.core.options import DgpoConfig, HadwConfig


# ------------------------------------------------------------------------------ what no equation may do
def test_groups_whose_scores_are_all_equal_get_exactly_zero():
    # 8 × 0.3 in float32: the group mean rounds, and (s - mean)/(std + ε) would turn that into noise
    case = Case([0.3] * 8 + [0.1] * 3 + [1, 0, 0, 1] + [1, 1], ["f"] * 8 + ["t"] * 3 + ["m"] * 4 + ["c"] * 2,
                [LENGTH] * 17)
    s = torch.full((8,), 0.3)
    assert (s - s.mean()).abs().max() > 0  # the naive formula is not 0 here: the test can fail
    b, flat, th = case.batch(), np.r_[[True] * 11, [False] * 4, [True] * 2], DgpoConfig(success_threshold=0.5)
    results = {"grpo": grpo_advantage(b, 1e-6, True), "dr-grpo": grpo_advantage(b, 1e-6, False),
               "dgpo": dgpo_call(b, th, True, key)[0],
               "hadw": run_hadw(case, HadwConfig(success_threshold=0.5))[1].advantages,
               "hadw-dgpo": run_hadw(case, HadwConfig(base="dgpo", success_threshold=0.5), th)[1].advantages}
    for name, adv in results.items():
        assert np.all(on_rows(b, adv)[flat] == 0.0) and np.all(on_rows(b, adv)[~flat] != 0.0), name


def _all_methods(case: Case, pad_reward: float = 0.0) -> dict:
    """(N,) advantages of every method on ``case`` (fresh anchors), and the (K_t, B_t) each anchor was handed."""
    b = case.batch(pad_reward)
    out = {"grpo": on_rows(b, grpo_advantage(b, 1e-6, True)),
           "dgpo": on_rows(b, dgpo_call(b, DgpoConfig(), True, key)[0])}
    for name, cfg in (("hadw", HadwConfig()), ("hadw-dgpo", HadwConfig(base="dgpo", normalize_phi=True))):
        _, call, anchor = run_hadw(case, cfg, pad_reward=pad_reward)
        out[name], out[name + "-observed"] = on_rows(b, call.advantages), np.array(anchor.observed[0])
    return out


def test_padding_rows_change_nothing():
    case = random_case(8, n_pad=0)
    plain, n = _all_methods(case), len(case.scores)
    padded = Case(case.scores + [1.0] * 3, case.labels + [case.labels[0], "pad", case.labels[3]],
                  case.lengths + [0] * 3)
    perm = list(range(3)) + [n, n + 1] + list(range(3, n)) + [n + 2]  # padding rows in the middle and at the end
    got = _all_methods(padded.permuted(perm), pad_reward=5.0)  # with a reward under their zero mask
    keep = np.array([i < n for i in perm])
    for name in plain:  # bit for bit; K_t and B_t too: padding rows are no responses
        if name.endswith("-observed"):
            assert np.array_equal(got[name], plain[name]), name
        else:
            assert np.array_equal(got[name][keep], plain[name]) and np.all(got[name][~keep] == 0), name


@pytest.mark.parametrize("seed", [9, 10])
def test_row_order_does_not_matter(seed):
    case = random_case(seed)
    perm = list(np.random.default_rng(seed).permutation(len(case.scores)))
    plain, shuffled = _all_methods(case), _all_methods(case.permuted(perm))
    for name in plain:
        want = plain[name] if name.endswith("-observed") else plain[name][perm]
        assert np.allclose(shuffled[name], want, **CLOSE) and np.abs(want).sum() > 0, name


# ------------------------------------------------------------------------- a refused call moves nothing
def _step(anchor: Anchor, scores, cfg: HadwConfig, scale: float = 1.0) -> HadwCall:
    return run_hadw(Case([s * scale for s in scores], ["a"] * 4 + ["b"] * 4, [LENGTH] * 8), cfg, anchor=anchor)[1]


STEPS = [[1, 0, 0, 0, 1, 1, 1, 0], [1, 1, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 1, 1]]


@pytest.mark.parametrize("cfg, bad_scores, scale, message", [
    (HadwConfig(), [1, 0.5, 0, 0, 1, 1, 1, 1], 1.0, r"not binary accuracies"),
    (HadwConfig(difficulty_from="reward"), STEPS[1], 500.0, r"overflows float32.*did not take"),  # Φ = inf
], ids=["non-binary", "phi-overflow"])
def test_a_call_that_raises_leaves_the_anchor_as_it_was(cfg, bad_scores, scale, message):
    straight, refused = Anchor(cfg.anchor), Anchor(cfg.anchor)
    for anchor in (straight, refused):
        _step(anchor, STEPS[0], cfg)
        anchor.next_step()
    before = (copy.deepcopy(refused.state.to_dict()), refused.step, refused.call, list(refused.observed))
    with pytest.raises(ValueError, match=message):
        _step(refused, bad_scores, cfg, scale)
    assert (refused.state.to_dict(), refused.step, refused.call, refused.observed) == before  # observe never ran
    for scores in STEPS[1:]:  # the run then goes on as one that never saw the refused call, bit for bit
        ref, call = _step(straight, scores, cfg), _step(refused, scores, cfg)
        assert torch.equal(call.advantages, ref.advantages) and call.view == ref.view
        straight.next_step()
        refused.next_step()
    assert refused.state.to_dict() == straight.state.to_dict() and straight.state.committed_steps == 2

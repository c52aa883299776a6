"""The anchor state machine against an independent reference, step by step, for every mode."""

import json
import math
import random
import warnings

import pytest

from verl_hadw.core.anchor import AnchorState, AnchorStepError
from verl_hadw.core.options import AnchorConfig
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.config.run_options import parse_run


def reference(cfg: AnchorConfig, ys: list[float]) -> list[tuple[float, float]]:
    """(prior used at step t, posterior of step t) written straight from docs/equations.md (HA-DW Eqs. 7-12, App. F)."""
    out, C, beliefs, accs = [], None, [], []
    for t, y in enumerate(ys):
        if cfg.mode == "fixed":
            out.append((cfg.fixed_value, cfg.fixed_value))
            continue
        if cfg.mode == "moving_average":
            window = (accs + [y])[-cfg.window :]
            post = sum(window) / len(window)
            prior = (y if cfg.init == "first_batch" else cfg.init) if t == 0 else C
            out.append((post if cfg.include_current else prior, post))
            C = post
            accs.append(y)
            continue
        prior = (y if cfg.init == "first_batch" else cfg.init) if t == 0 else C
        hist = (beliefs if cfg.sigma_source == "anchor" else accs)[-cfg.window :]
        if len(hist) < 2:
            sigma = cfg.sigma_warmup
        else:
            mean = sum(hist) / len(hist)  # Eq. 9
            sigma = math.sqrt(sum((c - mean) ** 2 for c in hist) / len(hist))  # Eq. 10
        eta_t = min(max(cfg.eta * sigma, cfg.eta_min), 1.0)  # Eq. 11 within Eq. 8's [0, 1]
        C = (1 - eta_t) * prior + eta_t * y  # Eq. 8
        out.append((prior, C))
        beliefs.append(C)
        accs.append(y)
    return out


CONFIGS = [
    AnchorConfig(),
    AnchorConfig(eta=0.7, window=3, sigma_source="anchor", init=0.2),
    AnchorConfig(eta=4.0, window=5, sigma_source="accuracy", eta_min=0.05),
    AnchorConfig(eta=0.5, window=4, sigma_warmup=0.3),
    AnchorConfig(mode="moving_average", window=4),
    AnchorConfig(mode="moving_average", window=10, include_current=True),
    AnchorConfig(mode="fixed", fixed_value=0.4),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.mode}-{c.sigma_source}-{c.eta}-{c.window}")
def test_multi_step_sequence_matches_reference(cfg):
    rng = random.Random(7)
    counts = [rng.randint(8, 64) for _ in range(40)]
    correct = [rng.randint(0, n) for n in counts]
    ys = [k / n for k, n in zip(correct, counts)]
    state = AnchorState(config=cfg)
    got = []
    for t, (k, n) in enumerate(zip(correct, counts), start=1):
        view = state.observe(t, 0, k, n)
        assert view.step == t and view.batch_acc == k / n
        got.append((view.prior, view.posterior))
    for (p, c), (rp, rc) in zip(got, reference(cfg, ys)):
        assert p == pytest.approx(rp, abs=1e-12) and c == pytest.approx(rc, abs=1e-12)


def test_k_calls_of_one_step_share_the_prior_and_advance_once():
    one, split = AnchorState(), AnchorState()
    for t in range(1, 9):
        parts = [(3 + t, 16), (t, 16), (5, 16), (9, 16)]
        ref = one.observe(t, 0, sum(k for k, _ in parts), 64)
        views = [split.observe(t, call, k, n) for call, (k, n) in enumerate(parts)]
        assert {v.prior for v in views} == {views[0].prior}
        assert views[-1].posterior == ref.posterior and views[-1].batch_acc == ref.batch_acc
        assert split.committed_steps == t - 1  # committed lazily: step t closes when step t+1 arrives
    assert split.to_dict() == {**one.to_dict(), "calls": [0, 1, 2, 3]}


def test_repeated_step_and_call_is_not_counted_twice_and_steps_cannot_go_back():
    state = AnchorState()
    state.observe(1, 0, 4, 8)
    state.observe(1, 0, 4, 8)  # a retried call
    assert (state.correct, state.count) == (4.0, 8)
    state.observe(3, 0, 1, 8)
    with pytest.raises(AnchorStepError, match="received step 2 after step 3"):
        state.observe(2, 0, 1, 8)
    with pytest.raises(ValueError, match="at least one valid response"):
        state.observe(3, 1, 0, 0)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.mode}-{c.sigma_source}")
def test_serialisation_round_trip_continues_bit_for_bit(cfg):
    rng = random.Random(3)
    obs = [(rng.randint(0, 32), 32) for _ in range(25)]
    straight = AnchorState(config=cfg)
    for t, (k, n) in enumerate(obs, start=1):
        straight.observe(t, 0, k, n)
    resumed = AnchorState(config=cfg)
    for t, (k, n) in enumerate(obs[:11], start=1):
        resumed.observe(t, 0, k, n)
    resumed = AnchorState.from_dict(json.loads(json.dumps(resumed.to_dict())))
    for t, (k, n) in enumerate(obs[11:], start=12):
        resumed.observe(t, 0, k, n)
    assert resumed.to_dict() == straight.to_dict()


def test_a_state_built_from_a_dict_never_changes_that_dict():
    """The Ray store keeps the actor's last state as its mirror; a preview rebuilds a state from it and observes the
    call. The mirror must come out untouched: rebuilt after a lost node, a mirror whose ``calls`` already listed the
    call would drop that call's counts (CI caught it: tests/verl/test_anchor_cluster.py, y_t of step 5 short of
    call 1)."""
    state = AnchorState(config=AnchorConfig(window=2))
    for t in (1, 2, 3):
        state.observe(t, 0, 3, 8)
    mirror = state.to_dict()
    before = json.loads(json.dumps(mirror))
    preview = AnchorState.from_dict(mirror)
    preview.observe(3, 1, 5, 8)  # a further call of the open step
    preview.observe(4, 0, 2, 8)  # and a new step, which commits
    assert mirror == before
    assert AnchorState.from_dict(mirror).observe(3, 1, 5, 8).batch_acc == 8 / 16


def test_from_dict_rejects_an_unknown_schema():
    data = AnchorState().to_dict()
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="schema_version 99"):
        AnchorState.from_dict(data)


def ramp(n=150, lo=0.30, hi=0.95):
    return [lo + (hi - lo) * t / (n - 1) for t in range(n)]


def final_anchor(cfg, ys):
    state = AnchorState(config=cfg)
    for t, y in enumerate(ys, start=1):
        view = state.observe(t, 0, y * 10_000, 10_000)
    return view.posterior


def test_literal_eq10_freezes_with_small_eta_and_the_default_tracks():
    # The measured pitfall: y rising 0.30 -> 0.95 over 150 steps, m = 10.
    ys = ramp()
    literal = {"eta_min": 0.0}  # the literal Eq. 11 switch; the default floor is tested in test_anchor_freeze.py
    assert 0.29 < final_anchor(AnchorConfig(eta=0.1, **literal), ys) < 0.32
    assert 0.29 < final_anchor(AnchorConfig(eta=1.0, **literal), ys) < 0.32
    assert final_anchor(AnchorConfig(eta=5.0), ys) > 0.85
    assert final_anchor(AnchorConfig(), ys) > 0.9  # the default η = 16
    assert final_anchor(AnchorConfig(eta=1.0, sigma_source="accuracy"), ys) > 0.6


def test_frozen_anchor_warns_once_and_the_flag_is_part_of_the_state():
    cfg = parse_run({"hadw": {"state_key": "frozen", "anchor": {"eta": 0.1, "eta_min": 0.0}}}).hadw
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for y in ramp():
            anchor_client.get_client(cfg).observe(y * 1000, 1000)
    frozen = [w for w in caught if "is frozen" in str(w.message)]
    assert len(frozen) == 1 and "sigma_source=accuracy" in str(frozen[0].message)
    assert anchor_client.state_dict(cfg)["warned_frozen"] is True

    healthy = parse_run({"hadw": {"state_key": "healthy"}}).hadw
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for y in ramp():
            anchor_client.get_client(healthy).observe(y * 1000, 1000)
    assert not [w for w in caught if "is frozen" in str(w.message)]


def test_state_key_may_not_change_its_anchor_config():
    anchor_client.get_client(parse_run({"hadw": {"state_key": "k"}}).hadw).observe(1, 2)
    with pytest.raises(ValueError, match="already in use with a different anchor config"):
        anchor_client.get_client(parse_run({"hadw": {"state_key": "k", "anchor": {"window": 3}}}).hadw).observe(1, 2)


def test_trainer_step_groups_calls_and_fallback_counts_each_call_as_a_step():
    cfg = parse_run({"hadw": {"state_key": "steps"}}).hadw
    assert anchor_client.get_client(cfg).observe(1, 4).step == 1  # no trainer: each call is a step
    assert anchor_client.get_client(cfg).observe(1, 4).step == 2
    first = anchor_client.get_client(cfg, trainer_step=5).observe(3, 4, 5)
    second = anchor_client.get_client(cfg, trainer_step=5).observe(1, 4, 5)
    assert first.step == second.step == 5 and first.prior == second.prior
    assert second.batch_acc == 0.5

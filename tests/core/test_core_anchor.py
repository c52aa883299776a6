"""The anchor state machine (``core.anchor.machine.AnchorState``) without any framework: Eqs. 7-12 and App. F
against a reference written straight from docs/equations.md, the calls of one step, serialisation, the modes and
the eta_min floor.

Imports only ``verl_hadw.core``, pytest and the standard library, so the environments without verl (TRL, ms-swift) check
the anchor too.
"""

import json
import math
import random

import pytest

from verl_hadw.core.anchor import AnchorState, AnchorStepError, population_std
from verl_hadw.core.anchor.machine import SCHEMA_VERSION
from verl_hadw.core.options import AnchorConfig


def reference(cfg: AnchorConfig, ys: list[float]) -> list[tuple[float, float, float, float]]:
    """(prior used at step t, posterior, η_t, σ_t) of each step, written straight from docs/equations.md (HA-DW
    Eqs. 7-12, App. F), one call per step."""
    out, C, beliefs, accs = [], None, [], []
    for t, y in enumerate(ys):
        if cfg.mode == "fixed":  # Table 2: C⁻ = C⁺ = the constant
            out.append((cfg.fixed_value, cfg.fixed_value, 0.0, 0.0))
            continue
        first = (y if cfg.init == "first_batch" else cfg.init) if t == 0 else C  # Eq. 12; C_0 = init
        if cfg.mode == "moving_average":  # App. F: plain mean of the last h batch accuracies
            window = (accs + [y])[-cfg.window :]
            post = sum(window) / len(window)
            mean = sum(window) / len(window)
            sigma = math.sqrt(sum((v - mean) ** 2 for v in window) / len(window))
            out.append((post if cfg.include_current else first, post, 1 / len(window), sigma))
            C = post
            accs.append(y)
            continue
        hist = (beliefs if cfg.sigma_source == "anchor" else accs)[-cfg.window :]
        if len(hist) < 2:
            sigma = cfg.sigma_warmup
        else:
            mean = sum(hist) / len(hist)  # Eq. 9
            sigma = math.sqrt(sum((c - mean) ** 2 for c in hist) / len(hist))  # Eq. 10
        eta_t = min(max(cfg.eta * sigma, cfg.eta_min), 1.0)  # Eq. 11 within Eq. 8's [0, 1], floored at eta_min
        C = (1 - eta_t) * first + eta_t * y  # Eq. 8
        out.append((first, C, eta_t, sigma))
        beliefs.append(C)
        accs.append(y)
    return out


CONFIGS = [
    AnchorConfig(),
    AnchorConfig(eta=0.7, window=3, sigma_source="anchor", init=0.2),
    AnchorConfig(eta=4.0, window=5, sigma_source="accuracy", eta_min=0.05),
    AnchorConfig(eta=0.5, window=4, sigma_warmup=0.3),
    AnchorConfig(eta=0.3, window=6, eta_min=0.0),
    AnchorConfig(eta=0.3, window=6, eta_min=0.4),
    AnchorConfig(mode="moving_average", window=4),
    AnchorConfig(mode="moving_average", window=10, include_current=True, init=0.9),
    AnchorConfig(mode="fixed", fixed_value=0.4),
]
IDS = [f"{c.mode}-{c.sigma_source}-eta{c.eta}-m{c.window}-min{c.eta_min}-cur{int(c.include_current)}"
       for c in CONFIGS]


def observations(seed: int, n: int = 40) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    counts = [rng.randint(8, 64) for _ in range(n)]
    return [(rng.randint(0, c), c) for c in counts]


def run(cfg: AnchorConfig, obs, first_step: int = 1, state: AnchorState | None = None) -> AnchorState:
    state = state or AnchorState(config=cfg)
    for t, (k, n) in enumerate(obs, start=first_step):
        state.observe(t, 0, k, n)
    return state


# ----------------------------------------------------------------------------------- Eqs. 7-12, App. F
@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_a_sequence_of_steps_matches_the_reference(cfg):
    obs = observations(7)
    state = AnchorState(config=cfg)
    got = []
    for t, (k, n) in enumerate(obs, start=1):
        view = state.observe(t, 0, k, n)
        assert view.step == t and view.batch_acc == k / n  # Eq. 7: y_t = K_t / B_t
        got.append((view.prior, view.posterior, view.eta_t, view.sigma_t))
    ref = reference(cfg, [k / n for k, n in obs])
    for t, (g, r) in enumerate(zip(got, ref), start=1):
        assert g == pytest.approx(r, abs=1e-12), f"step {t}"
    assert state.committed_steps == len(obs) - 1  # the last step stays open
    assert len(state.posteriors) == len(state.accuracies) == min(cfg.window + 1, len(obs) - 1)  # m + 1 kept


def test_eq_11_first_two_steps_take_the_batch_accuracy_then_sigma_sets_the_gain():
    """σ warm-up 1 and η = 16 give η_t = 1 on the first two updates (C_1⁺ = y_1, C_2⁺ = y_2); then η_t = η·σ_t."""
    state = AnchorState()
    v1 = state.observe(1, 0, 3, 8)
    assert (v1.prior, v1.posterior, v1.eta_t, v1.sigma_t) == (3 / 8, 3 / 8, 1.0, 1.0)
    v2 = state.observe(2, 0, 5, 8)
    assert (v2.prior, v2.posterior, v2.eta_t) == (3 / 8, 5 / 8, 1.0)
    v3 = state.observe(3, 0, 4, 8)
    sigma = population_std([3 / 8, 5 / 8])  # Eq. 10 over C_1⁺, C_2⁺
    assert v3.sigma_t == sigma == 0.125 and v3.eta_t == min(16 * sigma, 1.0) == 1.0
    cfg = AnchorConfig(eta=2.0)
    state = run(cfg, [(3, 8), (5, 8)])
    v3 = state.observe(3, 0, 8, 8)
    assert v3.eta_t == 0.25 and v3.posterior == pytest.approx(0.75 * 5 / 8 + 0.25 * 1.0, abs=1e-15)


def test_population_std_is_eq_10():
    values = [0.1, 0.4, 0.35, 0.9]
    mean = sum(values) / 4
    assert population_std(values) == pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in values) / 4), abs=1e-15)
    assert population_std([0.3, 0.3]) == 0.0 and population_std([0.0, 1.0]) == 0.5


def test_eta_min_floor_keeps_the_anchor_moving_where_the_literal_rule_freezes():
    """Two equal first accuracies give σ_t = 0: the literal Eq. 11 (eta_min 0) gives η_t = 0 forever."""
    obs = [(4, 8), (4, 8)] + [(7, 8)] * 30
    literal = AnchorState(config=AnchorConfig(eta_min=0.0))
    for t, (k, n) in enumerate(obs, start=1):
        view = literal.observe(t, 0, k, n)
        if t >= 3:
            assert (view.sigma_t, view.eta_t, view.posterior) == (0.0, 0.0, 0.5)
    floored = AnchorState(config=AnchorConfig(eta_min=0.05))
    for t, (k, n) in enumerate(obs, start=1):
        view = floored.observe(t, 0, k, n)
        if t == 3:
            assert view.sigma_t == 0.0 and view.eta_t == 0.05
            assert view.posterior == pytest.approx(0.95 * 0.5 + 0.05 * 7 / 8, abs=1e-15)
    assert view.posterior > 0.8  # it follows y_t = 0.875


def test_moving_average_mode_is_app_f():
    cfg = AnchorConfig(mode="moving_average", window=3)
    ys = [(2, 8), (6, 8), (4, 8), (8, 8), (1, 8)]
    state = AnchorState(config=cfg)
    views = [state.observe(t, 0, k, n) for t, (k, n) in enumerate(ys, start=1)]
    assert [v.posterior for v in views] == pytest.approx([2 / 8, 4 / 8, 4 / 8, 6 / 8, 13 / 24], abs=1e-15)
    assert [v.prior for v in views] == pytest.approx([2 / 8, 2 / 8, 4 / 8, 4 / 8, 6 / 8], abs=1e-15)  # C_{t-1}⁺
    assert [v.eta_t for v in views] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 3, 1 / 3])  # metrics only: 1/h
    assert views[-1].sigma_t == pytest.approx(population_std([4 / 8, 8 / 8, 1 / 8]))
    current = AnchorState(config=AnchorConfig(mode="moving_average", window=3, include_current=True))
    got = [current.observe(t, 0, k, n) for t, (k, n) in enumerate(ys, start=1)]
    assert all(v.prior == v.posterior for v in got)  # the released code's anchor: C_t⁺ in Eq. 13


def test_fixed_mode_keeps_its_value_whatever_the_accuracy():
    state = AnchorState(config=AnchorConfig(mode="fixed", fixed_value=0.3, init=0.9))
    for t, k in enumerate([0, 8, 2, 8, 8], start=1):
        view = state.observe(t, 0, k, 8)
        assert (view.prior, view.posterior, view.eta_t, view.sigma_t) == (0.3, 0.3, 0.0, 0.0)
        assert view.batch_acc == k / 8
    assert state.posteriors == [0.3] * 4 and state.accuracies == [0.0, 1.0, 0.25, 1.0]


@pytest.mark.parametrize("init", ["first_batch", 0.0, 0.7])
def test_the_first_prior_is_init(init):
    state = AnchorState(config=AnchorConfig(init=init))
    view = state.observe(1, 0, 1, 4)
    assert view.prior == (0.25 if init == "first_batch" else init)
    assert view.posterior == 0.25  # η_1 = 1 under the σ warm-up


# -------------------------------------------------------------------------------------- calls of one step
def test_several_calls_of_one_step_share_the_prior_and_commit_once():
    one, split = AnchorState(), AnchorState()
    for t in range(1, 9):
        parts = [(3 + t, 16), (t, 16), (5, 16), (9, 16)]
        ref = one.observe(t, 0, sum(k for k, _ in parts), 64)
        views = [split.observe(t, call, k, n) for call, (k, n) in enumerate(parts)]
        # every call of step t sees C_t⁻ (step 1: C_0 is the first call's accuracy, with init first_batch)
        assert {v.prior for v in views} == ({ref.prior} if t > 1 else {parts[0][0] / 16})
        assert views[0].batch_acc == parts[0][0] / 16  # y_t so far
        assert views[-1].posterior == ref.posterior and views[-1].batch_acc == ref.batch_acc
        assert split.committed_steps == t - 1  # committed lazily: step t closes when step t + 1 arrives
        assert len(split.posteriors) == min(t - 1, split.config.window + 1)
    assert split.to_dict() == {**one.to_dict(), "calls": [0, 1, 2, 3]}


def test_first_step_in_several_calls_takes_its_first_call_as_c0():
    state = AnchorState()
    a = state.observe(1, 0, 2, 8)
    b = state.observe(1, 1, 8, 8)
    assert a.prior == b.prior == 0.25 and b.batch_acc == 10 / 16 and b.posterior == 10 / 16


def test_a_repeated_call_counts_once_and_steps_cannot_go_back():
    state = AnchorState()
    state.observe(1, 0, 4, 8)
    again = state.observe(1, 0, 4, 8)  # a retried call
    assert (state.correct, state.count, state.calls) == (4.0, 8, [0]) and again.batch_acc == 0.5
    state.observe(3, 0, 1, 8)  # steps may skip
    assert state.committed_steps == 1 and state.open_step == 3
    with pytest.raises(AnchorStepError, match="received step 2 after step 3"):
        state.observe(2, 0, 1, 8)
    with pytest.raises(ValueError, match="at least one valid response, got count=0"):
        state.observe(3, 1, 0, 0)
    assert (state.open_step, state.correct, state.count, state.calls) == (3, 1.0, 8, [0])  # refused: no change
    with pytest.raises(RuntimeError, match="has not observed any step"):
        AnchorState().view()


# ------------------------------------------------------------------------------------------ serialisation
@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_to_dict_from_dict_continues_bit_for_bit(cfg):
    obs = observations(3, 25)
    straight = run(cfg, obs)
    resumed = run(cfg, obs[:11])
    text = json.dumps(resumed.to_dict())  # through JSON, as a file holds it
    resumed = AnchorState.from_dict(json.loads(text))
    assert resumed.config == cfg and resumed.to_dict()["schema_version"] == SCHEMA_VERSION
    run(cfg, obs[11:], first_step=12, state=resumed)
    assert resumed.to_dict() == straight.to_dict()
    assert resumed.view() == straight.view()


def test_a_state_saved_between_calls_of_one_step_continues_that_step():
    cfg = AnchorConfig(eta=3.0, window=4)
    straight = AnchorState(config=cfg)
    saved = AnchorState(config=cfg)
    for t in range(1, 7):
        for call, k in enumerate((t % 5, 3)):
            straight.observe(t, call, k, 8)
            if t < 4 or (t == 4 and call == 0):
                saved.observe(t, call, k, 8)
    resumed = AnchorState.from_dict(json.loads(json.dumps(saved.to_dict())))
    resumed.observe(4, 0, 4 % 5, 8)  # the call already counted before the save: not again
    resumed.observe(4, 1, 3, 8)
    for t in (5, 6):
        for call, k in enumerate((t % 5, 3)):
            resumed.observe(t, call, k, 8)
    assert resumed.to_dict() == straight.to_dict()


def test_from_dict_takes_the_runs_config_and_never_changes_its_dict():
    state = run(AnchorConfig(window=2), [(3, 8), (5, 8), (6, 8)])
    data = state.to_dict()
    before = json.loads(json.dumps(data))
    tuned = AnchorState.from_dict(data, AnchorConfig(eta=1.0, window=2))
    assert tuned.config.eta == 1.0 and tuned.posteriors == state.posteriors
    tuned.observe(3, 1, 8, 8)
    tuned.observe(4, 0, 2, 8)  # commits: the lists of ``data`` must not grow
    assert data == before


@pytest.mark.parametrize("version", [None, 0, 2, "1"])
def test_from_dict_refuses_an_unknown_schema(version):
    data = AnchorState().to_dict()
    if version is None:
        data.pop("schema_version")
    else:
        data["schema_version"] = version
    with pytest.raises(ValueError, match=rf"unsupported anchor state schema_version {version!r:.3}"):
        AnchorState.from_dict(data)
    assert SCHEMA_VERSION == 1  # the first release's, the only one read
    data["schema_version"] = 1
    assert AnchorState.from_dict(data).to_dict() == AnchorState().to_dict()


# ------------------------------------------------------------------------------------------ freeze warning
def test_a_frozen_anchor_warns_once_and_the_flag_survives_a_round_trip():
    ramp = [0.30 + 0.65 * t / 149 for t in range(150)]
    state = AnchorState(config=AnchorConfig(eta=0.1, eta_min=0.0))
    warned = []
    for t, y in enumerate(ramp, start=1):
        view = state.observe(t, 0, y * 1000, 1000)
        warned += [t] if view.warn else []
        if t == 100:
            state = AnchorState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert len(warned) == 1 and warned[0] <= 100 and view.frozen and state.warned_frozen
    assert 0.29 < view.posterior < 0.32  # the literal rule with a small η: stuck near the start
    healthy = AnchorState()
    views = [healthy.observe(t, 0, y * 1000, 1000) for t, y in enumerate(ramp, start=1)]
    assert not any(v.frozen for v in views) and views[-1].posterior > 0.9

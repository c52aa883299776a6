"""10,000-step soak of the anchor: the pure state machine and the named Ray actor behind ``anchor_client``.

Every call's view must equal an independent reference written here from the equations (it keeps the whole
history; the package keeps only the last m + 1 values), the kept history and the serialised state must stay
bounded, and the resident memory of the driver and of the actor process must stay flat. The figures are
printed (``pytest -s``); timing is reported, never asserted.
"""

import gc
import json
import math
import os
import random
import time

import psutil
import pytest
import ray
from batches import start_ray_node

from verl_hadw.core.anchor import AnchorState
from verl_hadw.core.options import AnchorConfig
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.anchor_store.stores import actor_name
from verl_hadw.verl.config.run_options import parse_run

pytestmark = pytest.mark.slow  # 10,000 steps, half of them through a Ray actor

STEPS = 10_000
WARMUP = 1_000  # RSS is compared between the end of the warm-up and the end of the soak
RSS_GROWTH_BOUND_MB = 8.0  # the whole soak keeps ~11k views; a per-step leak of >= 1 KB would exceed it


class ReferenceKalman:
    """HA-DW's anchor (kalman mode) from the paper's equations, keeping the full history.

    y_t = Σ correct / Σ valid over the step's calls (Eq. 7); C_t⁻ = C_{t-1}⁺ (Eq. 12), or ``init`` /
    the first call's accuracy at step 1; σ_t = population std of the last m posteriors (or batch accuracies)
    (Eqs. 9-10), ``sigma_warmup`` while fewer than two exist; η_t = clamp(η σ_t, η_min, 1) (Eq. 11);
    C_t⁺ = (1 - η_t) C_t⁻ + η_t y_t (Eq. 8).
    """

    def __init__(self, eta, window, sigma_source="anchor", sigma_warmup=1.0, eta_min=0.0, init="first_batch"):
        self.eta, self.m, self.source = eta, window, sigma_source
        self.sigma_warmup, self.eta_min, self.init = sigma_warmup, eta_min, init
        self.all_posteriors, self.all_accuracies = [], []
        self.step, self.prior, self.correct, self.count, self.seen = None, None, 0.0, 0, set()

    def _sigma(self):
        history = self.all_posteriors if self.source == "anchor" else self.all_accuracies
        last = history[-self.m :]
        if len(last) < 2:
            return self.sigma_warmup
        mean = sum(last) / len(last)
        return math.sqrt(sum((v - mean) ** 2 for v in last) / len(last))

    def _update(self, y):
        sigma = self._sigma()
        eta_t = min(max(self.eta * sigma, self.eta_min), 1.0)
        return (1.0 - eta_t) * self.prior + eta_t * y, eta_t, sigma

    def observe(self, step, call, correct, count):
        """(prior, posterior, y_t, η_t, σ_t) after this call."""
        if step != self.step:
            if self.step is not None:
                y = self.correct / self.count
                self.all_posteriors.append(self._update(y)[0])
                self.all_accuracies.append(y)
            if self.all_posteriors:
                self.prior = self.all_posteriors[-1]
            else:
                self.prior = correct / count if self.init == "first_batch" else float(self.init)
            self.step, self.correct, self.count, self.seen = step, 0.0, 0, set()
        if call not in self.seen:
            self.seen.add(call)
            self.correct += correct
            self.count += count
        y = self.correct / self.count
        posterior, eta_t, sigma = self._update(y)
        return self.prior, posterior, y, eta_t, sigma


def soak_inputs(seed):
    """Per step, a list of (correct, count) calls: accuracy drifting 0.1 <-> 0.9 (period 400 steps) with
    binomial noise of 256 responses, so the anchor keeps moving and σ_t stays away from 0."""
    rng = random.Random(seed)
    for t in range(1, STEPS + 1):
        p = 0.5 + 0.4 * math.sin(2 * math.pi * t / 400)
        n_calls = 2 if t % 7 == 0 else 1
        yield t, [(float(sum(rng.random() < p for _ in range(256))), 256) for _ in range(n_calls)]


def size_bound(state: dict) -> int:
    """Bytes of ``state`` as JSON with every float at the longest repr (24 chars) and every int at 10 digits:
    a bound for every state of the same shape, whatever values it holds."""

    def widest(v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, float):
            return -2.2250738585072014e-308
        if isinstance(v, int):
            return 10**9
        if isinstance(v, list):
            return [widest(x) for x in v]
        return {k: widest(x) for k, x in v.items()}

    return len(json.dumps(widest(state)))


def check_bounded(state: dict, window: int, bound: int) -> None:
    assert len(state["posteriors"]) <= window + 1 and len(state["accuracies"]) <= window + 1, state
    assert len(json.dumps(state)) <= bound


def rss_mb(pid=None) -> float:
    gc.collect()
    return psutil.Process(pid).memory_info().rss / 2**20


ANCHORS = {
    # the shipped default: η = 16, m = 10, σ of the anchor's own posteriors (Eq. 10), η_t floored at 0.05
    "default": {"eta": 16.0, "window": 10, "eta_min": 0.05},
    # the literal Eq. 11 switch: it freezes at a drift extreme (σ_t decays towards 0), which the soak must
    # reproduce value for value too
    "literal": {"eta": 16.0, "window": 10, "eta_min": 0.0},
    "accuracy-sigma": {"eta": 4.0, "window": 5, "sigma_source": "accuracy", "eta_min": 0.01, "init": 0.5},
}


@pytest.mark.parametrize("name", list(ANCHORS))
def test_state_machine_soak_matches_the_reference_with_bounded_history(name):
    cfg = AnchorConfig(**ANCHORS[name])
    state, ref = AnchorState(config=cfg), ReferenceKalman(**ANCHORS[name])
    rng = random.Random(1)
    start, rss_warm, bound = time.perf_counter(), None, None
    for t, calls in soak_inputs(seed=0):
        for call, (k, n) in enumerate(calls):
            view = state.observe(t, call, k, n)
            assert (view.prior, view.posterior, view.batch_acc, view.eta_t, view.sigma_t) == ref.observe(t, call, k, n)
            if rng.random() < 0.05:  # a repeated (step, call) is counted once, in both
                again = state.observe(t, call, k, n)
                assert (again.prior, again.posterior, again.batch_acc) == ref.observe(t, call, k, n)[:3]
        if t == cfg.window + 2:  # the kept history has reached its final length
            bound = size_bound(state.to_dict())
        if bound is not None:
            check_bounded(state.to_dict(), cfg.window, bound)
        if t == WARMUP:
            rss_warm = rss_mb()
    rss_end, seconds = rss_mb(), time.perf_counter() - start
    assert state.committed_steps == STEPS - 1 and len(ref.all_posteriors) == STEPS - 1
    assert len(set(ref.all_posteriors)) > STEPS // 2  # the anchor moved on most steps: not a constant compared
    if cfg.eta_min > 0:  # η_t >= η_min: the anchor keeps tracking the drift
        assert max(ref.all_posteriors[-400:]) - min(ref.all_posteriors[-400:]) > 0.5
    assert AnchorState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    print(f"\n[soak state machine {name}] {STEPS} steps in {seconds:.1f} s; driver RSS {rss_warm:.1f} -> "
          f"{rss_end:.1f} MB; state {len(json.dumps(state.to_dict()))} B (bound {bound} B)")
    assert rss_end - rss_warm < RSS_GROWTH_BOUND_MB


@pytest.fixture(scope="module")
def local_ray():
    start_ray_node(lambda: ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False))
    yield
    ray.shutdown()


def test_actor_soak_matches_the_reference_and_memory_stays_flat(local_ray):
    key = "soak/actor"
    cfg = parse_run({"hadw": {"state_key": key, "anchor": ANCHORS["default"]}}).hadw
    ref = ReferenceKalman(**ANCHORS["default"])
    actor, actor_pid, bound, rss = None, None, None, {}
    start = time.perf_counter()
    round_trips = 0
    for t, calls in soak_inputs(seed=2):
        for call, (k, n) in enumerate(calls):  # as the trainer does: calls of one step share its prior
            view = anchor_client.get_client(cfg, trainer_step=t).observe(k, n, t)
            round_trips += 1
            assert (view.step, view.prior, view.posterior, view.batch_acc, view.eta_t, view.sigma_t) == (
                t, *ref.observe(t, call, k, n)
            ), f"step {t} call {call}"
        if actor is None:
            actor = ray.get_actor(actor_name(key))
            actor_pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))
            assert actor_pid != os.getpid()
        if t == cfg.anchor.window + 2:
            bound = size_bound(anchor_client.state_dict(cfg))
        if t == WARMUP:
            ray.get(actor.__ray_call__.remote(lambda self: gc.collect()))
            rss["warm"] = rss_mb(), rss_mb(actor_pid)
    seconds = time.perf_counter() - start
    state = anchor_client.state_dict(cfg)
    check_bounded(state, cfg.anchor.window, bound)
    assert state["committed_steps"] == STEPS - 1 and state["open_step"] == STEPS
    assert anchor_client.get_client(cfg).recoveries == 0
    ray.get(actor.__ray_call__.remote(lambda self: gc.collect()))
    rss["end"] = rss_mb(), rss_mb(actor_pid)
    (driver_warm, actor_warm), (driver_end, actor_end) = rss["warm"], rss["end"]
    print(f"\n[soak actor] {STEPS} steps, {round_trips} round trips in {seconds:.1f} s "
          f"({seconds / round_trips * 1e3:.2f} ms each); driver RSS {driver_warm:.1f} -> {driver_end:.1f} MB, "
          f"actor RSS {actor_warm:.1f} -> {actor_end:.1f} MB; state {len(json.dumps(state))} B (bound {bound} B)")
    assert driver_end - driver_warm < RSS_GROWTH_BOUND_MB
    assert actor_end - actor_warm < RSS_GROWTH_BOUND_MB

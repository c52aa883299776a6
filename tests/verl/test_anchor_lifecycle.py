"""The anchor's life in one process: a fresh run never sees an earlier run's anchor (with or without Ray, the
same results either way); a foreign actor under the anchor's name, and Ray shut down or restarted between
calls, end in a recovery or an error naming the actor. Real Ray."""

import pytest
import ray
from batches import start_ray_node
from omegaconf import OmegaConf
from resume_cases import canonical, config, run
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.errors import AnchorActorError
from verl_hadw.verl import process_state
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.anchor_store.stores import LocalStore, RayStore, actor_name, wait_until_released
from verl_hadw.verl.config.run_options import parse_run

pytestmark = pytest.mark.slow  # real Ray: tens of seconds


def start_ray():
    """A new local Ray (each start costs seconds: the tests share one when they can)."""
    if not ray.is_initialized():
        start_ray_node(lambda: ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False))


@pytest.fixture(scope="module", autouse=True)
def _ray_down_afterwards():
    yield
    ray.shutdown()


def case(backend, tmp_path, steps=3):
    return {
        "id": backend, "backend": backend, "mode": "kalman", "difficulty_from": "accuracy", "base": "grpo",
        "rewards": "binary", "steps": steps, "split": 1, "calls": 2, "seed": 7, "eta": 3.0, "window": 3,
        "eta_min": 0.05, "init": "first_batch", "sigma_source": "anchor", "fixed_value": 0.5, "lambda_scale": 1.3,
        "normalize_phi": False, "temperature": 2.0, "ckpt": str(tmp_path / backend),
    }


def fit(c):
    """What each verl ``fit()`` does first (both trainers), then steps 1..N of the case: one whole run."""
    verl_like = {"skip": {}, "trainer": {"v1": {"trainer_mode": "sync"}}}  # what SkipManager.init reads
    SkipManager.init(OmegaConf.merge(config(c, resume=False), verl_like))
    return canonical(run(c, 1, c["steps"], save=False))


def test_a_foreign_actor_under_the_anchors_name_is_an_error_naming_it():
    start_ray()
    cfg = parse_run({"hadw": {"state_key": "taken"}}).hadw

    @ray.remote(num_cpus=0)
    class SomeoneElses:
        def ping(self):
            return "pong"

    squatter = SomeoneElses.options(name=actor_name("taken")).remote()
    with pytest.raises(AnchorActorError) as info:
        anchor_client.get_client(cfg, trainer_step=1).observe(3, 8, 1)
    message = str(info.value)
    assert f"the Ray actor '{actor_name('taken')}'" in message and "is not a verl-hadw anchor" in message
    assert "another algorithm.hadw.state_key" in message and "ray.kill" in message
    assert ray.get(squatter.ping.remote()) == "pong"  # left alone: it is not ours to end
    ray.kill(squatter)  # the way out named in the message
    process_state.reset()
    assert anchor_client.get_client(cfg, trainer_step=1).observe(3, 8, 1).posterior == 3 / 8


def drive(cfg, first, last, between=None):
    rows = []
    for t in range(first, last + 1):
        if between is not None and t == between[0]:
            between[1]()
        v = anchor_client.get_client(cfg, trainer_step=t).observe(1 + (5 * t) % 8, 8, t)
        rows.append((v.step, v.prior, v.posterior, v.batch_acc, v.eta_t, v.sigma_t))
    return rows


def test_ray_restarted_or_shut_down_between_calls_recovers_from_the_mirror():
    start_ray()
    cfg = parse_run({"hadw": {"state_key": "restart", "anchor": {"eta": 3.0, "window": 3}}}).hadw
    straight = drive(cfg, 1, 8)
    process_state.reset()

    def restart():
        ray.shutdown()
        start_ray()

    restarted = drive(cfg, 1, 8, between=(5, restart))
    client = anchor_client.get_client(cfg)
    assert restarted == straight and client.recoveries == 1
    assert ray.get_actor(actor_name("restart")) is not None  # rebuilt in the new session
    assert client.state_dict() == client.store.last_state()

    process_state.reset()
    shut_down = drive(cfg, 1, 8, between=(4, ray.shutdown))
    client = anchor_client.get_client(cfg)
    assert shut_down == straight and client.recoveries == 1  # continued in this process
    assert client.state_dict()["open_step"] == 8


def test_two_fresh_runs_in_one_process_give_identical_results_with_and_without_ray(tmp_path):
    """A sweep or a notebook: no reset between runs. The v1 trainer builds a new callback per run; the legacy
    trainer (and any estimator-only use) starts a new fit(). One-step runs leave no step to go back to: the
    fit() token alone must tell the second run from more calls of the first one's step 1."""
    results = {}
    for where in ("local", "ray"):  # the test before left Ray shut down
        if where == "ray":
            start_ray()
        else:
            ray.shutdown()
        for backend in ("v1", "legacy"):
            for steps in (3, 1):
                c = case(backend, tmp_path / where / str(steps), steps)
                first, second = fit(c), fit(c)
                client = anchor_client.get_client(parse_run({"hadw": {"state_key": f"case/{backend}",
                                                                       "anchor": {"eta": 3.0, "window": 3}}}).hadw)
                assert isinstance(client.store, RayStore if where == "ray" else LocalStore)
                assert second == first, f"{where} {backend} {steps}: the second run inherited the first's anchor"
                results[where, backend, steps] = first
    for backend in ("v1", "legacy"):
        for steps in (3, 1):
            assert results["ray", backend, steps] == results["local", backend, steps]


def test_a_store_built_while_the_earlier_actor_of_its_name_dies_gets_a_live_one():
    """A new run right after an earlier one's client was forgotten: Ray destroys the earlier actor once its last
    handle is gone, and until then ``get_if_exists`` may hand the dying actor back (CI met this once, in
    test_ray_restarted_or_shut_down_between_calls_recovers_from_the_mirror: ActorDiedError)."""
    start_ray()
    config = parse_run({"hadw": {"state_key": "dying"}}).hadw.anchor
    for round in range(5):  # the race is rare (1 round in ~40 under load); CI pays ~2 s a round
        old = RayStore("dying", config)
        old.observe(1, 0, 3.0, 8)
        del old  # its last handle: Ray now destroys the actor, and takes a moment to free the name
        new = RayStore("dying", config)  # a fresh anchor, whatever state the dying one held
        assert new.observe(1, 0, 5.0, 8).posterior == 5 / 8, round
        ray.kill(new.actor, no_restart=True)  # not del: polling a dropped actor's name holds it (get_actor: a handle)
        wait_until_released(actor_name("dying"))

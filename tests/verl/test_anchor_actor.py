"""The anchor in a named Ray actor: same maths as in-process, once per step, crash-proof, resumable."""

import json
import os
import random
import signal

import pytest
import ray
from anchor_run import batch, config, kill_actor, run
from batches import start_ray_node
from omegaconf import OmegaConf
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import ConfigError, MissingAnchorStateError
from verl_hadw.verl import metrics, process_state
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.anchor_store.stores import LocalStore, RayStore, actor_name
from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback
from verl_hadw.verl.config.run_options import parse_run

pytestmark = pytest.mark.slow  # Ray: tens of seconds

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def ray_cluster():
    start_ray_node(lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False))
    yield
    ray.shutdown()


def observations(n=20, seed=0):
    rng = random.Random(seed)
    steps = []
    for _ in range(n):
        calls = [(rng.randint(0, 16), 16) for _ in range(rng.randint(1, 4))]
        steps.append(calls)
    return steps


def drive(key, steps, kill_at=None, **anchor):
    """Run ``steps`` (lists of (correct, count) calls) through a client; returns one row per call."""
    cfg = parse_run({"hadw": {"state_key": key, "anchor": anchor}}).hadw
    client = anchor_client.get_client(cfg)
    rows = []
    for t, calls in enumerate(steps, start=1):
        for call, (k, n) in enumerate(calls):
            if kill_at == (t, call):
                kill_actor(actor_name(key))
            view = client.observe(k, n, trainer_step=t)
            rows.append((view.step, view.prior, view.posterior, view.batch_acc, view.eta_t, view.sigma_t))
    return rows, client


def test_actor_and_in_process_trajectories_are_identical(ray_cluster):
    steps = observations()
    remote, client = drive("actor-vs-local", steps)
    assert isinstance(client.store, RayStore)
    ray.shutdown()
    try:
        process_state.reset()
        local, client = drive("actor-vs-local", steps)
        assert isinstance(client.store, LocalStore)
    finally:
        start_ray_node(lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False))
    assert remote == local


@pytest.mark.parametrize("k", [1, 4])
def test_k_calls_per_step_advance_the_anchor_once_with_one_prior(ray_cluster, k):
    steps = [[(3 + t % 5, 16)] * k for t in range(12)]
    rows, client = drive(f"k{k}", steps, eta=3.0)
    by_step = {}
    for step, prior, *_ in rows:
        by_step.setdefault(step, set()).add(prior)
    assert all(len(p) == 1 for p in by_step.values()) and len(by_step) == 12
    state = client.store.state_dict()
    assert state["committed_steps"] == 11 and state["open_step"] == 12 and state["calls"] == list(range(k))
    single, _ = drive(f"k{k}-single", [[(c * k, n * k)] for (c, n), *_ in steps], eta=3.0)
    assert [r[:4] for r in rows[k - 1 :: k]] == [r[:4] for r in single]


def test_killed_actor_is_rebuilt_from_the_mirror_and_the_trajectory_is_unchanged(ray_cluster):
    steps = observations(seed=1)
    straight, _ = drive("no-kill", steps)
    killed, client = drive("kill", steps, kill_at=(9, 0))
    assert killed == straight and client.recoveries == 1


def test_actor_killed_by_a_signal_is_rebuilt_from_the_mirror(ray_cluster):
    """A crash (OOM killer, segfault) keeps the actor's name bound to the dead actor until it is killed: the
    rebuild must free it, or ``get_if_exists`` hands the dead actor back."""
    client = anchor_client.get_client(parse_run({"hadw": {"state_key": "sigkill"}}).hadw)
    client.observe(8, 16)
    actor = ray.get_actor(actor_name("sigkill"))
    os.kill(ray.get(actor.__ray_call__.remote(lambda self: os.getpid())), signal.SIGKILL)
    view = client.observe(12, 16)
    assert (view.step, view.prior, view.posterior) == (2, 0.5, 0.75) and client.recoveries == 1


def test_recoveries_reach_the_step_metrics(ray_cluster):
    cfg = OmegaConf.create({"adv_estimator": "hadw", "hadw": {"state_key": "metric-kill"}})
    SkipManager.set_step(1)
    compute_advantage(batch(1), "hadw", config=cfg)
    kill_actor(actor_name("metric-kill"))
    SkipManager.set_step(2)
    compute_advantage(batch(2), "hadw", config=cfg)
    assert metrics.pop(1)["hadw/actor_recoveries"] == 0 and metrics.pop(2)["hadw/actor_recoveries"] == 1


def test_two_state_keys_stay_independent(ray_cluster):
    a_alone, _ = drive("solo-a", observations(seed=2))
    process_state.reset()
    steps_a, steps_b = observations(seed=2), observations(seed=3)
    cfg_a = parse_run({"hadw": {"state_key": "exp/a"}}).hadw
    cfg_b = parse_run({"hadw": {"state_key": "exp/b"}}).hadw
    rows_a = []
    for t, (calls_a, calls_b) in enumerate(zip(steps_a, steps_b), start=1):
        for k, n in calls_a:
            v = anchor_client.get_client(cfg_a, trainer_step=t).observe(k, n, t)
            rows_a.append((v.step, v.prior, v.posterior, v.batch_acc, v.eta_t, v.sigma_t))
        for k, n in calls_b:
            anchor_client.get_client(cfg_b, trainer_step=t).observe(k, n, t)
    assert rows_a == a_alone
    assert ray.get_actor(actor_name("exp/a")) != ray.get_actor(actor_name("exp/b"))


def test_resume_without_anchor_file_is_an_error_unless_allowed(tmp_path):
    (tmp_path / "global_step_2" / "actor").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")
    with pytest.raises(MissingAnchorStateError, match=r"holds no HA-DW anchor.*allow_missing_state=true"):
        HadwCheckpointCallback(config(str(tmp_path), resume=True))
    callback = HadwCheckpointCallback(config(str(tmp_path), resume=True, extra_hadw={"allow_missing_state": True}))
    assert callback.restored_step is None
    SkipManager.set_step(3)
    compute_advantage(batch(3), "hadw", config=callback.config.algorithm)  # continues with a fresh anchor


def test_anchor_file_from_another_step_is_rejected(tmp_path):
    run(str(tmp_path), 1, 2, save=True, resume=False)
    os.rename(tmp_path / "global_step_2", tmp_path / "global_step_5")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("5")
    with pytest.raises(MissingAnchorStateError, match="belongs to step 2.*resumes from step 5"):
        HadwCheckpointCallback(config(str(tmp_path), resume=True))


def test_resumed_step_without_the_callback_fails_loudly(tmp_path):
    cfg = config(str(tmp_path), resume=False)
    SkipManager.set_step(4)  # a resumed trainer's first step, but nothing restored the anchor
    with pytest.raises(MissingAnchorStateError, match="legacy trainer.*allow_missing_state=true"):
        compute_advantage(batch(4), "hadw", config=cfg.algorithm)


@pytest.mark.parametrize(
    "override, message",
    [
        ({"algorithm": {"hadw": {"lamda_scale": 1.3}}}, "Did you mean 'algorithm.hadw.lambda_scale'"),
        ({"algorithm": {"dgpo": {"temperature": -1}}}, "algorithm.dgpo.temperature=-1.0 is out of range"),
        ({"algorithm": {"adv_estimator": "hadww"}}, "algorithm.adv_estimator='hadww' is not a registered estimator"),
        ({"trainer": {"resume_mode": "sometimes"}}, "trainer.resume_mode='sometimes' is not valid"),
    ],
)
def test_callback_construction_is_the_fail_fast_point(tmp_path, override, message):
    cfg = OmegaConf.merge(config(str(tmp_path), resume=True), override)
    with pytest.raises(ConfigError, match=message):
        HadwCheckpointCallback(cfg)


def test_dgpo_runs_need_no_anchor_and_record_their_options_only(tmp_path):
    cfg = OmegaConf.merge(config(str(tmp_path), resume=False), {"algorithm": {"adv_estimator": "dgpo"}})
    callback = HadwCheckpointCallback(cfg)
    callback.on_save(trainer=None, global_step=1, checkpoint_dir=str(tmp_path / "global_step_1"))
    saved = json.loads((tmp_path / "global_step_1" / STATE_FILE).read_text())
    assert saved["state"] is None and saved["options"]["algorithm.adv_estimator"] == "dgpo"  # no anchor

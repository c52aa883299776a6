"""The anchor on a multi-node Ray cluster (``ray.cluster_utils.Cluster``: several raylets on this machine).

test_anchor_actor.py covers one node: actor == in-process, K calls per step, ``ray.kill`` recovery, two
state_keys, resume in a fresh process. Here: losing the anchor's *node* mid-step, two driver jobs sharing a
namespace and a state_key, and the death of the node running verl's TaskRunner (the process that computes
advantages and owns the anchor) followed by a resume from the checkpoint file.

Run as a script (``python test_anchor_cluster.py driver ADDRESS INDEX BARRIER_DIR``) it is one of the
driver processes of the two-job test.
"""

import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import ray
from ray.cluster_utils import Cluster

HERE = os.path.dirname(os.path.abspath(__file__))
# script mode (no conftest.py): the helpers (anchor_run, helpers) is on PYTHONPATH, set by the ``cluster`` fixture
# for these drivers and the cluster's workers; under pytest conftest.py puts it on sys.path
from anchor_run import batch, config  # noqa: E402
from batches import algo, make_inputs, start_ray_node  # noqa: E402
from repo_paths import HELPERS  # noqa: E402

from verl_hadw.core.anchor import AnchorState  # noqa: E402
from verl_hadw.core.anchor.file_format import STATE_FILE  # noqa: E402
from verl_hadw.core.options import AnchorConfig  # noqa: E402
from verl_hadw.verl import metrics, process_state  # noqa: E402
from verl_hadw.verl.anchor_store import client as anchor_client  # noqa: E402
from verl_hadw.verl.anchor_store.stores import AnchorService, actor_name, wait_until_released  # noqa: E402
from verl_hadw.verl.config.run_options import parse_run  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster of several raylets

NAMESPACE = "verl-hadw-cluster-test"  # every driver joins it: names are the only thing keeping anchors apart
ANCHOR = {"eta": 3.0, "window": 4}
SHARED_KEY = "cluster/shared"
TIMEOUT = 300  # seconds for any single remote call or driver process on a loaded 2-core machine
ANCHOR_VALUES = ("hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t")


@pytest.fixture(scope="module")
def cluster():
    """A head node (the drivers' node) that later tests add worker nodes to; always shut down."""
    with pytest.MonkeyPatch.context() as mp:
        # Cluster() records its address in /tmp/ray/ray_current_cluster, where every ray.init() without an
        # address on this machine (other test runs) would join it; this cluster is reached by address only.
        mp.setattr(ray._private.utils, "write_ray_address", lambda *args, **kwargs: None)
        # workers import us, and the helpers we import
        mp.setenv("PYTHONPATH", os.pathsep.join([HERE, str(HELPERS), os.environ.get("PYTHONPATH", "")]))
        c = start_ray_node(lambda: Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "resources": {"head": 1}, "include_dashboard": False}))
        try:
            ray.init(address=c.address, namespace=NAMESPACE, log_to_driver=False)
            yield c
        finally:
            ray.shutdown()
            mp.setattr(ray._common.utils, "reset_ray_address", lambda *args, **kwargs: None)  # not ours to delete
            c.shutdown()


@pytest.fixture
def worker_node(cluster):
    """Adds worker nodes with custom resources; removes those the test left alive."""
    added = []

    def add(resource: str):
        node = start_ray_node(lambda: cluster.add_node(num_cpus=0, resources={resource: 1}))
        cluster.wait_for_nodes(timeout=TIMEOUT)
        added.append(node)
        return node

    yield add
    for node in added:
        if node in cluster.worker_nodes:
            cluster.remove_node(node)


def node_of(actor) -> str:
    return ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()), timeout=TIMEOUT)


def call_inputs(step: int, call: int):
    rng = np.random.default_rng(1000 * step + call)
    p = rng.uniform(0.05, 0.95, size=6)
    scores = (rng.random((6, 4)) < p[:, None]).astype(np.float32).reshape(-1)
    return make_inputs(scores, [f"{step}-{call}-{g}" for g in range(6) for _ in range(4)])


# ------------------------------------------------------------------------------ anchor's node is lost
def test_anchor_on_a_lost_node_is_rebuilt_from_the_drivers_mirror(cluster, worker_node):
    from verl.utils.skip.skip_manager import SkipManager

    from verl_hadw.verl.estimators import compute_hadw_outcome_advantage

    node = worker_node("anchor_node")
    key, straight_key = "cluster/node-loss", "cluster/node-loss-straight"
    cfg, straight_cfg = algo(state_key=key, anchor=ANCHOR), algo(state_key=straight_key, anchor=ANCHOR)
    hadw = parse_run(cfg).hadw
    # anchor.stores has no placement option (num_cpus=0, Ray picks the node). To put the anchor on another node
    # than the driver's, create the named actor there first: RayStore's get_if_exists adopts it.
    placed = (
        ray.remote(num_cpus=0, resources={"anchor_node": 0.01})(AnchorService)
        .options(name=actor_name(key))
        .remote(dataclasses.asdict(hadw.anchor), None)
    )
    assert node_of(placed) == node.node_id != ray.get_runtime_context().get_node_id()

    rows, straight, recoveries = [], [], []
    for t in range(1, 9):
        SkipManager.set_step(t)
        for call in range(3):  # verl's separate_async trainer: several estimator calls per step
            if (t, call) == (5, 1):
                cluster.remove_node(node)  # mid-step: the mirror holds step 5 with call 0 counted
            rewards, mask, index = call_inputs(t, call)
            compute_hadw_outcome_advantage(rewards, mask, index=index, config=cfg)
            logged = process_state.PROCESS.pending_metrics.peek(t)
            rows.append(tuple(logged[name] for name in ANCHOR_VALUES))
            recoveries.append(logged["hadw/actor_recoveries"])
            compute_hadw_outcome_advantage(rewards, mask, index=index, config=straight_cfg)
            straight.append(tuple(process_state.PROCESS.pending_metrics.peek(t)[name] for name in ANCHOR_VALUES))

    assert rows == straight  # every call's prior, posterior, y_t, eta_t, sigma_t, exactly
    assert anchor_client.state_dict(hadw) == anchor_client.state_dict(parse_run(straight_cfg).hadw)
    assert anchor_client.get_client(hadw).recoveries == 1
    assert recoveries == [0.0] * 13 + [1.0] * 11  # hadw/actor_recoveries from the call at (5, 1) on
    assert node_of(ray.get_actor(actor_name(key))) != node.node_id


# --------------------------------------------------------------------- two jobs, one key, one namespace
def driver_inputs(index: int) -> list[tuple[float, int]]:
    rng = np.random.default_rng(index)
    return [(float(rng.integers(0, 65)), 64) for _ in range(12)]


def meet(barrier: str, name: str, index: int) -> None:
    """Wait until both drivers have reached the point ``name``."""
    open(os.path.join(barrier, f"{name}-{index}"), "w").close()
    deadline = time.monotonic() + TIMEOUT
    while not all(os.path.exists(os.path.join(barrier, f"{name}-{i}")) for i in (0, 1)):
        assert time.monotonic() < deadline, f"the other driver never reached '{name}'"
        time.sleep(0.2)


def driver_main(address: str, index: int, barrier: str) -> None:
    """One training job: 12 steps of its own inputs; halfway it waits until the other job is halfway too."""
    ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
    cfg = parse_run({"hadw": {"state_key": SHARED_KEY, "anchor": ANCHOR}}).hadw
    rows, seen = [], None
    for t, (k, n) in enumerate(driver_inputs(index), start=1):
        if t == 7:
            meet(barrier, "halfway", index)
            seen = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                          if a["name"].endswith(f":{SHARED_KEY}") and a["namespace"] == NAMESPACE)
            meet(barrier, "listed", index)  # neither job ends before both have looked
        view = anchor_client.get_client(cfg).observe(k, n)  # outside a trainer each call is a step of its own
        rows.append([view.step, view.prior, view.posterior, view.batch_acc, view.eta_t, view.sigma_t])
    result = {"name": actor_name(SHARED_KEY), "job": ray.get_runtime_context().get_job_id(), "seen": seen,
              "rows": rows}
    print("RESULT " + json.dumps(result), flush=True)
    ray.shutdown()


def expected_rows(index: int) -> list[list[float]]:
    state, out = AnchorState(config=AnchorConfig(**ANCHOR)), []
    for t, (k, n) in enumerate(driver_inputs(index), start=1):
        v = state.observe(t, 0, k, n)
        out.append([v.step, v.prior, v.posterior, v.batch_acc, v.eta_t, v.sigma_t])
    return out


def test_two_driver_jobs_with_one_state_key_get_independent_anchors(cluster, tmp_path):
    procs = [
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "driver", cluster.address, str(i), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
        for i in (0, 1)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=2 * TIMEOUT)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(next(line[7:] for line in out.splitlines() if line.startswith("RESULT "))))
    first, second = results
    assert first["job"] != second["job"] and first["name"] != second["name"]
    for r in results:
        assert r["name"] == f"verl_hadw:anchor:{r['job']}:{SHARED_KEY}"
        assert r["seen"] == sorted([first["name"], second["name"]]), results  # both alive at once, one namespace
    assert first["rows"] == expected_rows(0) and second["rows"] == expected_rows(1)
    assert first["rows"] != second["rows"]


# ---------------------------------------------------------- the TaskRunner's node dies; resume from file
class TaskRunner:
    """Stands in for verl's TaskRunner actor: it computes advantages, so it creates and owns the anchor, and
    it builds the checkpoint callback (restore on start, save with verl's checkpoints)."""

    def __init__(self, ckpt_dir: str, resume: bool, key: str):
        from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback

        self.ckpt_dir = ckpt_dir
        self.cfg = config(ckpt_dir, resume, extra_hadw={"state_key": key})
        self.callback = HadwCheckpointCallback(self.cfg)

    def where(self) -> tuple[int, str]:
        return os.getpid(), ray.get_runtime_context().get_node_id()

    def step(self, t: int, save: bool = False) -> dict:
        from verl.trainer.ppo.ray_trainer import compute_advantage
        from verl.utils.skip.skip_manager import SkipManager

        SkipManager.set_step(t)
        compute_advantage(batch(t), "hadw", config=self.cfg.algorithm)
        if save:
            self.callback.on_save(
                trainer=None, global_step=t, checkpoint_dir=os.path.join(self.ckpt_dir, f"global_step_{t}")
            )
            with open(os.path.join(self.ckpt_dir, "latest_checkpointed_iteration.txt"), "w") as f:
                f.write(str(t))  # what verl writes after its own save
        return {"step": t, **metrics.pop(t)}

    def anchor(self) -> tuple[str, str, dict]:
        """The anchor actor's name, its node and its state."""
        hadw = parse_run(self.cfg.algorithm).hadw
        name = actor_name(hadw.state_key)
        return name, node_of(ray.get_actor(name)), anchor_client.state_dict(hadw)


Runner = ray.remote(num_cpus=0)(TaskRunner)


def test_taskrunner_node_death_ends_the_job_and_the_checkpoint_resumes_it_exactly(cluster, worker_node, tmp_path):
    key = "cluster/resume"
    straight = TaskRunner(str(tmp_path / "straight"), False, "cluster/straight")  # uninterrupted, in this driver
    expected = [straight.step(t) for t in range(1, 7)]
    expected_state = straight.anchor()[2]

    node = worker_node("runner_node")
    ckpt = str(tmp_path / "ckpt")
    runner = Runner.options(resources={"runner_node": 0.01}).remote(ckpt, False, key)
    pid, runner_node = ray.get(runner.where.remote(), timeout=TIMEOUT)
    assert runner_node == node.node_id != ray.get_runtime_context().get_node_id()
    first = [ray.get(runner.step.remote(t, save=t == 3), timeout=TIMEOUT) for t in range(1, 6)]
    name, anchor_node, _ = ray.get(runner.anchor.remote(), timeout=TIMEOUT)
    assert first == expected[:5]

    cluster.remove_node(node)  # steps 4-5 ran after the last checkpoint (step 3) and are lost with the node
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(runner.step.remote(6), timeout=TIMEOUT)  # verl's driver sees this and the job fails
    wait_until_released(name, timeout=TIMEOUT)  # the anchor died with its owner: nothing stale for a later job
    saved = json.loads((tmp_path / "ckpt" / "global_step_3" / STATE_FILE).read_text())
    assert saved["global_step"] == 3 and saved["state"]["open_step"] == 3 and saved["state_key"] == key

    resumed = Runner.options(resources={"head": 0.01}).remote(ckpt, True, key)  # a fresh process
    new_pid, new_node = ray.get(resumed.where.remote(), timeout=TIMEOUT)
    assert (new_pid, new_node) != (pid, runner_node)
    second = [ray.get(resumed.step.remote(t), timeout=TIMEOUT) for t in range(4, 7)]
    assert second == expected[3:]  # every logged anchor value of steps 4-6, exactly
    assert ray.get(resumed.anchor.remote(), timeout=TIMEOUT)[2] == expected_state
    print(f"\n[taskrunner node loss] anchor was on the {'runner' if anchor_node == runner_node else 'other'} node")
    ray.kill(resumed)


if __name__ == "__main__" and sys.argv[1:2] == ["driver"]:
    driver_main(sys.argv[2], int(sys.argv[3]), sys.argv[4])

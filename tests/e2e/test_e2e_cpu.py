"""End to end: verl's real ``python -m verl.trainer.main_ppo`` on CPU with the toy task (about 1 minute a run;
the async modes' in test_e2e_modes.py; the legacy trainer's, by hand, in by_hand_e2e.py).

Each run is the user's command (`verl_hadw.toy.launch` only sets verl's extension-point environment and
passes ``configs/cpu/demo.yaml``); assertions read verl's own console log lines. The first tests check,
without Ray, the pieces that make a CPU run deterministic.
"""

import json
import os
import random
import subprocess
import sys

import pytest
from launches import DEMO_RESUME_FROM, DEMO_RESUMED, DEMO_STEPS, HALF, RAY_STARTED

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.launch import stable_metrics

pytestmark = pytest.mark.slow

HADW_METRICS = [
    "hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t",
    "hadw/phi_mean", "hadw/phi_std", "hadw/phi_min", "hadw/phi_max", "hadw/frac_amplified", "hadw/actor_recoveries",
]
DGPO_METRICS = [
    "dgpo/valid_groups",
    "dgpo/zero_var_groups",
    "dgpo/valid_token_ratio",
    "dgpo/weight_min",
    "dgpo/weight_max",
]
ANCHOR = ["hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t"]


def test_sample_seeds_do_not_depend_on_arrival_order():
    from verl_hadw.cpu.rollout import SampleSeeds

    prompts = {"p": [1, 2, 3], "q": [4, 5], "r": [1, 2, 3, 0]}
    requests = [(name, f"uuid-{name}-{k}") for name in prompts for k in range(4)]  # rollout.n = 4, random ids

    def seeds_per_prompt(order, step):
        seeds = SampleSeeds()
        out = {name: [] for name in prompts}
        for name, request_id in order:
            out[name].append(seeds(request_id, prompts[name], step))
        return {name: sorted(values) for name, values in out.items()}

    reference = seeds_per_prompt(requests, step=3)
    for trial in range(20):
        shuffled = random.Random(trial).sample(requests, len(requests))
        assert seeds_per_prompt(shuffled, step=3) == reference
    assert all(len(set(values)) == 4 for values in reference.values())  # the copies of a prompt differ
    assert seeds_per_prompt(requests, step=4) != reference  # a new weight version draws anew
    # verl's legacy trainer under rollout.full_determinism: one det-<row> id per row, seeded per row
    legacy = SampleSeeds()
    by_row = {row: legacy(f"det-{row}", prompts["p"], 3) for row in (2, 0, 3, 1)}
    assert [SampleSeeds()(f"det-{row}", prompts["p"], 3) for row in range(4)] == [by_row[r] for r in range(4)]
    assert len(set(by_row.values())) == 4


def test_canonical_batch_order_ignores_finish_order():
    from verl_hadw.cpu.sampler import canonical_order

    rows = [  # (uid, prompt, response): two groups with the same prompt and different responses
        ("u1", (7, 8), (1,)), ("u1", (7, 8), (3,)), ("u2", (5,), (2,)), ("u2", (5,), (2,)),
        ("u3", (7, 8), (1,)), ("u3", (7, 8), (2,)), ("u2", (5,), (0,)),
    ]

    def ordered(batch):
        order = canonical_order(*map(list, zip(*batch)))
        assert sorted(order) == list(range(len(batch)))
        return [batch[i] for i in order]

    reference = ordered(rows)
    assert [r[1] for r in reference] == [(5,)] * 3 + [(7, 8)] * 4  # groups sorted by prompt, kept together
    assert [r[2] for r in reference[:3]] == [(0,), (2,), (2,)]  # rows by response
    assert [r[0] for r in reference[3:]] == ["u3", "u3", "u1", "u1"]  # equal prompts: by responses, not uid
    for trial in range(20):
        shuffled = random.Random(trial).sample(rows, len(rows))
        assert ordered(shuffled) == reference


def test_canonical_replay_buffer_reorders_keys_and_tags(monkeypatch):
    import torch
    import verl.trainer.ppo.v1.replay_buffer as verl_replay_buffer

    import verl_hadw.cpu.sampler as sampler

    content = {  # key -> (prompt, response); uid "b" sorts after "a" by prompt, rows by response
        "b_0_0": ([9, 9], [3]), "a_1_0": ([1], [7]), "b_1_0": ([9, 9], [2]), "a_0_0": ([1], [5]),
    }

    class FakeTransferQueue:
        cleared = []

        def kv_clear(self, partition_id, keys):
            self.cleared.append(list(keys))

        def kv_batch_get(self, keys, partition_id, select_fields):
            assert select_fields == ["prompts", "responses"]
            return {
                "prompts": [torch.tensor(content[k][0]) for k in keys],
                "responses": [torch.tensor(content[k][1]) for k in keys],
            }

    fake = FakeTransferQueue()
    monkeypatch.setattr(sampler, "tq", fake)
    monkeypatch.setattr(verl_replay_buffer, "tq", fake)
    buffer = sampler.CanonicalReplayBuffer("sync", {}, None, "drop", {})
    finish_order = {key: {"seq_len": i} for i, key in enumerate(content)}  # TransferQueue's listing order
    batch = buffer._materialize_batch("train", ["a", "b"], finish_order)
    assert batch.keys == ["a_0_0", "a_1_0", "b_1_0", "b_0_0"]
    assert [tag["seq_len"] for tag in batch.tags] == [3, 1, 2, 0]  # tags move with their keys
    assert fake.cleared == [["a", "b"]]  # verl's own bookkeeping still runs
    with pytest.raises(ValueError, match="sync"):
        sampler.CanonicalReplayBuffer("colocate_async", {}, None, "drop", {})


def test_the_demo_buffer_polls_at_the_configured_interval():
    """verl's 2 s poll rounded each demo step's rollouts (about 1.4 s) up to 2 s; the demo polls every 0.05 s."""
    from omegaconf import OmegaConf

    from verl_hadw.cpu import sampler
    from verl_hadw.toy.launch import config_dir

    assert sampler.CanonicalReplayBuffer("sync", {}, None, "drop", {}).poll_interval == 2.0  # verl's own default
    demo = OmegaConf.load(os.path.join(config_dir(), "demo.yaml")).trainer.v1.sampler.sampler_kwargs
    assert sampler.CanonicalReplayBuffer("sync", {}, None, "drop", demo).poll_interval == 0.05
    with pytest.raises(ValueError, match=r"sampler_kwargs\.poll_interval must be > 0"):
        sampler.CanonicalReplayBuffer("sync", {}, None, "drop", {"poll_interval": 0})
    with pytest.raises(ValueError, match=r"unknown keys \['pol_interval'\]"):
        sampler.CanonicalReplayBuffer("sync", {}, None, "drop", {"pol_interval": 0.1})


def test_pin_threads_fixes_the_thread_count_in_every_process(monkeypatch):
    import torch
    import transfer_queue.utils.common as tq_common

    from verl_hadw.cpu.platform import THREADS_ENV, pin_threads

    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # e.g. a user's shell, or Ray's per-actor CPU share
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(tq_common, "DEFAULT_TORCH_NUM_THREADS", 3)
    try:
        assert pin_threads() == 1
        assert torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == os.environ[THREADS_ENV] == "1"
        assert tq_common.DEFAULT_TORCH_NUM_THREADS == 1  # TransferQueue restores this after each transfer
        monkeypatch.setenv(THREADS_ENV, "2")
        assert pin_threads() == 2 and torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
    finally:
        torch.set_num_threads(before)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)


def test_pin_isa_gives_every_avx2_machine_the_same_kernels(monkeypatch):
    import torch

    from verl_hadw.cpu.platform import ISA_ENV, ISA_VARS, pin_isa

    for key in (ISA_ENV, *ISA_VARS):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(ISA_ENV, "native")
    assert pin_isa() == "native" and not any(key in os.environ for key in ISA_VARS)
    monkeypatch.setenv(ISA_ENV, "avx512")
    with pytest.raises(ValueError, match="avx2"):
        pin_isa()
    monkeypatch.delenv(ISA_ENV)
    if not torch.cpu._is_avx2_supported():
        assert pin_isa() == "native"
        return
    assert pin_isa() == "avx2"
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2" and os.environ["MKL_CBWR"] == "COMPATIBLE"


def test_the_cpu_module_registers_when_verls_modules_are_imported():
    """``verl_hadw.cpu`` (every process of a CPU run imports it with verl) registers the hfcpu rollout and the
    hfcpu_ray weight sync, and patches verl, when the verl module concerned is imported, not before: a process that
    never uses them does not import verl's rollout package or its engine workers."""
    probe = """
import sys, verl
print('lazy', not {'verl.workers.rollout', 'verl.checkpoint_engine', 'verl.workers.engine_workers',
                   'verl_hadw.cpu.rollout'} & set(sys.modules))
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.checkpoint_engine.base import CheckpointEngineRegistry
import verl.workers.engine_workers as engine_workers
import verl.utils.distributed as distributed
print('registered', _ROLLOUT_REGISTRY[('hfcpu', 'async')], CheckpointEngineRegistry.get('hfcpu_ray').__name__,
      RolloutReplicaRegistry.get('hfcpu').__name__)
print('patched', getattr(engine_workers.initialize_global_process_group_ray, 'verl_hadw_gloo', False),
      engine_workers.initialize_global_process_group_ray is distributed.initialize_global_process_group_ray)
"""
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "verl_hadw.cpu", "VERL_PLATFORM": "cpu"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["lazy", "True", "registered", "verl_hadw.cpu.rollout.HFCPUServerAdapter",
                           "RayMailboxCheckpointEngine", "HFCPUReplica", "patched", "True", "True"], out


MKL_PROBE = "import torch; torch.set_num_threads(1); torch.rand(64, 96) @ torch.rand(96, 80)"


def test_mkl_runs_the_pinned_branch_in_the_processes_a_run_starts(monkeypatch):
    """MKL reports the branch each call ran in (MKL_VERBOSE). A process started after ``pin_isa`` (a Ray worker)
    must run the pinned one on whatever x86 CPU runs the tests. With the former ``MKL_CBWR=AVX2`` it read
    ``CNR:AUTO`` on an AMD EPYC (MKL honours named-ISA branches on Intel CPUs only), and the demo left the
    Intel-made table at step 26."""
    import torch

    from verl_hadw.cpu.platform import ISA_ENV, ISA_VARS, pin_isa

    for key in (ISA_ENV, *ISA_VARS):
        monkeypatch.delenv(key, raising=False)

    def worker() -> str:  # inherits this process's environment, as Ray workers do
        env = {**os.environ, "MKL_VERBOSE": "1"}
        return subprocess.run([sys.executable, "-c", MKL_PROBE], env=env, capture_output=True, text=True).stdout

    assert "CNR:OFF" in worker()  # the control: unpinned, MKL picks its branch itself
    pinned = pin_isa()
    assert pinned == ("avx2" if torch.cpu._is_avx2_supported() else "native")
    out = worker()
    assert "SGEMM" in out and f"CNR:{'COMPATIBLE' if pinned == 'avx2' else 'OFF'}" in out, out


def assert_step_lines(steps, n, metrics):
    assert sorted(steps) == list(range(1, n + 1))
    nonzero_steps = 0
    for step, values in steps.items():
        missing = [m for m in metrics if m not in values]
        assert not missing, f"step {step} lacks {missing}"
        if values["critic/advantages/max"] > 0 or values["critic/advantages/min"] < 0:
            nonzero_steps += 1
            continue
        # All-zero advantages are right only when every group was degenerate (all correct or all wrong):
        # DGPO then counts no valid group, and HA-DW's Φ is λ for every response (D = 0).
        if "dgpo/valid_groups" in values:
            assert values["dgpo/valid_groups"] == 0, f"step {step}: valid groups but all-zero advantages"
        if "hadw/phi_max" in values:
            assert values["hadw/phi_max"] == values["hadw/phi_min"], f"step {step}: all-zero advantages"
    assert nonzero_steps >= 1


def test_v1_hadw(demo_run):
    """The demo's 30-step run: HA-DW's metrics on every step, the anchor carried from step to step, its file in
    both checkpoints."""
    steps = demo_run.steps
    assert_step_lines(steps, DEMO_STEPS, HADW_METRICS)
    for step in range(2, DEMO_STEPS + 1):
        assert steps[step]["hadw/anchor_prior"] == steps[step - 1]["hadw/anchor_posterior"], step  # Eq. 12
    for step in (DEMO_RESUME_FROM, DEMO_STEPS):
        assert (demo_run.out / "checkpoints" / f"global_step_{step}" / STATE_FILE).exists()
    assert steps[1]["training/rollout_probs_diff_max"] < 1e-2  # the hfcpu rollout samples the actor's weights


def test_v1_dgpo(colocate_dgpo_run):
    """DGPO alone through the v1 trainer (``algorithm.adv_estimator=dgpo``, the ``colocate_dgpo_run`` launch,
    tests/helpers/launches.py): its metrics on each step, no HA-DW metric, and the callback records the estimator in
    each checkpoint (a resume under hadw is refused). HA-DW over DGPO: the smoke launch (test_e2e_modes.py)."""
    run = colocate_dgpo_run
    assert_step_lines(run.steps, HALF, DGPO_METRICS)
    assert not any(k.startswith("hadw/") for values in run.steps.values() for k in values)
    saved = json.loads((run.out / f"global_step_{HALF}" / STATE_FILE).read_text())
    assert saved["state"] is None and saved["options"]["algorithm.adv_estimator"] == "dgpo"


def test_resume_continues_the_run_exactly(demo_run, demo_resumed_run):
    """Resumed from the demo's step-15 checkpoint, a run reproduces every metric of the demo's steps 16-18 bit for
    bit (not only the anchor): same rollouts, same batch order, same update. Timings and memory are left out."""
    resumed = demo_resumed_run.steps
    assert sorted(resumed) == list(range(DEMO_RESUME_FROM + 1, DEMO_RESUME_FROM + DEMO_RESUMED + 1))
    for step in resumed:
        expected = stable_metrics(demo_run.steps[step])
        assert set(ANCHOR) | {"actor/grad_norm", "critic/score/mean"} <= set(expected)
        assert stable_metrics(resumed[step]) == expected, step


def test_typo_fails_fast_naming_the_key(refused_run):
    run = refused_run
    assert run.code != 0
    assert "Unknown key 'algorithm.hadw.lamda_scale'. Did you mean 'algorithm.hadw.lambda_scale'?" in run.log
    assert "2 problems in the config:" in run.log  # and the dynamic-sampling refusal in the same start-up error
    assert "verl-hadw start-up check (hydra.callbacks.verl_hadw): ConfigError: " in run.log
    assert RAY_STARTED not in run.log and not run.steps and "Training Progress" not in run.log  # before Ray

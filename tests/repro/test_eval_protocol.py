"""The HA-DW evaluation protocol: what the digits of the paper's tables say (from the catalogue's numbers), that
the catalogue's "paper" protocol follows them, and that verl 0.9.1 really decodes greedy and sampled benchmarks
of one validation pass as the prepared files say (verl's own rollout-worker code, the sampling server stubbed).

docs/reproduce.md, "Evaluation protocol", has the tables these tests check."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from fractions import Fraction
from math import floor

import pytest
from repo_paths import FIXTURES

from verl_hadw.repro import catalogue as K

SIZES = {b: K.DATASETS[b].expected_rows for b in K.BENCHMARKS["hadw"]}
TOL = 0.05 + 1e-9  # a printed one-decimal value v fits k/N iff |100k/N - v| <= 0.05 (ties either way)


def fits(v: float, n: int) -> bool:
    k0 = round(v * n / 100)
    return any(0 <= k <= n and abs(100 * k / n - v) <= TOL for k in (k0 - 1, k0, k0 + 1))


def p_fit_under(n: int, s: int, ties: str) -> float:
    """P(an avg@s score m/(s n), m uniform, is printed as a value on the k/n grid); ties half-up or generous."""
    hits = 0
    for m in range(s * n + 1):
        t = Fraction(1000 * m, s * n)
        lo = floor(t)
        if t - lo == Fraction(1, 2):
            printed = [lo + 1] if ties == "up" else [lo, lo + 1]
        else:
            printed = [lo if t - lo < Fraction(1, 2) else lo + 1]
        hits += any(fits(p / 10, n) for p in printed)
    return hits / (s * n + 1)


def runs():
    """Distinct HA-DW runs of Tables 1, 2, 3, 7 (a row repeated across tables once): run -> (family, values)."""
    out = {}
    for table in K.TABLES:
        if table.paper == "hadw":
            for row in table.rows:
                family = "DAPO" if "_dapo" in row.run else "GSPO" if "_gspo" in row.run else "GRPO"
                out.setdefault(row.run, (family, dict(zip(K.BENCHMARKS["hadw"], row.paper))))
    return out


RUNS = runs()


def column(bench, families=("GRPO", "GSPO", "DAPO"), table1=False):
    return [v[bench] for run, (f, v) in RUNS.items() if f in families and (not table1 or run.startswith("hadw_t1_"))]


# ------------------------------------------------------------------------------------------------ digits
def test_the_catalogue_has_28_distinct_runs_with_consistent_averages():
    assert len(RUNS) == 28 and len([r for r in RUNS if r.startswith("hadw_t1_")]) == 18
    for table in K.TABLES:
        for row in table.rows:
            if table.paper == "hadw" and row.paper_avg is not None:  # AVG = rounded mean of the printed values
                assert abs(sum(row.paper) / 5 - row.paper_avg) <= TOL, (table.key, row.label)


def test_math500_and_minerva_are_one_sample_per_problem():
    t1 = column("math500", table1=True)
    assert len(t1) == 18 and all(abs(v * 5 - round(v * 5)) < 1e-6 for v in t1)  # multiples of 0.2 = k/500
    assert all(fits(v, 500) for v in column("math500"))
    assert all(fits(v, 272) for v in column("minerva"))
    # by chance under avg@4 sampling: even with ties always resolved in favour of the grid (MATH500: every
    # odd m is a tie), 28 of 28 on the grid is rare; Minerva has no ties on its grid
    assert p_fit_under(500, 4, "generous") ** 28 < 4e-4 and p_fit_under(500, 4, "up") ** 28 < 1e-8
    assert p_fit_under(272, 4, "generous") ** 28 < 2e-15


def test_amc23_is_greedy_for_dapo_and_sampled_avg16_otherwise():
    dapo, other = column("amc23", ("DAPO",)), column("amc23", ("GRPO", "GSPO"))
    assert len(dapo) == 6 and all(fits(v, 40) for v in dapo)  # multiples of 2.5
    assert p_fit_under(40, 16, "generous") ** 6 < 1e-7  # six on k/40 by chance under avg@16
    assert sum(fits(v, 40) for v in other) <= 1  # one sample per problem is impossible for 21 of 22
    assert [v for v in column("amc23") if not fits(v, 640)] == [66.5]  # all but one value fit avg@16 (k/640)


def test_aime25_is_sampled_avg16_for_every_family():
    assert all(fits(v, 480) for v in column("aime25"))
    for family in ("GRPO", "GSPO", "DAPO"):
        assert any(not fits(v, 30) for v in column("aime25", (family,))), family
    p_rand_480 = sum(fits(t / 10, 480) for t in range(1001)) / 1001
    assert p_rand_480 ** 28 < 2e-8  # 28 of 28 on k/480 by chance


def test_olympiadbench_is_sampled_with_an_unknown_count():
    values = column("olympiadbench")
    assert sum(not fits(v, 675) for v in values) == 10  # not one sample per problem
    assert all(fits(v, 1350) for v in values)  # any s >= 2 fits: the count cannot be read off the digits
    assert not any(all(fits(v, n) for v in values) for n in range(1, 752))  # no other problem count rescues it


def test_the_paper_protocol_is_what_the_digits_imply():
    """greedy (one sample) exactly where every value of a benchmark and method family is on the k/n grid."""
    for protocol, families in (("paper", ("GRPO", "GSPO")), ("paper_dapo", ("DAPO",))):
        settings = K.EVAL_PROTOCOLS["hadw"][protocol]
        for bench, n in SIZES.items():
            on_grid = all(fits(v, n) for v in column(bench, families))
            assert settings[bench].greedy is on_grid, (protocol, bench)
            if not on_grid and bench in ("aime25", "amc23"):
                assert settings[bench].samples == 16  # the paper's avg@16
    assert K.EVAL_PROTOCOLS["hadw"]["paper"]["olympiadbench"] == K.EvalSetting(4)  # CHOICE (count unknown)
    assert {s.tag for s in K.EVAL_PROTOCOLS["hadw"]["sampled"].values()} == {"avg4", "avg16"}


def test_samples_per_validation_pass():
    def per_pass(protocol):
        return sum(s.samples * SIZES[b] for b, s in K.EVAL_PROTOCOLS["hadw"][protocol].items())

    assert (per_pass("sampled"), per_pass("paper"), per_pass("paper_dapo")) == (6908, 4592, 3992)
    # the released scripts' protocol: one greedy sample per problem everywhere (docs/reproduce.md)
    assert per_pass("released") == 1517 and all(s.greedy for s in K.EVAL_PROTOCOLS["hadw"]["released"].values())


def test_greedy_means_one_sample():
    assert K.EvalSetting.from_tag("greedy") == K.EvalSetting(1, True)
    assert K.EvalSetting.from_tag("avg16").samples == 16 and K.EvalSetting(16).tag == "avg16"
    with pytest.raises(ValueError, match="greedy decoding takes exactly one sample"):
        K.EvalSetting(16, greedy=True)
    with pytest.raises(ValueError, match="unknown evaluation setting 'best16'"):
        K.EvalSetting.from_tag("best16")
    for paper, protocols in K.EVAL_PROTOCOLS.items():
        assert set(protocols[next(iter(protocols))]) == set(K.BENCHMARKS[paper])
        for protocol in protocols.values():
            assert all(s.samples == 1 for s in protocol.values() if s.greedy)


# ------------------------------------------------------------------------- verl: one pass, two decodings
@pytest.fixture(scope="module")
def hadw_validation_batch(tmp_path_factory):
    """A HA-DW DAPO run's validation data as verl's trainer builds it: the prepared fixture files of the
    composed config -> RLHFDataset -> collate_fn -> uid + TensorDict with validate=True (v1 ``_validate``)."""
    import uuid

    import numpy as np
    from omegaconf import OmegaConf
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from verl_hadw.repro import data
    from verl_hadw.repro.compose import compose_run

    fixtures = FIXTURES / "data"
    files = {"math500": "math500.jsonl", "aime25": "aime25.csv", "amc23": "amc23.jsonl",
             "minerva": "minerva.jsonl", "olympiadbench": "olympiadbench.jsonl"}
    out = tmp_path_factory.mktemp("data")
    data.prepare(out, ["hadw"], {k: str(fixtures / v) for k, v in files.items()}, only=list(files),
                 log=lambda *_: None)
    cfg = compose_run("hadw_t1_qwen3_4b_dapo", [f"paths.data={out}"])
    OmegaConf.resolve(cfg)
    dataset = RLHFDataset(list(cfg.data.val_files), tokenizer=None,
                          config=OmegaConf.create({"filter_overlong_prompts": False, "prompt_key": "prompt"}))
    batch_dict = collate_fn([dataset[i] for i in range(len(dataset))])
    batch_dict["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(dataset))], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", 5)
    tu.assign_non_tensor_data(batch, "validate", True)
    return cfg, batch, Counter(batch_dict["data_source"])


def test_verl_validation_decodes_greedy_rows_greedily_and_samples_the_rest(hadw_validation_batch, monkeypatch):
    """verl's v1 rollout worker (AgentLoopWorkerTQ.generate_sequences / _run_prompt, unmodified) on that batch:
    each prompt runs __rollout_n__ sessions of the agent loop its row names; the loop is instantiated as verl's
    AgentLoopWorker does (registry filled by actor_rollout_ref.model.external_lib); what reaches the sampling
    server is recorded. Greedy benchmarks: one request at temperature 0; sampled ones: k at val_kwargs."""
    import hydra
    from verl.experimental.agent_loop import agent_loop as verl_agent_loop
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.utils.import_utils import import_external_libs

    cfg, batch, prompts = hadw_validation_batch
    import_external_libs(cfg.actor_rollout_ref.model.external_lib)  # what HFModelConfig.__post_init__ does
    registry = verl_agent_loop._agent_loop_registry
    assert {K.GREEDY_AGENT, K.SAMPLED_AGENT} <= set(registry)

    server_requests = defaultdict(list)  # data_source -> sampling params sent to the server

    async def server_generate(self, sampling_params, **kwargs):  # SingleTurnAgentLoop.run's generate call
        server_requests[kwargs["data_source"]].append(dict(sampling_params))

    async def run_agent_loop(sampling_params, trajectory, *, agent_name, trace=False, **kwargs):
        # AgentLoopWorker._run_agent_loop: registry lookup by the row's agent_name, then loop.run(params, **kw)
        loop_cls = hydra.utils.get_class(registry[agent_name]["_target_"])
        await loop_cls.run(object.__new__(loop_cls), sampling_params, **kwargs)

    async def kv_put(**kwargs):
        return None

    monkeypatch.setattr(SingleTurnAgentLoop, "run", server_generate)
    monkeypatch.setattr(agent_loop_tq.tq, "async_kv_put", kv_put)
    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__

    class Worker:
        config = cfg
        background_tasks: set = set()
        _run_prompt = worker_cls._run_prompt
        _run_agent_loop = staticmethod(run_agent_loop)

    async def validate():
        worker = Worker()
        await worker_cls.generate_sequences(worker, batch)
        while worker.background_tasks:
            await asyncio.gather(*list(worker.background_tasks))

    asyncio.run(validate())
    val = cfg.actor_rollout_ref.rollout.val_kwargs
    assert val.temperature == 0.6 and val.top_p == 0.95
    expected = K.EVAL_PROTOCOLS["hadw"]["paper_dapo"]
    assert set(server_requests) == set(expected)
    for bench, setting in expected.items():
        requests = server_requests[bench]
        assert len(requests) == setting.samples * prompts[bench], bench
        want = (0, 1.0, -1) if setting.greedy else (val.temperature, val.top_p, val.top_k)
        assert {(r["temperature"], r["top_p"], r["top_k"]) for r in requests} == {want}, bench


def test_verl_source_still_has_the_hooks_the_protocol_uses():
    """The verl 0.9.1 lines docs/reproduce.md cites: per-prompt __rollout_n__ and agent_name, val_kwargs for the
    whole pass (do_sample unread, __do_sample__ skipped when validating), external_lib imported by the model
    config. A verl upgrade that moves them fails here, not on a GPU."""
    import inspect

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.workers.config.model import HFModelConfig

    worker = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__
    gen, run_prompt = inspect.getsource(worker.generate_sequences), inspect.getsource(worker._run_prompt)
    assert 'sampling_params["temperature"] = config.val_kwargs.temperature' in gen and "do_sample" not in gen
    assert 'if "agent_name" not in batch:' in gen
    assert 'prompt.pop("__rollout_n__"' in run_prompt
    assert 'if not trajectory["validate"] and not do_sample:' in run_prompt
    assert '"__rollout_n__", [self.config.actor_rollout_ref.rollout.val_kwargs.n]' in inspect.getsource(
        PPOTrainer._validate)
    assert "import_external_libs(self.external_lib)" in inspect.getsource(HFModelConfig.__post_init__)
    assert "omega_conf_to_dataclass(model_config)" in inspect.getsource(AgentLoopWorker.__init__)

"""The paper-reproduction configs: each composes over verl 0.9.1's ppo_trainer, passes the checks verl's
``main_ppo`` runs in the ``python -m`` process (verl's own ``main`` body, Ray and GPUs stubbed) and the plugin's
validation, quotes the catalogue's numbers, and differs from its baseline only where the paper does. The papers'
hyperparameters and switches: tests/repro/test_repro_settings.py; what a plan costs: tests/repro/test_repro_costs.py.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from batches import flat_config
from repro_runs import ROOT, RUN_FILES, composed_runs

from verl_hadw.core.errors import UnusedOptionsWarning
from verl_hadw.repro import catalogue as K
from verl_hadw.repro import compose as C

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Disabled critic as algorithm.adv_estimator != gae")]

EVAL_CASES = [("dgpo_t1_dgpo", "dgpo"), ("dgpo_t1_base", "dgpo"), ("hadw_t1_qwen3_4b_grpo_hadw", "hadw")]


@pytest.fixture(scope="module")
def composed():
    return composed_runs()


def test_run_files_are_exactly_the_catalogue():
    assert C.config_dir() == ROOT / "configs"
    assert set(RUN_FILES) == set(K.run_names()) | set(K.ALIASES)
    # the run counts: HA-DW Table 1 has 18 runs, 28 distinct trainings in all; DGPO 13 trainings + the base
    assert len([r for r in K.run_names("hadw") if r.startswith("hadw_t1_")]) == 18
    assert len(K.run_names("hadw")) == 28 and len(K.run_names("dgpo")) == 14
    plan = K.plan("dgpo")
    assert plan[0] == ("eval", "dgpo_t1_base") and ("train", "dgpo_t1_base") not in plan
    assert all(("eval", r) in plan and plan.index(("train", r)) < plan.index(("eval", r))
               for r in K.run_names("dgpo") if r not in K.EVAL_ONLY)
    assert [a for a, _ in K.plan("hadw")] == ["train"] * 28


@pytest.mark.parametrize("run", RUN_FILES)
def test_yaml_comment_quotes_the_catalogue(run):
    """The 'Paper:' line of each run file states the catalogue's numbers (one source of truth)."""
    text = (ROOT / "configs" / K.paper_of(run) / "experiments" / f"{run}.yaml").read_text()
    rows = [(t, r) for t in K.TABLES for r in t.rows if r.run == K.ALIASES.get(run, run)]
    assert rows, run
    table, row = rows[0]
    quoted = re.search(r"^# Paper: (.*)$", text, re.M)
    if not row.paper and row.paper_avg is None:
        assert quoted is None
        return
    numbers = [float(x) for x in re.findall(r"(?<![\w.])(\d+\.\d+|\d+)(?![\w.])", quoted.group(1))]
    expected = [v for v in row.paper if v is not None] + ([row.paper_avg] if row.paper_avg is not None else [])
    # "MATH500"/"AIME25"/... contain digits but are words; only the values are matched
    assert numbers == expected


@pytest.mark.parametrize("run", RUN_FILES)
def test_run_passes_verl_main_ppo_checks_and_plugin(run, composed, capsys):
    cfg = composed[run].copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = C.validate_like_main_ppo(cfg)
    # A shipped run sets nothing its estimator ignores, except the DAPO layers' accuracy threshold: the DAPO
    # baselines share it with their HA-DW / DGPO runs (signed or composite rewards), so the baseline is told.
    unused = [str(w.message) for w in caught if issubclass(w.category, UnusedOptionsWarning)]
    expected = {"hadw": "algorithm.hadw.success_threshold", "dgpo": "algorithm.dgpo.success_threshold"}
    baseline_dapo = run.endswith("_dapo") and cfg.algorithm.adv_estimator == "grpo"
    assert [m.split(" is set")[0] for m in unused] == ([expected[K.paper_of(run)]] if baseline_dapo else [])
    out = capsys.readouterr().out
    assert "[validate_config] All configuration checks passed successfully!" in out
    resolved = record["resolved"]
    assert record["trainer_cls"] == "PPOTrainerSync"
    assert record["estimator"] == resolved.algorithm.adv_estimator
    assert "${" not in str(record["ray_init"])  # what ray.init receives is fully literal
    assert resolved.trainer.checkpoint_callback_class == "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"
    assert resolved.algorithm.hadw.state_key == f"{resolved.trainer.project_name}/{resolved.trainer.experiment_name}"
    assert resolved.trainer.experiment_name == K.ALIASES.get(run, run)
    assert resolved.trainer.project_name == K.paper_of(run)
    assert resolved.trainer.default_local_dir == f"{resolved.paths.run_dir}/checkpoints"
    assert resolved.reward.custom_reward_function.path == "pkg://verl_hadw.repro.reward"


@pytest.mark.parametrize("run,paper", EVAL_CASES)
def test_eval_layer_composes_and_validates(run, paper, capsys):
    cfg = C.compose_run(run, [f"eval={paper}", "paths.data=/d"], fast=False)
    resolved = C.validate_like_main_ppo(cfg, deep=True)["resolved"]
    capsys.readouterr()
    assert resolved.trainer.val_only is True and resolved.trainer.resume_mode == "auto"
    # only the weights are read: the optimizer state may have been pruned after DONE (VERL_HADW_KEEP=final)
    assert list(resolved.actor_rollout_ref.actor.checkpoint.load_contents) == ["model"]
    stems = [Path(f).name.removesuffix(".parquet") for f in resolved.data.val_files]
    if paper == "dgpo":
        # all six benchmarks at avg@32 / avg@4; prompt + completion = 4096 = Qwen2.5-Math-7B's context
        assert stems == [f"{b}.{s.tag}" for b, s in K.EVAL_PROTOCOLS["dgpo"]["paper"].items()]
        assert resolved.data.max_prompt_length + resolved.data.max_response_length == 4096
        assert resolved.actor_rollout_ref.rollout.response_length == 3072
    else:
        assert stems == [f"{b}.{s.tag}" for b, s in K.EVAL_PROTOCOLS["hadw"]["paper"].items()]


def test_validation_catches_a_broken_override():
    """The same checks reject what verl would reject: they are not vacuous."""
    with pytest.raises(Exception, match="Invalid loss_agg_mode"):
        C.validate_like_main_ppo(C.compose_run("hadw_t1_qwen3_4b_grpo", ["actor_rollout_ref.actor.loss_agg_mode=mean"]))
    with pytest.raises(Exception, match="lamda_scale"):
        C.validate_like_main_ppo(C.compose_run("hadw_t1_qwen3_4b_grpo_hadw", ["+algorithm.hadw.lamda_scale=2"]))


PAIRS = [
    # (run, its baseline, the keys the paper changes besides trainer.experiment_name)
    *[(f"hadw_t1_{m}_{meth}_hadw", f"hadw_t1_{m}_{meth}",
       {"algorithm.adv_estimator", "algorithm.hadw.lambda_scale", "algorithm.hadw.base", "algorithm.hadw.anchor.mode",
        "algorithm.hadw.anchor.eta", "algorithm.hadw.anchor.window"})
      for m in ("qwen3_4b", "qwen3_8b", "llama3_3b") for meth in ("grpo", "gspo", "dapo")],
    *[(f"hadw_t2_fixed_anchor_{v}", "hadw_t1_qwen3_4b_grpo_hadw",
       {"algorithm.hadw.anchor.mode", "algorithm.hadw.anchor.fixed_value"}) for v in ("04", "05", "06")],
    ("hadw_t3_qwen3_4b_grpo_g16", "hadw_t1_qwen3_4b_grpo", {"actor_rollout_ref.rollout.n"}),
    *[(f"hadw_t7_lambda_{v}", "hadw_t1_qwen3_4b_grpo_hadw", {"algorithm.hadw.lambda_scale"})
      for v in ("05", "08", "10", "15", "17", "20")],
    ("hadw_t7_lambda_13", "hadw_t1_qwen3_4b_grpo_hadw", set()),
    *[(f"hadw_t1_{m}_{meth}", f"hadw_t1_qwen3_4b_{meth}", {"actor_rollout_ref.model.path"})
      for m in ("qwen3_8b", "llama3_3b") for meth in ("grpo", "gspo", "dapo")],
    ("dgpo_t1_dgpo", "dgpo_t1_grpo", {"algorithm.adv_estimator", "algorithm.dgpo.dgae", "algorithm.dgpo.dqw",
                                      "algorithm.dgpo.temperature", "algorithm.dgpo.valid_token_norm"}),
    ("dgpo_t1_base", "dgpo_t1_grpo", set()),
    ("dgpo_t3_vtn_only", "dgpo_t1_dgpo", {"algorithm.dgpo.dgae", "algorithm.dgpo.dqw"}),
    ("dgpo_t3_vtn_dgae", "dgpo_t1_dgpo", {"algorithm.dgpo.dqw"}),
    *[(f"dgpo_t3_temp_{t}", "dgpo_t1_dgpo", {"algorithm.dgpo.temperature"}) for t in ("1", "5", "10")],
    *[(f"dgpo_t4_{m}_dgpo", f"dgpo_t4_{m}", {"algorithm.adv_estimator", "algorithm.dgpo.dgae", "algorithm.dgpo.dqw",
                                              "algorithm.dgpo.temperature", "algorithm.dgpo.valid_token_norm"})
      for m in ("gpg", "dapo", "gspo")],
]


@pytest.mark.parametrize("run,baseline,changed", PAIRS, ids=[p[0] for p in PAIRS])
def test_run_differs_from_its_baseline_only_where_the_paper_does(run, baseline, changed, composed):
    a, b = flat_config(composed[run]), flat_config(composed[baseline])
    differing = {k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>")}
    expected = set(changed)
    if K.ALIASES.get(run, run) != baseline:
        expected.add("trainer.experiment_name")
    assert differing == expected


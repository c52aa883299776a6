"""The paper-reproduction configs: each composes over verl 0.9.1's ppo_trainer, passes the checks verl's
``main_ppo`` runs in the ``python -m`` process (verl's own ``main`` body, Ray and GPUs stubbed) and the plugin's
validation, matches the papers' hyperparameters, and differs from its baseline only where the paper does.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from helpers import flat_config
from omegaconf import OmegaConf

from verl_hadw.errors import UnusedOptionsWarning
from verl_hadw.repro import catalogue as K
from verl_hadw.repro import compose as C

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Disabled critic as algorithm.adv_estimator != gae")]

ROOT = Path(__file__).resolve().parents[1]
# the released-code runs (K.RELEASED_CODE_RUNS) are no paper rows: tests/test_released_variant.py checks them
RUN_FILES = sorted(
    p.stem for p in (ROOT / "configs").glob("*/experiments/*.yaml") if p.stem not in K.RELEASED_CODE_RUNS
)
EVAL_CASES = [("dgpo_t1_dgpo", "dgpo"), ("dgpo_t1_base", "dgpo"), ("hadw_t1_qwen3_4b_grpo_hadw", "hadw")]


@pytest.fixture(scope="module")
def composed():
    """Every run composed once (through the run files' own pkg://verl.trainer.config search path)."""
    return {run: C.compose_run(run, fast=False) for run in RUN_FILES}


# ------------------------------------------------------------------------------------------- catalogue
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


# ------------------------------------------------------------------------------------- verl validation
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
    assert resolved.trainer.checkpoint_callback_class == "verl_hadw.callback.HadwCheckpointCallback"
    assert resolved.algorithm.hadw.state_key == f"{resolved.trainer.project_name}/{resolved.trainer.experiment_name}"
    assert resolved.trainer.experiment_name == K.ALIASES.get(run, run)
    assert resolved.trainer.project_name == K.paper_of(run)
    assert resolved.trainer.default_local_dir == f"{resolved.paths.run_dir}/checkpoints"
    assert resolved.reward.custom_reward_function.path == "pkg://verl_hadw.reward"


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


# ------------------------------------------------------------------------------------ paper settings
def _expect(run: str) -> dict:
    """Hyperparameters each run must have (HA-DW Table 8 / §3; DGPO Table 9, §4.1, App. G)."""
    exp = {}
    if run.startswith("hadw_"):
        exp.update({"data.train_batch_size": 256, "actor_rollout_ref.actor.ppo_mini_batch_size": 16,
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 4,
                    "actor_rollout_ref.actor.use_dynamic_bsz": True, "actor_rollout_ref.rollout.n": 8,
                    "data.max_prompt_length": 1024, "data.max_response_length": 4096,
                    "actor_rollout_ref.actor.optim.lr": 1e-6, "actor_rollout_ref.actor.optim.lr_warmup_steps": 10,
                    "actor_rollout_ref.actor.optim.weight_decay": 0.1, "actor_rollout_ref.actor.grad_clip": 1.0,
                    "actor_rollout_ref.actor.use_kl_loss": False, "algorithm.use_kl_in_reward": False,
                    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1, "trainer.test_freq": 5,
                    "trainer.nnodes": 1, "trainer.n_gpus_per_node": 8, "algorithm.filter_groups.enable": False,
                    "trainer.total_epochs": 3})
        method = "dapo" if "_dapo" in run else "gspo" if "_gspo" in run else "grpo"
        exp.update({
            "grpo": {"actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla",
                     "actor_rollout_ref.actor.clip_ratio_low": 0.2, "actor_rollout_ref.actor.clip_ratio_high": 0.2,
                     "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean"},
            "gspo": {"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo",
                     "actor_rollout_ref.actor.clip_ratio_low": 3e-4, "actor_rollout_ref.actor.clip_ratio_high": 4e-4,
                     "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean"},
            "dapo": {"actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla",
                     "actor_rollout_ref.actor.clip_ratio_low": 0.2, "actor_rollout_ref.actor.clip_ratio_high": 0.28,
                     "actor_rollout_ref.actor.loss_agg_mode": "token-mean", "trainer.total_epochs": 9,
                     "reward.reward_manager.name": "dapo", "reward.custom_reward_function.reward_kwargs.signed": True,
                     "reward.reward_kwargs.overlong_buffer_cfg.enable": True, "reward.reward_kwargs.max_resp_len": 4096,
                     "algorithm.hadw.success_threshold": -0.5},
        }[method])
        model = {"qwen3_4b": "Qwen/Qwen3-4B-Base", "qwen3_8b": "Qwen/Qwen3-8B-Base",
                 "llama3_3b": "meta-llama/Llama-3.2-3B-Instruct"}
        exp["actor_rollout_ref.model.path"] = next(v for k, v in model.items() if k in run) if "_t1_" in run \
            else "Qwen/Qwen3-4B-Base"
        hadw = run.endswith("_hadw") or run.startswith(("hadw_t2", "hadw_t7"))
        exp["algorithm.adv_estimator"] = "hadw" if hadw else "grpo"
        if hadw:
            lam = {"05": 0.5, "08": 0.8, "10": 1.0, "13": 1.3, "15": 1.5, "17": 1.7, "20": 2.0}
            exp["algorithm.hadw.lambda_scale"] = lam[run[-2:]] if run.startswith("hadw_t7") else 1.3
            fixed = run.startswith("hadw_t2")
            exp["algorithm.hadw.anchor.mode"] = "fixed" if fixed else "kalman"
            if fixed:
                exp["algorithm.hadw.anchor.fixed_value"] = int(run[-2:]) / 10
        if run == "hadw_t3_qwen3_4b_grpo_g16":
            exp["actor_rollout_ref.rollout.n"] = 16
        # sampled evaluation rows: temperature 0.6 / top-p 0.95 (CHOICE); greedy rows: the greedy agent loop
        exp.update({"actor_rollout_ref.rollout.val_kwargs.temperature": 0.6,
                    "actor_rollout_ref.rollout.val_kwargs.top_p": 0.95, "evaluation.protocol": "paper",
                    "actor_rollout_ref.model.external_lib": "verl_hadw.repro.eval_agent"})
    else:
        exp.update({"data.train_batch_size": 32, "actor_rollout_ref.actor.ppo_mini_batch_size": 32,
                    "actor_rollout_ref.rollout.n": 8, "data.max_prompt_length": 512, "data.max_response_length": 1024,
                    "actor_rollout_ref.actor.optim.lr": 5e-7, "actor_rollout_ref.actor.optim.lr_warmup_steps": 0,
                    "trainer.total_epochs": 1, "trainer.total_training_steps": 230,
                    "actor_rollout_ref.actor.use_kl_loss": False, "actor_rollout_ref.rollout.temperature": 1.0,
                    "actor_rollout_ref.rollout.val_kwargs.temperature": 0.6,
                    "actor_rollout_ref.rollout.val_kwargs.top_p": 0.95, "algorithm.filter_groups.enable": False,
                    "actor_rollout_ref.model.path": "Qwen/Qwen2.5-Math-7B",
                    "reward.custom_reward_function.reward_kwargs.backend": "math_verify"})
        method = next((m for m in ("gpg", "dapo", "gspo") if f"_{m}" in run), "grpo")
        exp["actor_rollout_ref.actor.policy_loss.loss_mode"] = {"gpg": "gpg", "gspo": "gspo"}.get(method, "vanilla")
        exp["actor_rollout_ref.actor.clip_ratio_high"] = {"dapo": 0.28, "gspo": 4e-4}.get(method, 0.2)
        exp["actor_rollout_ref.actor.loss_agg_mode"] = "seq-mean-token-mean" if method == "gspo" else "token-mean"
        dgpo = run.endswith("_dgpo") or run.startswith("dgpo_t3")
        exp["algorithm.adv_estimator"] = "dgpo" if dgpo else ("gpg" if method == "gpg" else "grpo")
        if dgpo:
            temps = {"dgpo_t3_temp_1": 1.0, "dgpo_t3_temp_5": 5.0, "dgpo_t3_temp_10": 10.0}
            exp["algorithm.dgpo.temperature"] = temps.get(run, 2.0)
            exp["algorithm.dgpo.dgae"] = run != "dgpo_t3_vtn_only"
            exp["algorithm.dgpo.dqw"] = run not in ("dgpo_t3_vtn_only", "dgpo_t3_vtn_dgae")
            exp["algorithm.dgpo.valid_token_norm"] = True
        if method == "dapo":
            exp.update({"reward.reward_manager.name": "dapo", "algorithm.dgpo.success_threshold": 0.0,
                        "reward.custom_reward_function.reward_kwargs.signed": False})
    return exp


@pytest.mark.parametrize("run", RUN_FILES)
def test_paper_hyperparameters(run, composed):
    cfg = composed[run]
    for key, value in _expect(run).items():
        got = OmegaConf.select(cfg, key)
        assert got == pytest.approx(value) if isinstance(value, float) else got == value, (run, key, got, value)
    if OmegaConf.select(cfg, "algorithm.adv_estimator") == "dgpo":
        # the valid-token averaging is exact only with one optimiser mini-batch per step
        assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == cfg.data.train_batch_size


def _val_stems(cfg) -> list[str]:
    return [Path(str(f)).name.removesuffix(".parquet") for f in cfg.data.val_files]


@pytest.mark.parametrize("run", [r for r in RUN_FILES if r.startswith("hadw_")])
def test_hadw_validation_follows_the_evaluation_protocol(run, composed):
    """The paper protocol by method family (DAPO scores AMC23 greedily), the switch to the sampled one, and the
    verl knobs the protocol relies on."""
    cfg = composed[run]
    protocol = "paper_dapo" if "_dapo" in run else "paper"
    assert _val_stems(cfg) == [f"{b}.{s.tag}" for b, s in K.EVAL_PROTOCOLS["hadw"][protocol].items()]
    assert {f"{b}.{s.tag}" for b, s in K.EVAL_PROTOCOLS["hadw"][protocol].items()} <= set(K.eval_files("hadw"))
    assert cfg.actor_rollout_ref.rollout.val_kwargs.temperature > 0  # the sampled rows really sample
    if run in ("hadw_t1_qwen3_4b_grpo", "hadw_t1_llama3_3b_dapo_hadw"):
        sampled = C.compose_run(run, ["evaluation.protocol=sampled"])
        assert _val_stems(sampled) == [f"{b}.{s.tag}" for b, s in K.EVAL_PROTOCOLS["hadw"]["sampled"].items()]
        with pytest.raises(Exception, match="greedy"):
            OmegaConf.to_container(C.compose_run(run, ["evaluation.protocol=greedy"]).data, resolve=True)


# ------------------------------------------------------------------------ paper vs released-script switches
@pytest.mark.parametrize("run", ["hadw_t1_qwen3_4b_gspo", "hadw_t1_llama3_3b_gspo_hadw"])
def test_gspo_clip_switch(run, capsys):
    """gspo.clip: Table 8's 3e-4 / 4e-4 by default, the released gspo_hadw.sh's (the fork's defaults 0.2 / 0.2,
    dual-clip 3) on request; both pass verl's checks. docs/reproduce.md, "GSPO clip range"."""
    actor = C.compose_run(run).actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (3e-4, 4e-4, 10.0)
    released = C.compose_run(run, ["gspo.clip=released"], fast=False)
    resolved = C.validate_like_main_ppo(released)["resolved"]
    assert "All configuration checks passed" in capsys.readouterr().out
    actor = resolved.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.2, 3.0)
    with pytest.raises(Exception, match="scripts"):
        OmegaConf.to_container(C.compose_run(run, ["gspo.clip=scripts"]).actor_rollout_ref.actor, resolve=True)


@pytest.mark.parametrize("run", ["hadw_t1_qwen3_4b_grpo", "hadw_t1_qwen3_8b_gspo_hadw", "hadw_t1_llama3_3b_dapo",
                                 "hadw_released_qwen3_4b_grpo"])
def test_released_evaluation_protocol_switch(run):
    """evaluation.protocol=released: every benchmark one greedy sample (the released scripts' greedy validation),
    for GRPO, GSPO and DAPO runs alike; the paper's protocol stays the default."""
    default = C.compose_run(run)
    assert default.evaluation.protocol == "paper"
    released = C.compose_run(run, ["evaluation.protocol=released"])
    assert _val_stems(released) == [f"{b}.greedy" for b in K.BENCHMARKS["hadw"]]
    assert _val_stems(released) == [f"{b}.{s.tag}" for b, s in K.EVAL_PROTOCOLS["hadw"]["released"].items()]
    assert set(_val_stems(released)) <= set(K.eval_files("hadw"))  # `verl-hadw data` writes these files


def test_verl_defaults_are_what_the_released_gspo_script_ran_with():
    """The released switch's numbers are verl's own actor defaults (the fork's, unchanged in 0.9.1)."""
    import verl

    actor = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "actor" / "actor.yaml")
    gspo = OmegaConf.load(ROOT / "configs" / "hadw" / "method" / "gspo.yaml")
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == tuple(
        gspo.gspo.released[k] for k in ("low", "high", "c"))


def test_signed_dapo_threshold_separates_correct_from_wrong(composed):
    """HA-DW+DAPO: correct answers score 1 + penalty, wrong ones -1 + penalty, penalty in [-factor, 0]."""
    cfg = composed["hadw_t1_qwen3_4b_dapo_hadw"]
    factor = cfg.reward.reward_kwargs.overlong_buffer_cfg.penalty_factor
    threshold = cfg.algorithm.hadw.success_threshold
    lowest_correct, highest_wrong = 1.0 - factor, -1.0
    assert highest_wrong < threshold < lowest_correct


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


# ------------------------------------------------------------------------------------------ plan costs
def test_run_cost_from_the_composed_config(composed):
    """Each figure recomputed here from the paper's settings (steps from epochs, verl's test cadence, avg@k x
    benchmark sizes, 12 bytes per parameter for a checkpoint with AdamW state)."""
    from verl_hadw.repro.costs import run_cost

    hadw_pass = {"paper": 500 + 16 * 30 + 16 * 40 + 272 + 4 * 675, "paper_dapo": 500 + 16 * 30 + 40 + 272 + 4 * 675,
                 "sampled": 4 * 500 + 16 * 30 + 16 * 40 + 4 * 272 + 4 * 675}
    assert hadw_pass == {"paper": 4592, "paper_dapo": 3992, "sampled": 6908}
    grpo = run_cost(composed["hadw_t1_qwen3_4b_grpo"], "train", "hadw_t1_qwen3_4b_grpo")
    assert (grpo.steps, grpo.train_samples) == (3 * (7500 // 256), 87 * 256 * 8) == (87, 178_176)
    assert (grpo.val_passes, grpo.val_per_pass, grpo.val_greedy_per_pass) == (1 + 17 + 1, 4592, 772)
    assert grpo.ckpt_each == 12 * 4.02e9 and grpo.ckpt_peak == 2 * grpo.ckpt_each and grpo.save_freq == 10
    assert grpo.ckpt_after == 4 * 4.02e9  # VERL_HADW_KEEP=final: the last weights
    dapo = run_cost(composed["hadw_t1_qwen3_8b_dapo"], "train", "hadw_t1_qwen3_8b_dapo", keep="all")
    assert (dapo.steps, dapo.val_passes, dapo.val_per_pass) == (261, 1 + 52 + 1, 3992)
    assert dapo.ckpt_after == dapo.ckpt_peak == 2 * 12 * 8.19e9
    g16 = run_cost(composed["hadw_t3_qwen3_4b_grpo_g16"], "train", "hadw_t3_qwen3_4b_grpo_g16", keep=1)
    assert g16.train_samples == 2 * grpo.train_samples and g16.ckpt_after == g16.ckpt_each
    old = run_cost(C.compose_run("hadw_t1_qwen3_4b_grpo", ["evaluation.protocol=sampled"]), "train", "x")
    assert old.val_samples == 19 * 6908 and old.gpu_hours > grpo.gpu_hours
    dgpo = run_cost(composed["dgpo_t1_dgpo"], "train", "dgpo_t1_dgpo")
    assert (dgpo.steps, dgpo.train_samples, dgpo.val_passes, dgpo.val_per_pass) == (230, 230 * 32 * 8, 24, 4 * 500)
    final = run_cost(C.compose_run("dgpo_t1_dgpo", ["eval=dgpo"]), "eval", "dgpo_t1_dgpo")
    assert (final.steps, final.train_samples, final.val_passes) == (0, 0, 1)
    assert final.val_per_pass == 32 * (30 + 30 + 40) + 4 * (500 + 272 + 675) and final.ckpt_after == 0


def test_plan_costs_cli_keeps_the_launcher_format(capsys):
    from verl_hadw import cli

    assert cli.main(["configs", "--plan", "dgpo", "--only", "dgpo_t1_*"]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert plain == ["eval dgpo_t1_base", "train dgpo_t1_grpo", "eval dgpo_t1_grpo", "train dgpo_t1_dgpo",
                     "eval dgpo_t1_dgpo"]  # what scripts/reproduce_paper.sh reads
    assert cli.main(["configs", "--plan", "dgpo", "--only", "dgpo_t1_*", "--costs", "--keep", "all"]) == 0
    table = capsys.readouterr().out
    rows = {
        tuple(line.split()[:2]): line.split() for line in table.splitlines() if line.startswith(("train ", "eval "))
    }
    assert rows["train", "dgpo_t1_grpo"][2:7] == ["230", "58,880", "24", "x", "2,000"]
    eval_pass = 32 * (30 + 30 + 40) + 4 * (500 + 272 + 675)
    assert rows["eval", "dgpo_t1_base"][2:7] == ["0", "0", "1", "x", f"{eval_pass:,}"]
    total = next(line for line in table.splitlines() if line.startswith("TOTAL (3 eval, 2 train)")).split()
    assert total[5:8] == ["460", "117,760", f"{2 * 24 * 2000 + 3 * eval_pass:,}"]
    assert "VERL_HADW_KEEP=all" in table and "12 B/param" in table
    assert cli.main(["configs", "--plan", "hadw", "--only", "hadw_t1_qwen3_4b_grpo", "--costs", "--keep", "x"]) == 2
    assert "VERL_HADW_KEEP='x'" in capsys.readouterr().err

"""The paper-reproduction configs carry the papers' hyperparameters (HA-DW Table 8 / §3; DGPO Table 9, §4.1,
App. G), validate with the evaluation protocol, and switch to the released scripts' settings on request."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from repro_runs import ROOT, RUN_FILES, composed_runs

from verl_hadw.repro import catalogue as K
from verl_hadw.repro import compose as C

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Disabled critic as algorithm.adv_estimator != gae")]


@pytest.fixture(scope="module")
def composed():
    return composed_runs()


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


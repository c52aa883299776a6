"""The arithmetic task through verl's main_ppo: its tokenizer passes verl's Qwen ChatML builder, its config on top of
the demo's composes to the TRL arithmetic study's design, its held-out rows are that study's, and the demo prints each
tier's held-out accuracy from verl's log."""

from __future__ import annotations

import pytest

from verl_hadw.research import study, trl_study, trl_study_run
from verl_hadw.toy import arith, assets, launch
from verl_hadw.toy.arith_model import CHAT_TEMPLATE
from verl_hadw.toy.model import build_tokenizer
from verl_hadw.toy.modes import _composed


def test_the_verl_tokenizer_passes_verls_qwen_builder_and_encodes_problems_as_the_models_own():
    from verl.utils.tokenizer.continuous_token import QwenContinuousTokenBuilder

    own = build_tokenizer(arith.CHARS, CHAT_TEMPLATE)  # the pretrained model's 16 tokens
    with pytest.raises(ValueError, match="newline to tokenize to one token"):
        QwenContinuousTokenBuilder(own)
    tokenizer = assets.arith_tokenizer()
    QwenContinuousTokenBuilder(tokenizer)
    assert tokenizer.encode("\n", add_special_tokens=False) == [len(own)]  # after the model's vocabulary
    for question, answer in arith.problems("hardest", "test")[:20]:
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                               add_generation_prompt=True)
        assert prompt == question
        assert tokenizer.encode(prompt + answer) == own.encode(prompt + answer)


def test_the_arith_config_composes_to_the_trl_arithmetic_studys_design(tmp_path):
    plan, trl = study.arith_plan(tmp_path), trl_study.arith_plan()
    overrides = [*launch.TASK_OVERRIDES["arith"], *study.base_overrides(plan, "hadw", 1)]
    config = _composed(launch.config_dir(), "demo", [*overrides, f"hydra.run.dir={tmp_path}"])
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert (config.data.train_batch_size, rollout.n, actor.optim.lr) == (trl.prompts, trl.group, trl.lrs[0])
    assert config.data.max_response_length == trl.max_completion_length
    assert (actor.ppo_epochs, actor.ppo_mini_batch_size) == (1, trl.prompts)  # one update a step, as TRL's
    assert (actor.optim.weight_decay, actor.optim.lr_scheduler_type) == (0.0, "cosine")
    val = rollout.val_kwargs
    assert (val.n, val.temperature, val.do_sample) == (trl.val_n, 1.0, True)
    assert (config.trainer.total_training_steps, plan.val_prompts) == (trl.steps, trl.val_prompts)
    assert config.algorithm.hadw.anchor.eta == 16.0  # the package's default, as the TRL study's hadw
    demo = _composed(launch.config_dir(), "demo", [*launch.TASK_OVERRIDES["arith"], f"hydra.run.dir={tmp_path}"])
    assert (demo.trainer.total_training_steps, demo.trainer.test_freq, demo.trainer.val_before_train) == (60, 30, True)


def test_the_held_out_rows_are_the_trl_studys():
    trl = trl_study.arith_plan()
    verl_rows = arith.make_rows(trl.val_prompts, 1, "test", assets.TRAIN_ROWS["arith"])  # as assets.build writes them
    trl_rows = trl_study_run._rows(arith, trl.val_prompts, 0, "test", first=100_000)
    assert [r["prompt"] for r in verl_rows] == [r["prompt"] for r in trl_rows]
    assert [r["reward_model"]["ground_truth"] for r in verl_rows] == [r["answer"] for r in trl_rows]
    assert assets.TRAIN_ROWS["arith"] == trl.train_rows


def test_the_demo_prints_each_tiers_held_out_accuracy_at_the_first_and_last_validation(capsys):
    line = "step:{} - " + " - ".join(f"val-core/arith_{t}/acc/mean@4:np.float64({{}})" for t in arith.TIERS)
    log = "\n".join([line.format(0, 0.9, 0.6, 0.3, 0.05), "step:1 - critic/score/mean:0.5",
                     line.format(60, 0.95, 0.8, 0.4, 0.06)])
    launch.print_held_out(launch.parse_steps(log), "arith")
    assert capsys.readouterr().out == ("held-out accuracy per tier, step 0 -> step 60: easy 0.900 -> 0.950, "
                                       "medium 0.600 -> 0.800, hard 0.300 -> 0.400, hardest 0.050 -> 0.060\n")
    launch.print_held_out(launch.parse_steps(log), "toy")  # no toy tier in the log: nothing to print
    assert capsys.readouterr().out == ""


"""Switched off, ``HadwGRPOTrainer`` is TRL's ``GRPOTrainer``: DGPO without DGAE, DQW and valid-token averaging,
with TRL's epsilon (1e-4), logs the losses of the same run under TRL's own trainer bit for bit, under four of TRL's
loss types, and on generation batches in which a reward function returned None for every reward of some completions
(ms-swift's and Axolotl's adapters pass the same tests against their frameworks: tests/swift/, tests/axolotl/)."""

from __future__ import annotations

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer
from trl_helpers import accuracy, config, config_values, toy_dataset, trainer

from verl_hadw.toy.model import build_model, build_tokenizer

SWITCHED_OFF = {"adv_estimator": "dgpo", "dgpo_dgae": False, "dgpo_dqw": False, "dgpo_valid_token_norm": False,
                "dgpo_epsilon": 1e-4}
TIME_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time")


def logged(history: list[dict]) -> list[dict]:
    """TRL's per-step log entries, without wall-clock fields and our dgpo/* metrics."""
    return [{k: v for k, v in h.items() if not k.startswith(("dgpo/", *TIME_KEYS))} for h in history if "loss" in h]


def trls_own_run(folder, reward_funcs, **values) -> GRPOTrainer:
    """TRL's own ``GRPOTrainer`` on the same task, model and settings, trained."""
    tokenizer = build_tokenizer()
    theirs = GRPOTrainer(model=build_model(tokenizer, 0), reward_funcs=reward_funcs,
                         args=GRPOConfig(**config_values(folder, **values)), train_dataset=toy_dataset(),
                         processing_class=tokenizer)
    theirs.train()
    return theirs


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo"])
def test_switched_off_it_is_trls_grpo_bit_for_bit(tmp_path, loss_type):
    ours = trainer(config(tmp_path / "ours", loss_type=loss_type, max_steps=3, **SWITCHED_OFF))
    ours.train()
    theirs = trls_own_run(tmp_path / "theirs", accuracy, loss_type=loss_type, max_steps=3)
    mine, trls = logged(ours.state.log_history), logged(theirs.state.log_history)
    assert len(trls) == 3 and any(h["loss"] != 0 for h in trls)
    assert mine == trls


NONE_AT = [set(), {1, 5, 6, 7}, {0, 1, 4, 5, 6, 7}, set(range(8))]  # per step: the rows left unscored


def partly_unscored(completions, allowed, trainer_state, **kwargs) -> list[float | None]:
    """The toy accuracy, None at the step's ``NONE_AT`` rows: none; a group with one unscored completion and one with a
    single scored one; a group without a scored completion; a batch without one."""
    none_at = NONE_AT[trainer_state.global_step % len(NONE_AT)]
    return [None if i in none_at else r for i, r in enumerate(accuracy(completions, allowed))]


def test_switched_off_it_is_trls_grpo_bit_for_bit_where_completions_are_unscorable(tmp_path):
    """TRL 1.6+ leaves such a completion out of its group's mean and std (advantage 0); 1.0-1.5 give it nansum's 0."""
    ours = trainer(config(tmp_path / "ours", max_steps=4, **SWITCHED_OFF), reward_funcs=partly_unscored)
    ours.train()
    theirs = trls_own_run(tmp_path / "theirs", partly_unscored, max_steps=4)
    mine, trls = logged(ours.state.log_history), logged(theirs.state.log_history)
    assert len(trls) == 4 and any(h["loss"] != 0 for h in trls)
    assert mine == trls
    assert all(torch.equal(a, b) for a, b in zip(ours.model.state_dict().values(),
                                                 theirs.model.state_dict().values(), strict=True))
    unscored = [g.rewards.isnan().all(dim=1) for g in ours.generations]
    assert [u.nonzero().squeeze(-1).tolist() for u in unscored] == [sorted(n) for n in NONE_AT]
    if ours.excludes_unscorable:  # TRL >= 1.6
        assert all(g.advantages[u].eq(0).all() and g.advantages[4:].eq(0).all() for g, u in
                   zip(ours.generations[1:], unscored[1:]))  # group 2 of batch 2: a single scored completion

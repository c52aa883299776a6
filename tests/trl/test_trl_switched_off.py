"""Switched off, ``HadwGRPOTrainer`` is TRL's ``GRPOTrainer``: DGPO without DGAE, DQW and valid-token averaging,
with TRL's epsilon (1e-4), logs the losses of the same run under TRL's own trainer bit for bit, under four of TRL's
loss types. (ms-swift's adapter passes the same test against ``swift rlhf``: tests/swift/.)"""

from __future__ import annotations

import pytest
from trl import GRPOConfig, GRPOTrainer
from trl_helpers import accuracy, config, config_values, toy_dataset, trainer

from verl_hadw.toy.model import build_model, build_tokenizer

SWITCHED_OFF = {"adv_estimator": "dgpo", "dgpo_dgae": False, "dgpo_dqw": False, "dgpo_valid_token_norm": False,
                "dgpo_epsilon": 1e-4}
TIME_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time")


def logged(history: list[dict]) -> list[dict]:
    """TRL's per-step log entries, without wall-clock fields and our dgpo/* metrics."""
    return [{k: v for k, v in h.items() if not k.startswith(("dgpo/", *TIME_KEYS))} for h in history if "loss" in h]


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo"])
def test_switched_off_it_is_trls_grpo_bit_for_bit(tmp_path, loss_type):
    ours = trainer(config(tmp_path / "ours", loss_type=loss_type, max_steps=3, **SWITCHED_OFF))
    ours.train()
    trl_args = GRPOConfig(**config_values(tmp_path / "theirs", loss_type=loss_type, max_steps=3))
    tokenizer = build_tokenizer()
    theirs = GRPOTrainer(model=build_model(tokenizer, 0), reward_funcs=accuracy, args=trl_args,
                         train_dataset=toy_dataset(), processing_class=tokenizer)
    theirs.train()
    mine, trls = logged(ours.state.log_history), logged(theirs.state.log_history)
    assert len(trls) == 3 and any(h["loss"] != 0 for h in trls)
    assert mine == trls

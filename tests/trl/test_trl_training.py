"""The real TRL ``GRPOTrainer`` (through ``HadwGRPOTrainer``) trains on our estimators' advantages.

A tiny local Qwen2 and the toy task's verifiable reward; a few steps each. For every generation batch, TRL trains on
the advantages it buffered; the hadw/* and dgpo/* metrics are in ``trainer.state.log_history``; TRL's completion log
holds our advantages; with ``num_iterations > 1`` the anchor advances once per generation; a resumed run's anchor
continues bit for bit. No verl here: every TRL session of noxfile.py runs this file too (and each transformers
session of the sweep). That the advantages equal verl's estimator's:
tests/verl/test_verl_and_trl_agree.py.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from trl_helpers import BATCH, config, trained_on_what_it_buffered, trainer

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.anchor.machine import AnchorState


@pytest.fixture(scope="module")
def hadw_run(tmp_path_factory):
    """HA-DW, four steps, checkpoints at steps 2 and 4: shared by the tests below (one training run)."""
    t = trainer(config(tmp_path_factory.mktemp("hadw"), max_steps=4, save_strategy="steps", save_steps=2))
    t.train()
    return t


def test_hadw_trains_on_the_advantages_it_buffered(hadw_run):
    trained_on_what_it_buffered(hadw_run)


def test_hadw_metrics_reach_trls_log_history(hadw_run):
    steps = [h for h in hadw_run.state.log_history if "loss" in h]
    assert len(steps) == 4
    for entry, g in zip(steps, hadw_run.generations, strict=True):
        for name in ("hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/phi_mean", "hadw/eta_t"):
            assert name in entry, (name, sorted(entry))
        view = AnchorState.from_dict(g.anchor).view()  # the anchor as this generation left it
        assert (entry["hadw/anchor_prior"], entry["hadw/anchor_posterior"]) == (view.prior, view.posterior)
        assert entry["hadw/batch_acc"] == view.batch_acc == pytest.approx(float(g.rewards[:, 0].mean()))
    assert "hadw/actor_recoveries" not in steps[0]  # verl's Ray actor only


def test_trls_completion_log_holds_our_advantages(hadw_run):
    """TRL logs its own advantages before the override sees them (TRL PR #7298): ours replace them."""
    assert list(hadw_run._logs["advantages"]) == hadw_run.generations[-1].advantages.tolist()


def test_the_anchor_is_saved_in_trls_checkpoints(hadw_run):
    for step in (2, 4):
        with open(os.path.join(hadw_run.args.output_dir, f"checkpoint-{step}", STATE_FILE)) as f:
            saved = json.load(f)
        assert saved["global_step"] == step and saved["state"]["open_step"] == step
        assert saved["options"]["algorithm.hadw.lambda_scale"] == 1.3
        assert saved["state"]["posteriors"] == hadw_run.generations[step - 1].anchor["posteriors"]


def test_resume_continues_the_anchor_bit_for_bit(hadw_run, tmp_path):
    """Resume from checkpoint-2 and train to step 4: the same anchor, every step, as the run that never stopped."""
    out = hadw_run.args.output_dir
    resumed = trainer(config(out, max_steps=4, save_strategy="no"))
    resumed.train(resume_from_checkpoint=os.path.join(out, "checkpoint-2"))
    assert resumed.hadw_anchor.restored_from == os.path.join(out, "checkpoint-2", STATE_FILE)
    assert [g.rewards.tolist() for g in resumed.generations] == [g.rewards.tolist() for g in hadw_run.generations[2:]]
    assert [g.anchor for g in resumed.generations] == [g.anchor for g in hadw_run.generations[2:]]
    assert resumed.hadw_anchor.state.to_dict() == hadw_run.hadw_anchor.state.to_dict()
    for a, b in zip(resumed.generations, hadw_run.generations[2:], strict=True):
        assert torch.equal(a.advantages, b.advantages)


@pytest.mark.parametrize("overrides", [{"adv_estimator": "dgpo"}, {"hadw_base": "dgpo"}],
                         ids=["dgpo", "hadw_over_dgpo"])
def test_dgpo_trains_on_its_advantages_and_logs_its_metrics(overrides, tmp_path):
    t = trainer(config(tmp_path, **overrides))
    t.train()
    trained_on_what_it_buffered(t)
    entry = next(h for h in t.state.log_history if "loss" in h)
    assert {"dgpo/valid_groups", "dgpo/zero_var_groups", "dgpo/valid_token_ratio"} <= set(entry)
    assert ("hadw/anchor_prior" in entry) == ("hadw_base" in overrides)


def test_num_iterations_advance_the_anchor_once_per_generation(tmp_path):
    """num_iterations=2: four optimizer steps, two generations; TRL reuses each one's advantages for two steps."""
    t = trainer(config(tmp_path, max_steps=4, num_iterations=2))
    t.train()
    assert len(t.generations) == 2
    assert [g.anchor["open_step"] for g in t.generations] == [1, 3]  # the optimizer step each generation starts
    assert [g.anchor["committed_steps"] for g in t.generations] == [0, 1]
    assert [len(g.trained) for g in t.generations] == [2, 2]  # each trained on twice, the anchor untouched
    assert t.hadw_anchor.state.count == BATCH and t.hadw_anchor.state.calls == [0]
    trained_on_what_it_buffered(t)


def test_evaluation_leaves_the_anchor_where_it_is(hadw_run):
    """In evaluation the advantages are those a training batch would get now, from a copy of the anchor."""
    g = hadw_run.generations[-1]
    lengths = g.completion_mask.sum(dim=-1)
    before = hadw_run.hadw_anchor.state.to_dict()
    evaluated, values = hadw_run.hadw_advantages(g.rewards, lengths, mode="eval")
    assert hadw_run.hadw_anchor.state.to_dict() == before
    assert values["hadw/anchor_prior"] == AnchorState.from_dict(before).view().posterior  # Eq. 12: C⁺ of step 4
    try:
        trained, _ = hadw_run.hadw_advantages(g.rewards, lengths, mode="train")  # observes step global_step + 1
        assert hadw_run.hadw_anchor.state.to_dict() != before
        assert torch.equal(evaluated, trained)
    finally:
        hadw_run.hadw_anchor.state = AnchorState.from_dict(before)  # the shared run as it was

"""The same generation batch gives the same advantages through ms-swift, Axolotl, TRL and verl.

The ms-swift and Axolotl sessions (``nox -s swift-4.6.0 axolotl-0.19.0``...) keep what each HA-DW / DGPO run trained
on (``VERL_HADW_RECORDS``); ``nox -s compare`` runs this file over those folders (``VERL_HADW_COMPARE``, one per
session). Each batch is replayed in order from a fresh anchor through TRL's adapter and verl's registered estimator,
starting from what that framework itself held: the rewards scored again from its completions, the loss tokens of its
own masks (their sum is its ``num_items_in_batch``). The framework's adapters run the same function as TRL's
(``verl_hadw.hf_trainer``'s ``generation_advantages``): equal exactly; verl's estimator: within 1e-6.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from trl_helpers import config, trainer

from verl_hadw.toy.task import compute_score
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage
from verl_hadw.verl.process_state import reset

RUNS = {  # a framework's kept runs -> (TRL config overrides, verl's estimator)
    "hadw": ({}, compute_hadw_outcome_advantage),
    "dgpo": ({"adv_estimator": "dgpo"}, compute_dgpo_outcome_advantage),
    "hadw_over_dgpo": ({"hadw_base": "dgpo"}, compute_hadw_outcome_advantage),
}
KEPT = [Path(p) for p in os.environ.get("VERL_HADW_COMPARE", "").split(os.pathsep) if p]


def kept_calls(folder: Path, name: str) -> list[dict]:
    """The kept run ``name``'s calls on rank 0."""
    path = folder / name / "rank0.jsonl"
    assert path.exists(), f"{folder.name} kept no {name} run: run nox -s {folder.name} before nox -s compare"
    return [json.loads(line) for line in path.read_text().splitlines()]


def verl_advantages(t, estimator, rewards: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """verl's registered estimator on one generation batch (the same groups; token masks of its lengths)."""
    node = t.args.algorithm_node()
    if estimator is compute_dgpo_outcome_advantage or node["hadw"]["base"] == "grpo":  # only what it reads
        node.pop("hadw" if estimator is compute_dgpo_outcome_advantage else "dgpo")
    mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).float()
    token_rewards = torch.zeros(mask.shape)
    token_rewards[:, 0] = rewards[:, 0]
    uid = np.array([f"prompt-{i // t.num_generations}" for i in range(rewards.shape[0])], dtype=object)
    adv, _ = estimator(token_rewards, mask, uid, config=node)
    return adv[:, 0]


def test_every_session_to_compare_is_named():
    assert KEPT, "VERL_HADW_COMPARE names no record folder: run nox -s compare"


@pytest.mark.parametrize("folder", KEPT, ids=[k.name for k in KEPT])
@pytest.mark.parametrize("name", list(RUNS))
def test_the_same_batch_gives_the_same_advantages_through_each_framework_trl_and_verl(tmp_path, folder, name):
    calls = kept_calls(folder, name)
    assert calls and all(sum(c["mask_tokens"]) == np.ravel(c["num_items_in_batch"])[0] for c in calls)
    overrides, estimator = RUNS[name]
    t = trainer(config(tmp_path, **overrides))  # TRL's adapter, fresh anchor
    reset()  # verl's estimator: a fresh anchor too
    try:
        for call in calls:
            theirs = torch.tensor(call["advantages"])
            scored = zip(call["completions"], call["solutions"], strict=True)
            rewards = torch.tensor([[compute_score("toy", c, s)] for c, s in scored])
            lengths = torch.tensor(call["mask_tokens"], dtype=torch.float32)
            t.state.global_step = call["step"] - 1  # the step TRL's adapter observes: global_step + 1
            trl, _ = t.hadw_advantages(rewards, lengths)
            assert torch.equal(trl, theirs), (trl - theirs).abs().max()
            torch.testing.assert_close(verl_advantages(t, estimator, rewards, lengths.long()), theirs, rtol=1e-6,
                                       atol=1e-6)
            if t.hadw_anchor is not None:
                assert t.hadw_anchor.state.to_dict()["posteriors"] == call["anchor"]["posteriors"]
    finally:
        reset()

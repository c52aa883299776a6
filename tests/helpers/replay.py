"""Generation batches another framework trained on (ms-swift's, Axolotl's records), replayed in order from a fresh
anchor through TRL's adapter and verl's registered estimator, starting from what that framework itself held: the
rewards scored again from its completions, the loss tokens of its own masks. The framework's adapters run the same
function as TRL's (``generation_advantages``): equal exactly; verl's estimator: within 1e-6."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
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


def kept_calls(output: str, name: str) -> list[dict]:
    """The kept run ``name``'s calls on rank 0, from the folder a framework environment's ``output`` names
    (``environment_shell.report`` prints it once every check passed)."""
    folders = re.findall(r"^\[[\w-]+ [\d.]+\] records: (.+)$", output, re.M)
    assert len(folders) == 1, "the environment kept no records: it failed (its test above says where)"
    return [json.loads(line) for line in (Path(folders[0]) / name / "rank0.jsonl").read_text().splitlines()]


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


def replay(calls: list[dict], name: str, tmp_path) -> int:
    """Replay ``calls`` (each: ``step``, ``completions``, ``solutions``, ``mask_tokens``, the ``advantages`` the
    framework trained on, its ``anchor`` after the call) of the kept run ``name``; the number of calls replayed."""
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
    return len(calls)

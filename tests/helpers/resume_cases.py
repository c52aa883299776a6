"""Resume cases for test_resume_roundtrip.py: one HA-DW run per option combination through verl's
``compute_advantage``, with the v1 checkpoint callback or the legacy trainer's snapshots.

As a script, ``python resume_cases.py CASES.json`` restores and continues every case of the file in this one
fresh process and prints one ``CASE {"id": ..., "rows": [...]}`` line per case.

A case is a plain dict: ``backend`` (v1 | legacy), ``mode`` (kalman | moving_average | moving_average+current |
fixed), ``difficulty_from``, ``base``, ``rewards`` (binary | signed | continuous), and the drawn details
(``steps``, ``split``, ``calls`` per step, ``seed``, anchor and HA-DW values, ``ckpt`` folder).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
from anchor_run import verl_save
from omegaconf import OmegaConf

PROMPTS, GROUP, LENGTH = 4, 4, 3
THRESHOLD = {"binary": None, "signed": 0.0, "continuous": 0.5}  # DAPO's ±1 rewards: a success is > 0
ANCHOR_VALUES = ("hadw/anchor_prior", "hadw/anchor_posterior", "hadw/batch_acc", "hadw/eta_t", "hadw/sigma_t")


def scores(case: dict, step: int, call: int) -> np.ndarray:
    """(PROMPTS * GROUP,) rewards of one estimator call; they depend only on (seed, step, call)."""
    rng = np.random.default_rng([case["seed"], step, call])
    p = rng.uniform(0.0, 1.0, size=PROMPTS)
    success = rng.random((PROMPTS, GROUP)) < p[:, None]
    if case["rewards"] == "binary":
        out = success.astype(np.float32)
    elif case["rewards"] == "signed":
        out = np.where(success, 1.0, -1.0).astype(np.float32)
    else:
        out = rng.uniform(0.0, 1.0, size=(PROMPTS, GROUP)).astype(np.float32)
    return out.reshape(-1)


def batch(case: dict, step: int, call: int):
    from verl import DataProto

    rewards = torch.zeros(PROMPTS * GROUP, LENGTH)
    rewards[:, -1] = torch.from_numpy(scores(case, step, call))
    uid = np.array([f"{step}-{call}-{i}" for i in range(PROMPTS) for _ in range(GROUP)], dtype=object)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(PROMPTS * GROUP, LENGTH)},
        non_tensors={"uid": uid},
    )


def hadw_options(case: dict) -> dict:
    mode = case["mode"]
    anchor = {
        "mode": "moving_average" if mode.startswith("moving_average") else mode,
        "include_current": mode == "moving_average+current",
        "eta": case["eta"], "window": case["window"], "eta_min": case["eta_min"], "init": case["init"],
        "sigma_source": case["sigma_source"], "fixed_value": case["fixed_value"],
    }
    return {
        "state_key": f"case/{case['id']}", "base": case["base"], "difficulty_from": case["difficulty_from"],
        "success_threshold": THRESHOLD[case["rewards"]], "lambda_scale": case["lambda_scale"],
        "normalize_phi": case["normalize_phi"], "anchor": anchor,
    }


def config(case: dict, resume: bool):
    legacy = case["backend"] == "legacy"
    return OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": "hadw", "norm_adv_by_std_in_grpo": True, "hadw": hadw_options(case),
                "dgpo": {"temperature": case["temperature"], "success_threshold": THRESHOLD[case["rewards"]]},
            },
            "trainer": {
                "use_v1": not legacy, "default_local_dir": case["ckpt"], "save_freq": 1 if legacy else -1,
                "resume_mode": "auto" if resume else "disable", "resume_from_path": None,
            },
        }
    )


def run(case: dict, first: int, last: int, save: bool) -> list[dict]:
    """Steps first..last of the case (a resume when first > 1): every step's anchor values and advantages.

    With ``save`` verl checkpoints step ``last``: the v1 callback's ``on_save``, or (legacy) the folder beside
    the snapshot the estimator wrote.
    """
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.skip.skip_manager import SkipManager

    from verl_hadw.verl import metrics
    from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback

    cfg = config(case, resume=first > 1)
    callback = HadwCheckpointCallback(cfg) if case["backend"] == "v1" else None
    rows = []
    for step in range(first, last + 1):
        SkipManager.set_step(step)
        advantages = []
        for call in range(case["calls"]):
            out = compute_advantage(batch(case, step, call), "hadw", config=cfg.algorithm)
            advantages.append(out.batch["advantages"].tolist())
        logged = metrics.pop(step)
        rows.append({"step": step, **{k: logged[k] for k in ANCHOR_VALUES}, "advantages": advantages})
    if save:
        folder = os.path.join(case["ckpt"], f"global_step_{last}")
        if callback is not None:
            callback.on_save(trainer=None, global_step=last, checkpoint_dir=folder)
        verl_save(case["ckpt"], last)
    return rows


def canonical(rows) -> str:
    """Rows as JSON: equal strings mean equal bits (floats print their shortest exact repr; -0.0 and NaN too)."""
    return json.dumps(rows, sort_keys=True)


if __name__ == "__main__":
    from verl_hadw.verl import process_state

    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        process_state.reset()
        rows = run(case, case["split"] + 1, case["steps"], save=False)
        print("CASE " + json.dumps({"id": case["id"], "rows": rows}), flush=True)

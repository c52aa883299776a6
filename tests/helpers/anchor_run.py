"""Run HA-DW through verl's compute_advantage for a range of training steps in a fresh process.

Used by test_anchor_actor.py: ``python anchor_run.py CKPT_DIR FIRST LAST [--save] [--ray] [--resume]``
prints one JSON line per step with the anchor values verl would log. Batches depend only on the step.
"""

import os

import numpy as np
import torch
from omegaconf import OmegaConf


def verl_save(ckpt: str, step: int) -> None:
    """What verl's legacy ``_save_checkpoint`` leaves on disk for step N: ``actor/``, ``data.pt``, the tracker."""
    folder = os.path.join(ckpt, f"global_step_{step}")
    os.makedirs(os.path.join(folder, "actor"), exist_ok=True)
    with open(os.path.join(folder, "data.pt"), "wb") as f:
        f.write(f"dataloader state {step}".encode())
    with open(os.path.join(ckpt, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(step))


def kill_actor(name: str) -> None:
    """Kill the named actor and return once it is gone."""
    import ray

    from verl_hadw.verl.anchor_store.stores import wait_until_released

    ray.kill(ray.get_actor(name))
    wait_until_released(name, timeout=300)


def batch(step: int):
    from verl import DataProto

    rng = np.random.default_rng(step)
    prompts, group, length = 12, 4, 5
    p = rng.uniform(0.05, 0.95, size=prompts)
    correct = (rng.random((prompts, group)) < p[:, None]).astype(np.float32).reshape(-1)
    rewards = torch.zeros(prompts * group, length)
    rewards[:, -1] = torch.from_numpy(correct)
    uid = np.array([f"{step}-{i}" for i in range(prompts) for _ in range(group)], dtype=object)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones(prompts * group, length)},
        non_tensors={"uid": uid},
    )


def config(ckpt_dir: str, resume: bool, extra_hadw: dict | None = None):
    return OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": "hadw",
                "norm_adv_by_std_in_grpo": True,
                "hadw": {"state_key": "proj/exp", "anchor": {"eta": 3.0, "window": 4}, **(extra_hadw or {})},
            },
            "trainer": {"default_local_dir": ckpt_dir, "resume_mode": "auto" if resume else "disable",
                        "resume_from_path": None},
        }
    )


def run(ckpt_dir: str, first: int, last: int, save: bool, resume: bool, extra_hadw: dict | None = None) -> list[dict]:
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.skip.skip_manager import SkipManager

    from verl_hadw.verl import metrics
    from verl_hadw.verl.checkpoint_callback import HadwCheckpointCallback

    cfg = config(ckpt_dir, resume, extra_hadw)
    callback = HadwCheckpointCallback(cfg)
    out = []
    for step in range(first, last + 1):
        SkipManager.set_step(step)
        compute_advantage(batch(step), "hadw", config=cfg.algorithm)
        out.append({"step": step, **metrics.pop(step)})
    if save:
        folder = os.path.join(ckpt_dir, f"global_step_{last}")
        callback.on_save(trainer=None, global_step=last, checkpoint_dir=folder)
        with open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(last))  # what verl writes after its own save
    return out


"""``verl-hadw demo``: synthetic batches through verl's own ``compute_advantage`` and ``Tracking`` logger, no model.

Each step builds a verl ``DataProto`` of G rollouts for B prompts from a policy whose skill rises, runs verl's
``compute_advantage`` with the chosen estimator and logs through verl's console ``Tracking``, so the hadw/* and
dgpo/* metrics appear in verl's own log line. The real-trainer demo is ``scripts/demo_cpu.sh`` (docs/demo.md).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from omegaconf import OmegaConf

from verl_hadw.cli.arguments import Number, count


def synthetic_batch(rng: np.random.Generator, step: int, prompts: int = 32, group: int = 8, length: int = 16):
    """A verl DataProto for one step: binary rewards, variable response lengths, one padding row (as verl's
    balancer adds)."""
    from verl import DataProto

    difficulty = np.linspace(-2.0, 3.0, prompts)  # graded: many hard prompts, a few easy ones
    skill = 0.12 * step
    p = 1.0 / (1.0 + np.exp(-(skill - difficulty)))
    correct = rng.random((prompts, group)) < p[:, None]
    n = prompts * group
    lengths = rng.integers(2, length + 1, size=n)
    mask = torch.zeros(n + 1, length)
    mask[:n] = (torch.arange(length)[None, :] < torch.as_tensor(lengths)[:, None]).float()
    rewards = torch.zeros(n + 1, length)
    rewards[torch.arange(n), torch.as_tensor(lengths - 1)] = torch.as_tensor(correct.reshape(-1), dtype=torch.float32)
    uid = np.array([f"s{step}-p{i}" for i in range(prompts) for _ in range(group)] + ["pad0"], dtype=object)
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": uid}
    )


def run_demo(estimator: str = "hadw", steps: int = 12, seed: int = 0) -> None:
    import verl  # noqa: F401  (loads the verl.plugins entry point: registers hadw/dgpo)
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.skip.skip_manager import SkipManager
    from verl.utils.tracking import Tracking

    config = OmegaConf.create(
        {"adv_estimator": estimator, "norm_adv_by_std_in_grpo": True, "hadw": {"state_key": f"demo/{seed}"}}
    )
    logger = Tracking(project_name="verl-hadw-demo", experiment_name=estimator, default_backend=["console"])
    rng = np.random.default_rng(seed)
    print(f"verl compute_advantage with algorithm.adv_estimator={estimator}, {steps} synthetic steps")
    for step in range(1, steps + 1):
        SkipManager.set_step(step)  # what verl's trainer does before each step
        data = compute_advantage(synthetic_batch(rng, step), estimator, config=config)
        adv = data.batch["advantages"]
        logger.log(
            data={"critic/advantages/max": float(adv.max()), "critic/advantages/min": float(adv.min())}, step=step
        )
    SkipManager.set_step(-1)


def demo(args: argparse.Namespace) -> int:
    run_demo(estimator=args.estimator, steps=args.steps, seed=args.seed)
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser("demo", help="push synthetic batches through verl's compute_advantage")
    p.add_argument("--estimator", default="hadw", choices=["hadw", "dgpo", "grpo"])
    p.add_argument("--steps", type=count(), default=12)
    p.add_argument("--seed", type=Number(), default=0)
    p.set_defaults(func=demo)

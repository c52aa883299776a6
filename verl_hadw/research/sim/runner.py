"""Run (method × seed) simulations through verl's ``compute_advantage`` and collect per-step records.

Each step does what verl's trainer does: sample a rollout, build the ``DataProto``, ``SkipManager.set_step(t)``,
``compute_advantage``, read the step's hadw/* and dgpo/* metrics; then one optimiser step on verl's token-mean loss.
Runs are independent and deterministic for a seed; all methods see the same prompts and draws (paired by seed).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable

import numpy as np

from verl_hadw.research.sim.config import SimConfig
from verl_hadw.research.sim.env import Policy, Population, policy_loss, sample_rollout, to_dataproto
from verl_hadw.research.sim.methods import Method

__all__ = ["RECORD_FIELDS", "run_one", "run_many", "state_key"]

# CSV columns of one step of one run (hadw/dgpo fields are NaN where they do not apply).
RECORD_FIELDS = [
    "method", "seed", "step", "acc_train", "acc_hard", "acc_heldout", "skill", "batch_acc", "valid_group_frac",
    "adv_abs_mean", "anchor_prior", "anchor_posterior", "eta_t", "sigma_t", "phi_mean", "phi_std", "phi_min",
    "phi_max", "frac_amplified", "dgpo_weight_min", "dgpo_weight_max",
]  # fmt: skip
_METRIC_NAMES = {
    "hadw/anchor_prior": "anchor_prior",
    "hadw/anchor_posterior": "anchor_posterior",
    "hadw/eta_t": "eta_t",
    "hadw/sigma_t": "sigma_t",
    "hadw/phi_mean": "phi_mean",
    "hadw/phi_std": "phi_std",
    "hadw/phi_min": "phi_min",
    "hadw/phi_max": "phi_max",
    "hadw/frac_amplified": "frac_amplified",
    "dgpo/weight_min": "dgpo_weight_min",
    "dgpo/weight_max": "dgpo_weight_max",
}


def state_key(method: Method, seed: int) -> str:
    return f"verl-hadw-sim/{method.name}/seed{seed}"


@contextlib.contextmanager
def _quiet_single_thread():
    """One torch thread, and no anchor-freeze warnings (the η ≤ 4 runs freeze on purpose; the summary
    reports how far each anchor moved). Restores both on exit."""
    import torch

    before = torch.get_num_threads()
    anchor_logger = logging.getLogger("verl_hadw.verl.anchor_store.client")
    level = anchor_logger.level
    torch.set_num_threads(1)
    anchor_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"HA-DW anchor .* is frozen", category=RuntimeWarning)
            yield
    finally:
        torch.set_num_threads(before)
        anchor_logger.setLevel(level)


def _row_stats(rollout, advantages) -> dict[str, float]:
    """Batch accuracy, fraction of non-degenerate groups and mean |advantage| over the valid rows."""
    valid = rollout.valid
    correct = rollout.correct[valid]
    mask = rollout.response_mask[valid]
    row_adv = ((advantages[valid] * mask).sum(-1) / mask.sum(-1)).numpy()
    _, gid = np.unique(rollout.prompt[valid], return_inverse=True)
    hits = np.bincount(gid, weights=correct.astype(float))
    size = np.bincount(gid)
    return {
        "batch_acc": float(correct.mean()),
        "valid_group_frac": float(np.mean((hits > 0) & (hits < size))),
        "adv_abs_mean": float(np.abs(row_adv).mean()),
    }


def run_one(
    method: Method,
    seed: int,
    cfg: SimConfig = SimConfig(),
    on_step: Callable | None = None,
) -> list[dict]:
    """Simulate one (method, seed) run: ``cfg.steps + 1`` records (step 0 is the initial policy).

    ``on_step(step, rollout, data)`` (optional) sees each step's rollout and the ``DataProto`` returned by
    verl's ``compute_advantage`` (with ``advantages``), before the policy update.
    """
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.skip.skip_manager import SkipManager

    import verl_hadw.verl.estimators  # noqa: F401  (registers hadw and dgpo)
    from verl_hadw.verl import metrics
    from verl_hadw.verl.anchor_store import client as anchor_client

    key = state_key(method, seed)
    config = OmegaConf.create(method.algorithm(key))
    population = Population.make(cfg, seed)
    policy = Policy(population)
    scale = cfg.batch_prompts * cfg.mean_length  # makes lr_prompt a per-prompt logit step (env.policy_loss)
    lr_prompt = cfg.lr_prompt * method.lr_mult
    lr_skill = cfg.lr_skill * method.lr_mult / cfg.batch_prompts
    nan = float("nan")
    blank = {f: nan for f in RECORD_FIELDS[3:]}
    records = [{"method": method.name, "seed": seed, "step": 0, **blank, **policy.evaluate()}]
    anchor_client.forget(key)
    try:
        with _quiet_single_thread():
            for step in range(1, cfg.steps + 1):
                rng = np.random.default_rng([seed, 1, step])
                rollout = sample_rollout(policy, cfg, rng, method.group)
                SkipManager.set_step(step)
                data = compute_advantage(to_dataproto(rollout), method.estimator, config=config)
                step_metrics = metrics.pop(step)
                advantages = data.batch["advantages"]
                if on_step is not None:
                    on_step(step, rollout, data)
                policy.step(policy_loss(policy, rollout, advantages, scale), lr_prompt, lr_skill, cfg)
                record = {"method": method.name, "seed": seed, "step": step, **blank}
                record.update(_row_stats(rollout, advantages))
                record.update({_METRIC_NAMES[k]: v for k, v in step_metrics.items() if k in _METRIC_NAMES})
                record.update(policy.evaluate())
                records.append(record)
    finally:
        SkipManager.set_step(-1)
        anchor_client.forget(key)
    return records


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def _run_task(task) -> list[dict]:
    method, seed, cfg = task
    return run_one(method, seed, cfg)


def run_many(
    methods: Iterable[Method],
    seeds: Iterable[int],
    cfg: SimConfig = SimConfig(),
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """All (method, seed) runs, in ``workers`` processes (fork; 1 = in this process). Records are returned
    sorted by (method order, seed, step), so the output does not depend on the scheduling."""
    methods, seeds = list(methods), list(seeds)
    order = {m.name: i for i, m in enumerate(methods)}
    # verl's grpo (a Python loop over rows) is the slowest estimator: schedule those runs first.
    tasks = sorted(((m, s, cfg) for m in methods for s in seeds), key=lambda t: (t[0].estimator != "grpo", -t[0].group))
    results: list[dict] = []
    if workers <= 1:
        for i, task in enumerate(tasks):
            results += _run_task(task)
            if progress:
                progress(f"[{i + 1}/{len(tasks)}] {task[0].name} seed {task[1]}")
    else:
        import multiprocessing as mp

        # import verl's trainer module once here, before forking, instead of once per worker
        from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: F401

        import verl_hadw.verl.estimators  # noqa: F401

        context = mp.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker) as pool:
            for i, (task, recs) in enumerate(zip(tasks, pool.map(_run_task, tasks))):
                results += recs
                if progress:
                    progress(f"[{i + 1}/{len(tasks)}] {task[0].name} seed {task[1]}")
    results.sort(key=lambda r: (order[r["method"]], r["seed"], r["step"]))
    return results

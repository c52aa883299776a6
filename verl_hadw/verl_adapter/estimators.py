"""HA-DW and DGPO advantage estimators, registered in verl's ``ADV_ESTIMATOR_REGISTRY``.

The maths (every equation, tagged) is the core's ``advantages`` module, which TRL's adapter calls too; this module
is verl's side of it: the config node (read once per call, parsed and checked once per configuration:
``config.call_config.read_call``), the step resolver, the anchor client (a Ray actor under verl), padding rows
(advantage 0) and the metrics hook.
Equation numbers refer to ``docs/equations.md``.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

from verl_hadw.core.advantages import dgpo_advantage, dgpo_call, grpo_advantage, hadw_call, hadw_weights
from verl_hadw.core.groups import Batch, prepare_batch
from verl_hadw.verl_adapter import metrics, steps
from verl_hadw.verl_adapter.anchor_home import anchor_client as anchor_client
from verl_hadw.verl_adapter.anchor_home import estimator_record, legacy_snapshots
from verl_hadw.verl_adapter.config.call_config import read_call
from verl_hadw.verl_adapter.verl_terms import VERL

__all__ = [
    "compute_hadw_outcome_advantage",
    "compute_dgpo_outcome_advantage",
    "grpo_advantage",
    "dgpo_advantage",
    "hadw_weights",
]


def _register(name: str):
    """``register_adv_est`` that tolerates re-importing this module (same qualified name)."""

    def decorator(fn):
        old = ADV_ESTIMATOR_REGISTRY.get(name)
        if old is not None and (old.__module__, old.__qualname__) == (fn.__module__, fn.__qualname__):
            ADV_ESTIMATOR_REGISTRY[name] = fn
            return fn
        return register_adv_est(name)(fn)

    return decorator


# ------------------------------------------------------------------------------------------ plumbing
def _scatter_rows(values: torch.Tensor, b: Batch) -> torch.Tensor:
    """(N,) with ``values`` (n,) at the valid rows and 0 at padding rows."""
    if b.rows.numel() == b.n_rows:
        return values
    out = torch.zeros(b.n_rows, dtype=values.dtype, device=values.device)
    return out.index_copy_(0, b.rows, values)


def _broadcast(scalar: torch.Tensor, b: Batch, response_mask: torch.Tensor) -> torch.Tensor:
    """(N, L) advantages: one scalar per row over its response tokens."""
    return _scatter_rows(scalar, b).unsqueeze(-1) * response_mask


@_register("hadw")
def compute_hadw_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """HA-DW (History-Aware Adaptive Difficulty Weighting) over a GRPO or DGPO base advantage.

    Final advantage Â_{t,i} · Φ_{t,i} (Eq. 17), Φ from the cross-step anchor's prior C_t⁻ (Eqs. 13-16); the
    anchor then absorbs this step's batch accuracy y_t (Eqs. 7-12), once per training step. With
    ``difficulty_from=reward`` y_t and p̂ are mean rewards instead (the authors' released code).

    Args:
        token_level_rewards: (bs, response_length) float
        response_mask: (bs, response_length); all-zero rows are padding (advantage 0)
        index: (bs,) np.ndarray of uid per row, the group of each response
        config: verl's ``algorithm`` node; options under ``algorithm.hadw`` (see ``HadwConfig``)

    Returns:
        advantages, returns: (bs, response_length), equal
    """
    call_config = read_call(config)  # the one read of verl's config (parsed and checked once per configuration)
    run = call_config.run
    cfg = run.hadw
    metrics.enable(cfg.log_metrics)  # verl's Tracking.log is wrapped only once an estimator of ours runs
    with torch.no_grad():
        step, trainer_run = steps.trainer_step(), steps.trainer_run()
        clients = []

        def snapshots():  # the legacy trainer's snapshots, read only when a run's client is built (None: the v1
            return legacy_snapshots.from_call(call_config)  # callback built it already, or no trainer)

        def client():  # built on the first call of a run, with ``snapshots()`` as its persistence
            clients.append(anchor_client.get_client(cfg, snapshots, step, trainer_run, caller=config))
            return clients[-1]

        def preview(correct: float, count: int):  # checked first: a refused call leaves the anchor as it was
            return client().preview(correct, count, trainer_step=step)

        def observe(correct: float, count: int):
            return client().observe(correct=correct, count=count, trainer_step=step)

        # Over GRPO nothing depends on how groups are numbered: skip sorting the uids (see groups.group_ids).
        b = prepare_batch(token_level_rewards, response_mask, index, sorted_ids=cfg.base == "dgpo")
        dgpo_cfg = run.dgpo if cfg.base == "dgpo" else None  # the base's own options (algorithm.dgpo)
        call = hadw_call(b, cfg, dgpo_cfg, run.norm_by_std, observe, VERL.key, preview=preview)
        advantages = _broadcast(call.advantages, b, response_mask)

        metrics.record_hadw(call.view, call.phi, cfg.lambda_scale, recoveries=clients[-1].recoveries,
                            summary=call.phi_summary)  # read with Φ's check: no read of its own
        if call.dgpo_counts is not None:
            metrics.record_dgpo(call.view.step, call.dgpo_counts)
    return advantages, advantages


# --------------------------------------------------------------------------------------------- DGPO
@_register("dgpo")
def compute_dgpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DGPO: MAD-normalised group advantage (DGAE, Eqs. 4-5), difficulty-aware question weights over the
    valid groups (DQW, Eq. 6) and valid-token loss averaging folded into the advantages (Eq. 3).

    The valid-token factor makes verl's ``token-mean`` loss a mean over valid tokens exactly when one
    step's batch is one optimiser mini-batch (``ppo_mini_batch_size == train_batch_size``, or the
    ``separate_async`` trainer); otherwise it holds in expectation.

    Args:
        token_level_rewards: (bs, response_length) float
        response_mask: (bs, response_length); all-zero rows are padding (advantage 0)
        index: (bs,) np.ndarray of uid per row
        config: verl's ``algorithm`` node; options under ``algorithm.dgpo`` (see ``DgpoConfig``)

    Returns:
        advantages, returns: (bs, response_length), equal
    """
    call_config = read_call(config)  # the one read of verl's config (parsed and checked once per configuration)
    run = call_config.run
    metrics.enable(run.hadw.log_metrics)  # the same switch as HA-DW's: algorithm.hadw.log_metrics
    estimator_record.check_resumed(call_config)  # a checkpoint trained under another estimator: refused
    with torch.no_grad():
        b = prepare_batch(token_level_rewards, response_mask, index)
        adv, counts = dgpo_call(b, run.dgpo, run.norm_by_std, VERL.key)
        advantages = _broadcast(adv, b, response_mask)
        metrics.record_dgpo(steps.stateless_step(), counts)
    estimator_record.record(call_config)  # which estimator trained this step, for a resume to check
    return advantages, advantages

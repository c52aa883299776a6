"""HA-DW and DGPO advantage estimators, registered in verl's ``ADV_ESTIMATOR_REGISTRY`` as ``hadw`` and ``dgpo``.
The maths is the core's (``verl_hadw.core.advantages``); equation numbers refer to ``docs/equations.md``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

from verl_hadw.core.advantages import dgpo_call, hadw_call
from verl_hadw.core.groups import Batch, prepare_batch
from verl_hadw.verl import metrics
from verl_hadw.verl.anchor_store import checkpoint_files, legacy_snapshots
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.config.run_options import read_call
from verl_hadw.verl.process_state import PROCESS, stateless_step, trainer_run, trainer_step
from verl_hadw.verl.verl_terms import VERL

__all__ = ["compute_hadw_outcome_advantage", "compute_dgpo_outcome_advantage"]


def _register(name: str):
    """``register_adv_est`` that tolerates re-importing this module (same qualified name)."""

    def decorator(fn):
        old = ADV_ESTIMATOR_REGISTRY.get(name)
        if old is not None and (old.__module__, old.__qualname__) == (fn.__module__, fn.__qualname__):
            ADV_ESTIMATOR_REGISTRY[name] = fn
            return fn
        return register_adv_est(name)(fn)

    return decorator


def _broadcast(values: torch.Tensor, b: Batch, response_mask: torch.Tensor) -> torch.Tensor:
    """(bs, response_length) advantages: ``values`` (n,) of the valid rows over their response tokens, 0 at padding
    rows."""
    if b.rows.numel() != b.n_rows:
        values = torch.zeros(b.n_rows, dtype=values.dtype, device=values.device).index_copy_(0, b.rows, values)
    return values.unsqueeze(-1) * response_mask


@_register("hadw")
def compute_hadw_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray = None,
    config: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute the HA-DW advantage: a GRPO (or DGPO) group advantage times a difficulty weight Φ from a cross-step
    anchor of the model's accuracy (Eqs. 7-17). The anchor is updated once per training step.

    Args:
        token_level_rewards: `(torch.Tensor)` shape is (bs, response_length)
        response_mask: `(torch.Tensor)` shape is (bs, response_length); all-zero rows are padding (advantage 0)
        index: `(np.ndarray)` shape is (bs,), the group (uid) of each response
        config: `(DictConfig)` verl's ``algorithm`` node; options under ``algorithm.hadw`` (``HadwConfig``)

    Returns:
        advantages: `(torch.Tensor)` shape is (bs, response_length)
        Returns: `(torch.Tensor)` shape is (bs, response_length), equal to the advantages
    """
    call_config = read_call(config)
    run = call_config.run
    cfg = run.hadw
    metrics.enable(cfg.log_metrics)
    with torch.no_grad():
        step, fit = trainer_step(), trainer_run()
        clients = []

        def client():  # the run's client; the legacy snapshots are read only when a run's client is built
            clients.append(anchor_client.get_client(cfg, lambda: legacy_snapshots.from_call(call_config), step, fit,
                                                    caller=config))
            return clients[-1]

        def preview(correct: float, count: int):  # checked first: a refused call leaves the anchor as it was
            return client().preview(correct, count, trainer_step=step)

        def observe(correct: float, count: int):
            return client().observe(correct=correct, count=count, trainer_step=step)

        # over GRPO the group numbering does not matter: skip sorting the uids
        b = prepare_batch(token_level_rewards, response_mask, index, sorted_ids=cfg.base == "dgpo")
        call = hadw_call(b, cfg, run.dgpo if cfg.base == "dgpo" else None, run.norm_by_std, observe, VERL.key,
                         preview=preview)
        advantages = _broadcast(call.advantages, b, response_mask)
        PROCESS.pending_metrics.record_hadw(call.view, call.phi, cfg.lambda_scale, clients[-1].recoveries,
                                            call.phi_summary)
        if call.dgpo_counts is not None:
            PROCESS.pending_metrics.record_dgpo(call.view.step, call.dgpo_counts)
    return advantages, advantages


@_register("dgpo")
def compute_dgpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray = None,
    config: Any = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute the DGPO advantage: MAD-normalised group advantages (Eqs. 4-5), difficulty-aware question weights
    (Eq. 6) and valid-token averaging folded in (Eq. 3; exact for verl's ``token-mean`` loss when one step's batch is
    one mini-batch, otherwise in expectation).

    Args:
        token_level_rewards: `(torch.Tensor)` shape is (bs, response_length)
        response_mask: `(torch.Tensor)` shape is (bs, response_length); all-zero rows are padding (advantage 0)
        index: `(np.ndarray)` shape is (bs,), the group (uid) of each response
        config: `(DictConfig)` verl's ``algorithm`` node; options under ``algorithm.dgpo`` (``DgpoConfig``)

    Returns:
        advantages: `(torch.Tensor)` shape is (bs, response_length)
        Returns: `(torch.Tensor)` shape is (bs, response_length), equal to the advantages
    """
    call_config = read_call(config)
    run = call_config.run
    metrics.enable(run.hadw.log_metrics)  # the one switch of both estimators
    checkpoint_files.check_resumed_estimator(call_config)
    with torch.no_grad():
        b = prepare_batch(token_level_rewards, response_mask, index)
        adv, counts = dgpo_call(b, run.dgpo, run.norm_by_std, VERL.key)
        advantages = _broadcast(adv, b, response_mask)
        PROCESS.pending_metrics.record_dgpo(stateless_step(), counts)
    checkpoint_files.record_estimator(call_config)
    return advantages, advantages

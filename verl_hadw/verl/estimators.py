"""HA-DW and DGPO advantage estimators, registered as ``hadw`` and ``dgpo`` through verl's ``register_adv_est``. The
maths is the core's (``verl_hadw.core.advantages``); equation numbers refer to ``docs/equations.md``."""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.core_algos import get_adv_estimator_fn, register_adv_est

from verl_hadw.core.advantages import dgpo_call, hadw_call
from verl_hadw.core.errors import ConfigError
from verl_hadw.core.groups import Batch, prepare_batch
from verl_hadw.verl import metrics
from verl_hadw.verl.anchor_store import checkpoint_files, legacy_snapshots
from verl_hadw.verl.anchor_store import client as anchor_client
from verl_hadw.verl.config.run_options import read_call
from verl_hadw.verl.process_state import PROCESS, stateless_step, trainer_run, trainer_step
from verl_hadw.verl.verl_terms import VERL


def _register(name: str):
    """verl's ``register_adv_est`` (``ValueError`` where ``name`` holds another function), but a re-import of this
    module (``importlib.reload``, a test dropping it from ``sys.modules``) keeps the first import's functions of the
    same qualified names (same code, same ``PROCESS``), read through verl's public ``get_adv_estimator_fn``."""

    def decorator(fn):
        try:
            held = get_adv_estimator_fn(name)
        except ValueError:  # the name is free
            return register_adv_est(name)(fn)
        if (held.__module__, held.__qualname__) != (fn.__module__, fn.__qualname__):
            register_adv_est(name)(fn)  # someone else's estimator: verl raises, naming both
        return fn

    return decorator


def _agrees(epsilon: float | None, norm_adv_by_std_in_grpo: bool | None, run, section: str) -> None:
    """The parameters verl's own estimators take: None reads the config, which governs (the anchor file records it);
    a value that differs from it is refused. ``section``: the options whose ``epsilon`` the base advantage adds."""
    for parameter, given, option, configured in (
            ("epsilon", epsilon, f"algorithm.{section}.epsilon", getattr(run, section).epsilon),
            ("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo, "algorithm.norm_adv_by_std_in_grpo", run.norm_by_std)):
        if given is not None and given != configured:
            raise ConfigError(f"the estimator was called with {parameter}={given!r} but the config has {option}="
                              f"{configured!r}: set it in the config (verl's compute_advantage passes only the config)")


def _broadcast(values: torch.Tensor, b: Batch, response_mask: torch.Tensor) -> torch.Tensor:
    """(bs, response_length) advantages: ``values`` (n,) of the valid rows over their tokens, 0 at padding rows."""
    if b.rows.numel() != b.n_rows:
        values = torch.zeros(b.n_rows, dtype=values.dtype, device=values.device).index_copy_(0, b.rows, values)
    return values.unsqueeze(-1) * response_mask


@_register("hadw")
def compute_hadw_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: Optional[float] = None,
    norm_adv_by_std_in_grpo: Optional[bool] = None,
    config: Optional[AlgoConfig] = None,
    **kwargs,  # what else verl's compute_advantage passes (reward_baselines): unused
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute advantage for HA-DW: a GRPO (or DGPO) group advantage times a difficulty weight Φ from a cross-step
    anchor of the model's accuracy (Eqs. 7-17). The anchor is updated once per training step.

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length)
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length); all-zero rows are padding (advantage 0)
        index: `(np.ndarray)`
            index array for grouping (each response's uid)
        epsilon: `(Optional[float])`
            small value to avoid division by zero; None: algorithm.hadw.epsilon (base dgpo: algorithm.dgpo.epsilon);
            a value must equal it
        norm_adv_by_std_in_grpo: `(Optional[bool])`
            whether to scale the GRPO advantage; None: algorithm.norm_adv_by_std_in_grpo (a value must equal it)
        config: `(Optional[AlgoConfig])`
            algorithm configuration object; the options under ``algorithm.hadw`` (``HadwConfig``)

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        Returns: `(torch.Tensor)`
            shape is (bs, response_length)
    """
    call_config = read_call(config)
    run, cfg = call_config.run, call_config.run.hadw
    _agrees(epsilon, norm_adv_by_std_in_grpo, run, "dgpo" if cfg.base == "dgpo" else "hadw")
    metrics.enable(cfg.log_metrics)
    with torch.no_grad():
        step, fit = trainer_step(), trainer_run()

        def client():  # the run's client; the legacy snapshots are read only when a run's client is built
            return anchor_client.get_client(cfg, lambda: legacy_snapshots.from_call(call_config), step, fit,
                                            caller=config)

        # over GRPO the group numbering does not matter: skip sorting the uids
        b = prepare_batch(token_level_rewards, response_mask, index, sorted_ids=cfg.base == "dgpo")
        call = hadw_call(b, cfg, run.dgpo if cfg.base == "dgpo" else None, run.norm_by_std,
                         lambda correct, count: client().observe(correct=correct, count=count, trainer_step=step),
                         VERL.key,  # preview: checked first, so that a refused call leaves the anchor as it was
                         preview=lambda correct, count: client().preview(correct, count, trainer_step=step))
        advantages = _broadcast(call.advantages, b, response_mask)
        PROCESS.pending_metrics.record_hadw(call.view, call.phi, cfg.lambda_scale,  # the client that observed
                                            PROCESS.anchors[cfg.state_key].recoveries, call.phi_summary)
        if call.dgpo_counts is not None:
            PROCESS.pending_metrics.record_dgpo(call.view.step, call.dgpo_counts)
    return advantages, advantages


@_register("dgpo")
def compute_dgpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: Optional[float] = None,
    norm_adv_by_std_in_grpo: Optional[bool] = None,
    config: Optional[AlgoConfig] = None,
    **kwargs,  # what else verl's compute_advantage passes (reward_baselines): unused
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Compute advantage for DGPO: MAD-normalised group advantages (Eqs. 4-5), difficulty-aware question weights
    (Eq. 6) and valid-token averaging folded in (Eq. 3; exact for verl's ``token-mean`` loss when one step's batch is
    one mini-batch, otherwise in expectation).

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length)
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length); all-zero rows are padding (advantage 0)
        index: `(np.ndarray)`
            index array for grouping (each response's uid)
        epsilon: `(Optional[float])`
            small value to avoid division by zero; None: algorithm.dgpo.epsilon (a value must equal it)
        norm_adv_by_std_in_grpo: `(Optional[bool])`
            whether to scale the GRPO advantage; None: algorithm.norm_adv_by_std_in_grpo (a value must equal it)
        config: `(Optional[AlgoConfig])`
            algorithm configuration object; the options under ``algorithm.dgpo`` (``DgpoConfig``)

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        Returns: `(torch.Tensor)`
            shape is (bs, response_length)
    """
    call_config = read_call(config)
    run = call_config.run
    _agrees(epsilon, norm_adv_by_std_in_grpo, run, "dgpo")
    metrics.enable(run.hadw.log_metrics)  # the one switch of both estimators
    checkpoint_files.check_resumed_estimator(call_config)
    with torch.no_grad():
        b = prepare_batch(token_level_rewards, response_mask, index)
        adv, counts = dgpo_call(b, run.dgpo, run.norm_by_std, VERL.key)
        advantages = _broadcast(adv, b, response_mask)
        PROCESS.pending_metrics.record_dgpo(stateless_step(), counts)
    checkpoint_files.record_estimator(call_config)
    return advantages, advantages

"""Batch builders shared by the tests (tests/ has no __init__.py: verl ships a top-level ``tests`` package)."""

from __future__ import annotations

import numpy as np
import torch


def make_inputs(scores, groups, lengths=None, length=6):
    """(token_level_rewards, response_mask, index) for per-row ``scores`` and group labels.

    ``lengths`` per row (0 = a verl padding row); the score sits on the last response token.
    """
    scores = torch.as_tensor(scores, dtype=torch.float32)
    n = scores.numel()
    lengths = torch.full((n,), length) if lengths is None else torch.as_tensor(lengths)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(n, length)
    rows = torch.nonzero(lengths > 0).squeeze(-1)
    rewards[rows, lengths[rows] - 1] = scores[rows]
    index = np.array([str(g) for g in groups], dtype=object)
    return rewards, mask, index


def algo(estimator="hadw", **hadw):
    """A verl ``algorithm`` node as a plain dict; ``dgpo=...`` and ``norm=...`` are pulled out of ``hadw``."""
    dgpo = hadw.pop("dgpo", {})
    norm = hadw.pop("norm", True)
    return {"adv_estimator": estimator, "norm_adv_by_std_in_grpo": norm, "hadw": hadw, "dgpo": dgpo}


def row_adv(advantages, mask):
    """(N,) the per-row scalar advantage (0 for padding rows)."""
    return (advantages * mask).sum(-1) / mask.sum(-1).clamp_min(1)


def flat_config(cfg) -> dict:
    """A composed config as {dotted.key: value}, interpolations unresolved."""
    from omegaconf import OmegaConf

    out = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            out[prefix] = node

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return out


RAY_START_TIMEOUT = "timed out during startup"  # Ray's bare Exception when a node misses its fixed 30 s deadline


def start_ray_node(start, attempts: int = 3):
    """``start()`` (``ray.init``, ``Cluster(...)``, ``add_node``) again when Ray's node missed its fixed 30 s start-up
    deadline, which a loaded machine can (the session's launches run beside these tests); what the tests check
    starts once the node is up. Returns what ``start`` returns."""
    import time

    import ray

    for attempt in range(1, attempts + 1):
        try:
            return start()
        except Exception as exc:  # Ray raises a bare Exception for this
            if RAY_START_TIMEOUT not in str(exc) or attempt == attempts:
                raise
            ray.shutdown()
            print(f"Ray's node did not start (attempt {attempt}/{attempts}); trying again", flush=True)
            time.sleep(5 * attempt)

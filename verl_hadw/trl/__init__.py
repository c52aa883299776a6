"""HA-DW and DGPO for TRL's ``GRPOTrainer`` (``pip install "verl-hadw[trl]"``), over the same core as verl's.

``HadwGRPOConfig`` is TRL's ``GRPOConfig`` plus one field per verl-hadw option (derived from ``core/options.py``);
``HadwGRPOTrainer`` is TRL's ``GRPOTrainer`` training on ``verl_hadw.core.advantages``' output. The only package that
imports ``trl``; nothing else in verl-hadw imports it. Importing it without TRL installed fails with one line naming
the install. Usage and the field table: docs/trl.md.
"""

from verl_hadw.core.framework import require

require("trl", "verl_hadw.trl", "trl")

# ruff: noqa: E402  (the check above comes first: without TRL, these would fail with TRL's own ImportError)

from verl_hadw.trl.grpo_config import HadwGRPOConfig
from verl_hadw.trl.grpo_trainer import HadwGRPOTrainer

__all__ = ["HadwGRPOConfig", "HadwGRPOTrainer", "stock_grpo"]


def stock_grpo():
    """TRL's own ``(GRPOConfig, GRPOTrainer)``, unchanged: the baseline a study compares with
    (``verl_hadw.research.trl_study``), handed out by the one package that imports ``trl``."""
    from trl import GRPOConfig, GRPOTrainer

    return GRPOConfig, GRPOTrainer

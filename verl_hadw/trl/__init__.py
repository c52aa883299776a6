"""HA-DW and DGPO for TRL's ``GRPOTrainer`` (``pip install "verl-hadw[trl]"``): ``HadwGRPOConfig`` and
``HadwGRPOTrainer``. Usage: docs/trl.md."""

from verl_hadw.core.framework import require

require("trl", "verl_hadw.trl", "trl")

# ruff: noqa: E402  (the check above comes first: without TRL, these would fail with TRL's own ImportError)

from verl_hadw.trl.grpo_config import HadwGRPOConfig
from verl_hadw.trl.grpo_trainer import HadwGRPOTrainer

__all__ = ["HadwGRPOConfig", "HadwGRPOTrainer"]

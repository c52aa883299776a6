"""HA-DW and DGPO for TRL's ``GRPOTrainer`` (``pip install "verl-hadw[trl]"``), over the same core as verl's.

``HadwGRPOConfig`` is TRL's ``GRPOConfig`` plus one field per verl-hadw option (derived from ``options.py``);
``HadwGRPOTrainer`` is TRL's ``GRPOTrainer`` training on ``verl_hadw.advantages``' output. The only package that
imports ``trl``; nothing else in verl-hadw imports it. Usage and the field table: docs/trl.md.
"""

from verl_hadw.trl.grpo_config import HadwGRPOConfig
from verl_hadw.trl.grpo_trainer import HadwGRPOTrainer

__all__ = ["HadwGRPOConfig", "HadwGRPOTrainer"]

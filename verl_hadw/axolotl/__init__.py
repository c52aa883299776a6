"""HA-DW and DGPO for Axolotl's GRPO (``pip install "verl-hadw[axolotl]"``): list ``verl_hadw.axolotl.HadwPlugin``
under ``plugins:`` and set ``hadw_adv_estimator: hadw`` beside ``rl: grpo``. Never imports TRL's adapter. Usage:
docs/axolotl.md."""

from verl_hadw.core.framework import require

require("axolotl", "verl_hadw.axolotl", "axolotl")

from verl_hadw.axolotl.plugin import HadwPlugin  # noqa: E402  (after require: without Axolotl, its own ImportError)

__all__ = ["HadwPlugin"]

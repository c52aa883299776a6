"""HA-DW and DGPO for ms-swift's GRPO (``pip install "verl-hadw[swift]"``): ``verl-hadw-swift rlhf ...
--adv_estimator hadw`` (``cli``), or ``rlhf_main(argv)``. Never imports TRL's adapter. Usage: docs/swift.md."""

from verl_hadw.core.framework import require

require("swift", "verl_hadw.swift", "swift")

# ruff: noqa: E402  (the check above comes first: without ms-swift, these would fail with swift's own ImportError)

from verl_hadw.swift.rlhf import rlhf_main

__all__ = ["rlhf_main"]

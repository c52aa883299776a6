"""HA-DW and DGPO for ms-swift's GRPO (``pip install "verl-hadw[swift]"``, in ms-swift's own environment).

A swift user changes one word of the command they run and adds ``--adv_estimator``:
``verl-hadw-swift rlhf --rlhf_type grpo ... --adv_estimator hadw`` (``cli``: swift's own ``cli_main`` over a route
table whose ``rlhf`` is ours, so torchrun, ``NPROC_PER_NODE`` and ``--config x.yaml`` keep working); from Python,
``verl_hadw.swift_adapter.rlhf_main(argv)``. ``HadwSwiftGRPOTrainer`` is swift's ``GRPOTrainer`` whose
``_compute_advantages`` returns HA-DW's or DGPO's advantages (``core.reward_matrix``). Imports only the core and the
shared HF-Trainer package (``verl_hadw.hf_trainer``), never TRL's adapter (ms-swift 4.x needs ``trl<1.0``). Importing it
without ms-swift fails with one line naming the install. Usage: docs/swift.md.
"""

from verl_hadw.core.framework import require

require("swift", "verl_hadw.swift_adapter", "swift")

# ruff: noqa: E402  (the check above comes first: without ms-swift, these would fail with swift's own ImportError)

from verl_hadw.swift_adapter.rlhf import rlhf_main

__all__ = ["rlhf_main"]

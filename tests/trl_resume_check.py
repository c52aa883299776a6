"""A TRL run saved and resumed equals the run that never stopped (HA-DW's anchor, rewards and advantages, bit for bit).

    python tests/trl_resume_check.py OUT_DIR

needs only TRL and this package's ``[trl]`` extra (no verl, no pytest): ``tests/trl_install_cell.py`` runs it in a
virtualenv holding the lowest TRL of ``TRL_RANGE``, where the adapter's pytest files (which compare with verl's
estimator) cannot run; ``tests/test_trl_training.py::test_resume_continues_the_anchor_bit_for_bit`` is the same check
with the newest TRL. Prints one line per resumed generation batch and ``resume bit for bit: N batches``.
"""

from __future__ import annotations

import os
import sys

import torch
from trl_helpers import config, one_thread, trainer

from verl_hadw.core.anchor.file_format import STATE_FILE


def main(out: str) -> int:
    one_thread()
    straight = trainer(config(out, max_steps=4, save_strategy="steps", save_steps=2))
    straight.train()
    resumed = trainer(config(out, max_steps=4, save_strategy="no"))
    resumed.train(resume_from_checkpoint=os.path.join(out, "checkpoint-2"))
    assert resumed.anchor.restored_from == os.path.join(out, "checkpoint-2", STATE_FILE), resumed.anchor.restored_from
    later = straight.generations[2:]
    assert len(resumed.generations) == len(later) > 0, (len(resumed.generations), len(later))
    for a, b in zip(resumed.generations, later, strict=True):
        assert a.rewards.tolist() == b.rewards.tolist() and a.anchor == b.anchor and torch.equal(a.advantages,
                                                                                                b.advantages)
        print(f"batch: mean reward {a.rewards.mean():.3f}, |advantages| {a.advantages.abs().sum():.6f}", flush=True)
    assert resumed.anchor.state.to_dict() == straight.anchor.state.to_dict()
    print(f"resume bit for bit: {len(later)} batches")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

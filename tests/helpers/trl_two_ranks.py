"""Run by ``tests/trl/test_trl_distributed.py`` under ``accelerate launch --multi_gpu --num_processes 2`` (torchrun;
``use_cpu`` makes it gloo): three steps of HA-DW over DGPO on two CPU processes, each rank writing what it saw per
generation batch to ``OUT/rank<r>.json``: its anchor, the whole batch's advantages (ours, as logged), its own slice.
"""

from __future__ import annotations

import gc
import json
import os
import sys

import torch
from trl_helpers import config, trainer


def main(out: str) -> None:
    torch.set_num_threads(1)
    # two processes of 6 rows: one generation batch = 3 prompts x 4 completions, the middle group split across ranks
    t = trainer(config(out, per_device_train_batch_size=6, max_steps=3, hadw_base="dgpo"))
    t.train()
    rank = t.accelerator.process_index
    record = {
        "world_size": t.accelerator.num_processes,
        "backend": str(t.accelerator.state.backend),
        "anchors": [g.anchor for g in t.generations],
        "rewards": [g.rewards.tolist() for g in t.generations],
        "local_advantages": [g.advantages.tolist() for g in t.generations],
        "logged_advantages": list(t._logs["advantages"]),
        "log_history": [{k: v for k, v in h.items() if k.startswith("hadw/")} for h in t.state.log_history],
    }
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1])
    # the trainer freed while the gloo group lives, then the group destroyed: the order verl-hadw-swift's ranks end in
    # (verl_hadw/swift/rlhf_route.py says why)
    gc.collect()
    torch.distributed.destroy_process_group()

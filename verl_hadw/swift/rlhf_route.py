"""The script swift's ``cli_main`` runs for ``verl-hadw-swift rlhf``, directly or under ``torch.distributed.run``."""

if __name__ == "__main__":
    import os
    import sys

    # run as a file, this folder is first on sys.path: drop it, so that no module here shadows another package
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    # internal: as swift's own route scripts do (checked on ms-swift 4.3.0, 4.6.0)
    from swift.cli.utils import try_use_single_device_mode

    try_use_single_device_mode()
    from verl_hadw.core import errors
    from verl_hadw.swift.rlhf import rlhf_main

    try:
        rlhf_main()
    except (errors.ConfigError, errors.MissingAnchorStateError, errors.AnchorSaveError, errors.PartialCheckpointError,
            errors.RewardValueError) as exc:
        # ours, each with its way out: one line
        print(f"verl-hadw-swift rlhf: error: {exc}", file=sys.stderr)
        sys.exit(2)
    import gc

    import torch.distributed as dist

    # A rank that exits with its gloo group alive can abort in its teardown (SIGABRT, "terminate called without an
    # active exception": about one CPU run in three on a loaded machine, torch 2.13), and swift's rlhf leaves it alive;
    # one that destroys it while its trainer (DDP's reducer) still holds it can hang when that is freed. So: the trainer
    # freed first, then the group destroyed. Not after an error: a rank waiting in a collective would hang.
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()

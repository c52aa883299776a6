"""The script swift's ``cli_main`` runs for ``verl-hadw-swift rlhf`` (in place of ``swift/cli/rlhf.py``): directly,
or under ``torch.distributed.run`` when ``NPROC_PER_NODE`` / ``NNODES`` are set."""

if __name__ == "__main__":
    import os
    import sys

    # run as a file, Python put this folder first on sys.path: drop it, so no module here can shadow another package
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    from swift.cli.utils import try_use_single_device_mode

    try_use_single_device_mode()
    from verl_hadw.core.errors import (
        AnchorSaveError,
        ConfigError,
        MissingAnchorStateError,
        PartialCheckpointError,
        RewardValueError,
    )
    from verl_hadw.swift_adapter.rlhf import rlhf_main

    try:
        rlhf_main()
    except (ConfigError, MissingAnchorStateError, AnchorSaveError, PartialCheckpointError, RewardValueError) as exc:
        # ours, with its ways out: a refused flag or setting (before any model loads), a resume refused, a partial
        # checkpoint or an anchor file that cannot be read (before anything loads from the checkpoint): one line
        print(f"verl-hadw-swift rlhf: error: {exc}", file=sys.stderr)
        sys.exit(2)

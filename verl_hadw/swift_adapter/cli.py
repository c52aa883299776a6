"""``verl-hadw-swift``: swift's command line (``swift.cli.main.cli_main``) with its ``rlhf`` route pointed at ours.

``verl-hadw-swift rlhf --rlhf_type grpo ... --adv_estimator hadw`` is ``swift rlhf ...`` with HA-DW's advantage:
swift's ``cli_main`` reads ``NPROC_PER_NODE`` / ``NNODES`` (torchrun) and ``--config x.yaml`` as it does for
``swift``, then runs ``rlhf_route`` in place of its own ``rlhf`` script. Every other subcommand is swift's own.
"""

from __future__ import annotations

__all__ = ["main", "ROUTE"]

ROUTE = "verl_hadw.swift_adapter.rlhf_route"


def main() -> None:
    from swift.cli.main import ROUTE_MAPPING, cli_main

    from verl_hadw.swift_adapter.version import check_swift_version

    check_swift_version()
    cli_main({**ROUTE_MAPPING, "rlhf": ROUTE})


if __name__ == "__main__":
    main()

"""``verl-hadw-swift``: swift's command line (``swift.cli.main.cli_main``) with its ``rlhf`` route pointed at ours;
every other subcommand, ``NPROC_PER_NODE`` and ``--config x.yaml`` work as under ``swift``."""

from __future__ import annotations

import sys

__all__ = ["main", "ROUTE"]

ROUTE = "verl_hadw.swift.rlhf_route"

USAGE = """usage: verl-hadw-swift <subcommand> [arguments]

swift's command line with HA-DW's and DGPO's advantages in its rlhf subcommand:
  verl-hadw-swift rlhf --rlhf_type grpo ... --adv_estimator hadw|dgpo [--hadw_* ...] [--dgpo_* ...]
  verl-hadw-swift rlhf x.yaml [flags]   a config file (.yaml, .yml or .json) first, as swift takes it
  verl-hadw-swift rlhf --help           every flag: HA-DW's and DGPO's, then swift rlhf's
Every other subcommand is swift's own ({subcommands}). docs/swift.md has the details."""


def main(argv: list[str] | None = None) -> None:
    from swift.cli.main import ROUTE_MAPPING, cli_main  # internal: swift's route table (ms-swift 4.3.0, 4.6.0)

    from verl_hadw.swift.checks import check_swift_version

    check_swift_version()
    argv = list(sys.argv[1:] if argv is None else argv)
    routes = {**ROUTE_MAPPING, "rlhf": ROUTE}
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE.format(subcommands=", ".join(sorted(ROUTE_MAPPING))), flush=True)
        sys.exit(0 if argv else 2)
    if argv[0].replace("_", "-") not in routes:  # swift's own cli_main would end in a KeyError
        print(f"verl-hadw-swift: error: unknown subcommand {argv[0]!r}. Choose one of: "
              f"{', '.join(sorted(routes))}.", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = argv
    cli_main(routes)


if __name__ == "__main__":
    main()

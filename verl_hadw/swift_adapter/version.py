"""The ms-swift releases whose GRPO hook this adapter supports (``verl_hadw.SWIFT_RANGE``), read without importing
swift."""

from __future__ import annotations

from verl_hadw import SWIFT_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.versions import in_range, installed

__all__ = ["SWIFT_RANGE", "installed_swift", "check_swift_version"]


def installed_swift() -> str:
    """The installed ms-swift's version (its distribution's metadata)."""
    return installed("ms-swift", "swift")


def check_swift_version() -> str:
    """The installed ms-swift's version; ``ConfigError`` naming the range when it lies outside ``SWIFT_RANGE``."""
    found = installed_swift()
    if not in_range(found, SWIFT_RANGE):
        raise ConfigError(
            f"verl-hadw's swift adapter supports ms-swift{SWIFT_RANGE}; the installed ms-swift is {found}. It "
            "replaces GRPOTrainer._compute_advantages, checked in those releases (docs/swift.md). Install one of "
            f'them: pip install "ms-swift{SWIFT_RANGE}".'
        )
    return found

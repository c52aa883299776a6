"""The ms-swift releases whose GRPO hook this adapter supports (``verl_hadw.SWIFT_RANGE``), read without importing
swift."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from verl_hadw import SWIFT_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.core.framework import install_command

__all__ = ["SWIFT_RANGE", "installed_swift", "check_swift_version"]


def installed_swift() -> str:
    """The installed ms-swift's version (its distribution's metadata)."""
    try:
        return version("ms-swift")
    except PackageNotFoundError:
        raise ModuleNotFoundError(f"verl_hadw.swift_adapter needs ms-swift: {install_command('swift')}") from None


def check_swift_version() -> str:
    """The installed ms-swift's version; ``ConfigError`` naming the range when it lies outside ``SWIFT_RANGE``."""
    found = installed_swift()
    if Version(found) not in SpecifierSet(SWIFT_RANGE, prereleases=True):
        raise ConfigError(
            f"verl-hadw's swift adapter supports ms-swift{SWIFT_RANGE}; the installed ms-swift is {found}. It "
            "replaces GRPOTrainer._compute_advantages, checked in those releases (docs/swift.md). Install one of "
            f'them: pip install "ms-swift{SWIFT_RANGE}".'
        )
    return found

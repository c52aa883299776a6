"""The installed release of an HF-Trainer-based framework, read from its distribution's metadata without importing
it, and whether it lies in the adapter's range (each adapter words its own refusal: ``trl.version``,
``swift_adapter.version``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from verl_hadw.core.framework import install_command

__all__ = ["installed", "in_range"]


def installed(distribution: str, extra: str) -> str:
    """The installed ``distribution``'s version; ``ModuleNotFoundError`` naming the extra's install without it."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        raise ModuleNotFoundError(f"verl-hadw's {extra} adapter needs {distribution}: "
                                  f"{install_command(extra)}") from None


def in_range(found: str, spec: str) -> bool:
    """Whether the version ``found`` lies in ``spec`` (prereleases included; a version that is not PEP 440's: no)."""
    try:
        return Version(found) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:
        return False

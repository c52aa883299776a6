"""Which verl is installed, whether the plugin supports it (``VERL_RANGE``), and what that version offers.

0.9.1 and later 0.9.x have verl's checkpoint hook (``HadwCheckpointCallback``); 0.9.0 has not (the anchor is saved by
per-step snapshots; docs/using-with-verl.md); any other verl is refused (``UnsupportedVerlError``). Pure Python and
no verl import (``import verl`` loads its plugins), so ``verl-hadw doctor`` works whatever verl is installed.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from importlib import metadata

from verl_hadw import VERL_RANGE

__all__ = [
    "VERL_RANGE", "installed_verl", "is_supported", "has_checkpoint_callback", "unsupported_message", "check",
    "support_summary", "UnsupportedVerlError",
]

logger = logging.getLogger(__name__)


class UnsupportedVerlError(ImportError):
    """The installed verl is outside ``VERL_RANGE``; the message names the installed version and the range. An
    ``ImportError``: importing verl's adapter (``verl_hadw.verl``) raises it."""

#: verl's checkpoint hook (``trainer.checkpoint_callback_class``), new in verl 0.9.1 (PR #7513)
CALLBACK_MODULE = "verl.trainer.ppo.checkpoint_callback"
CALLBACK_SINCE = "0.9.1"


def installed_verl() -> str | None:
    """verl's version string, as ``verl.__version__`` gives it, without importing verl (None: not installed)."""
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or ():  # the file verl reads its own __version__ from
        path = os.path.join(folder, "version", "version")
        if os.path.isfile(path):
            with open(path) as f:
                return f.read().strip()
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None


def is_supported(version: str | None) -> bool:
    """Whether ``version`` lies in ``VERL_RANGE`` (a pre-release or local build of a supported release counts)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if version is None:
        return False
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return SpecifierSet(VERL_RANGE).contains(Version(parsed.base_version))


def has_checkpoint_callback() -> bool:
    """Whether the installed verl has the checkpoint hook (``trainer.checkpoint_callback_class``; verl >= 0.9.1).

    Told by the module's presence, not the version number, so a build between releases is read as it is. Looked up
    as a file in verl's package folders: ``find_spec`` of a submodule would import ``verl.trainer.ppo``, hence verl
    and torch (~5 core-seconds; ``verl-hadw doctor`` needs none of it)."""
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return False
    relative = os.path.join(*CALLBACK_MODULE.split(".")[1:])
    return spec is not None and any(
        os.path.isfile(os.path.join(folder, relative + ".py"))
        or os.path.isfile(os.path.join(folder, relative, "__init__.py"))
        for folder in spec.submodule_search_locations or ()
    )


def unsupported_message(version: str | None) -> str:
    why = ""
    if version is not None and is_older(version):
        why = (" (verl before 0.9.0 has no verl.plugins entry-point loading, no v1 trainer and no SkipManager, which "
               "the plugin is built on)")
    elif version is not None:
        why = " (a verl this plugin has not been checked against: the trainer internals it relies on may have moved)"
    return (
        f"verl-hadw supports verl{VERL_RANGE}, but verl {version} is installed{why}. Install a supported verl "
        f'(pip install "verl{VERL_RANGE}"; verl==0.9.1 is the version the project tests most), or a verl-hadw '
        "release that supports this verl."
    )


def is_older(version: str) -> bool:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        lowest = min(Version(s.version) for s in SpecifierSet(VERL_RANGE) if s.operator.startswith(">"))
        return Version(Version(version).base_version) < lowest
    except (InvalidVersion, ValueError):
        return False


_REFUSED: set[str] = set()


def check() -> str:
    """The installed verl's version, or ``UnsupportedVerlError`` when it is outside ``VERL_RANGE``.

    The refusal is also logged once per process: verl 0.9.x loads ``verl.plugins`` entry points in every process
    and swallows their errors (logged at DEBUG), so a verl that loads the entry point would otherwise show nothing
    until the first advantage fails to find ``hadw``.
    """
    version = installed_verl()
    if is_supported(version):
        return version
    message = unsupported_message(version)
    if message not in _REFUSED:
        _REFUSED.add(message)
        logger.error(message)
    raise UnsupportedVerlError(message, name="verl")


def support_summary(version: str | None) -> str:
    """What the plugin does on ``version``, a supported one (``verl-hadw doctor``)."""
    if has_checkpoint_callback():
        return (
            "v1 trainer: the checkpoint callback (trainer.checkpoint_callback_class=verl_hadw.verl.checkpoint_callback."
            "HadwCheckpointCallback) checks the config before any worker starts and saves the anchor into every "
            "global_step_N folder; legacy trainer (trainer.use_v1=false): per-step anchor snapshots"
        )
    return (
        f"no checkpoint callback (trainer.checkpoint_callback_class needs verl>={CALLBACK_SINCE}): both trainers "
        "save the anchor as per-step snapshots (<trainer.default_local_dir>/verl_hadw_anchor/step_N.json) and "
        "restore it on resume; the config is checked at the first estimator call"
    )

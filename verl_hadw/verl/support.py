"""Which verl is installed, whether the plugin supports it (``VERL_RANGE``), what it offers (0.9.1 and later: verl's
checkpoint hook; 0.9.0: per-step snapshots save the anchor), whether its workers start beside the installed TRL. No verl
import (``import verl`` loads its plugins), so ``verl-hadw doctor`` works whatever verl is installed."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import warnings
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from verl_hadw import VERL_RANGE

logger = logging.getLogger(__name__)

CALLBACK_SINCE = "0.9.1"  # verl's checkpoint hook (trainer.checkpoint_callback_class), new in verl 0.9.1 (PR #7513)


class UnsupportedVerlError(ImportError):
    """The installed verl is outside ``VERL_RANGE`` (raised on importing ``verl_hadw.verl``)."""


def _verl_folders() -> list[str]:
    """The installed verl package's folders, found without importing it."""
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or ()) if spec is not None else []


def installed_verl() -> str | None:
    """verl's version string, as ``verl.__version__`` gives it, without importing verl (None: not installed)."""
    folders = _verl_folders()
    for path in (os.path.join(folder, "version", "version") for folder in folders):
        if os.path.isfile(path):  # verl internal: the file verl reads __version__ from (verl 0.9.0, 0.9.1)
            with open(path) as f:
                return f.read().strip()
    try:
        return metadata.version("verl") if folders else None
    except metadata.PackageNotFoundError:
        return None


def _version(version: str | None):
    """``version``'s release (a pre-release or local build counts as its release); None if unreadable."""
    try:
        return Version(Version(version).base_version) if version is not None else None
    except InvalidVersion:
        return None


def is_supported(version: str | None) -> bool:
    """Whether ``version`` lies in ``VERL_RANGE``."""
    parsed = _version(version)
    return parsed is not None and SpecifierSet(VERL_RANGE).contains(parsed)


def has_checkpoint_callback() -> bool:
    """Whether the installed verl has the checkpoint hook, told by the module's file (not the version number, so a
    build between releases reads as it is; ``find_spec`` of a submodule would import verl and torch)."""
    relative = os.path.join("trainer", "ppo", "checkpoint_callback")  # verl.trainer.ppo.checkpoint_callback
    return any(os.path.isfile(os.path.join(folder, relative + ".py"))
               or os.path.isfile(os.path.join(folder, relative, "__init__.py")) for folder in _verl_folders())


def unsupported_message(version: str | None) -> str:
    parsed, why = _version(version), ""
    if parsed is not None and all(parsed < _version(s.version) for s in SpecifierSet(VERL_RANGE)
                                  if s.operator.startswith(">")):
        why = (" (verl before 0.9.0 has no verl.plugins entry-point loading, no v1 trainer and no SkipManager, which "
               "the plugin is built on)")
    elif version is not None:
        why = " (a verl this plugin has not been checked against: the trainer internals it relies on may have moved)"
    return (f"verl-hadw supports verl{VERL_RANGE}, but verl {version} is installed{why}. Install a supported verl "
            f'(pip install "verl{VERL_RANGE}"; verl==0.9.1 is the version the project tests most), or a verl-hadw '
            "release that supports this verl.")


_REFUSED: set[str] = set()


def check() -> str:
    """The installed verl's version, or ``UnsupportedVerlError`` outside ``VERL_RANGE``, also logged once per process
    (verl 0.9.x swallows its plugins' import errors: without the log nothing shows until ``hadw`` is not found)."""
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
        return ("v1 trainer: the checkpoint callback (trainer.checkpoint_callback_class=verl_hadw.verl."
                "checkpoint_callback.HadwCheckpointCallback) checks the config before any worker starts and saves the "
                "anchor into every global_step_N folder; legacy trainer (trainer.use_v1=false): per-step anchor "
                "snapshots")
    return (f"no checkpoint callback (trainer.checkpoint_callback_class needs verl>={CALLBACK_SINCE}): both trainers "
            "save the anchor as per-step snapshots (<trainer.default_local_dir>/verl_hadw_anchor/step_N.json) and "
            "restore it on resume; the config is checked at the first estimator call")


# verl 0.9's workers import TRL's AutoModelForCausalLMWithValueHead, which TRL 1.x removed (docs/trl.md): every verl
# actor then fails at start-up. ``verl_hadw.cpu`` works around it for CPU runs, ``verl-hadw doctor`` warns elsewhere.
def trl_has_value_head() -> bool:
    """Whether TRL is importable and still ships ``AutoModelForCausalLMWithValueHead`` (where verl 0.9 looks)."""
    try:
        if importlib.util.find_spec("trl") is None:
            return False
    except (ImportError, ValueError):
        return False
    for module in ("trl.experimental.ppo", "trl"):
        with contextlib.suppress(ImportError), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TRL warns on any import from trl.experimental
            if hasattr(importlib.import_module(module), "AutoModelForCausalLMWithValueHead"):
                return True
    return False


def verl_trl_clash() -> str | None:
    """The warning text when the installed TRL breaks verl 0.9's workers; None when it does not (or is absent)."""
    try:
        trl_version = metadata.version("trl")
    except metadata.PackageNotFoundError:
        return None
    return None if trl_has_value_head() else (
        f"TRL {trl_version} is installed beside verl: verl 0.9's FSDP workers import TRL's "
        "AutoModelForCausalLMWithValueHead, which TRL 1.x removed, so verl training fails at start-up in this "
        "environment (verl_hadw.cpu's CPU runs work around it). Keep the [trl] extra out of verl training "
        "environments.")

"""Where the configs live: the package's ``configs/`` (``<paper>/experiments/`` runs, the CPU demo's ``cpu/``) and
verl's own.

Used by the CPU demo (``toy``), the reproduction kit (``repro.compose``) and the CLI; it imports nothing heavy.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from verl_hadw import VERL_VERSION

__all__ = ["config_dir", "verl_config_dir"]


def config_dir() -> Path:
    """Directory holding the run YAMLs (``--config-path`` for verl's ``main_ppo``; runs in
    ``<paper>/experiments/``).

    ``$VERL_HADW_CONFIGS`` if set; else the ``verl_hadw_configs`` data package (the checkout's ``configs/`` in an
    editable install, ``site-packages/verl_hadw_configs`` in a regular one); else ``configs/`` next to this
    package (a source tree on ``PYTHONPATH`` without installing).
    """
    env = os.environ.get("VERL_HADW_CONFIGS")
    if env:
        path = Path(env).expanduser().resolve()
        if not path.is_dir():
            raise FileNotFoundError(f"VERL_HADW_CONFIGS={env!r} is not a directory")
        return path
    # a namespace package (configs/ holds no Python): its search locations, not a module file, say where it is
    spec = importlib.util.find_spec("verl_hadw_configs")
    installed = [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    for path in [*installed, Path(__file__).resolve().parent.parent / "configs"]:
        if (path / "hadw" / "base.yaml").is_file():
            return path.resolve()
    raise FileNotFoundError(
        "verl-hadw's configs were not found: reinstall the package (pip install -e . or pip install .) so the "
        "verl_hadw_configs data package exists, or set VERL_HADW_CONFIGS=/path/to/verl-hadw/configs"
    )


def verl_config_dir() -> Path:
    """verl's ``trainer/config`` directory, located without importing verl (``import verl`` costs seconds)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"verl is not installed: pip install verl=={VERL_VERSION}")
    path = Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config"
    if not (path / "ppo_trainer.yaml").is_file():
        raise FileNotFoundError(f"{path} has no ppo_trainer.yaml: is verl {VERL_VERSION} installed?")
    return path

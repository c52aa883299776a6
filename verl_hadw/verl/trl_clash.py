"""Can verl 0.9 train beside the installed TRL? verl 0.9's FSDP workers import TRL's
``AutoModelForCausalLMWithValueHead`` whenever TRL is installed; TRL 1.x removed it, so there every verl actor fails
at start-up (docs/trl.md). ``verl_hadw.cpu`` works around it for CPU runs, ``verl-hadw doctor`` warns elsewhere."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import warnings
from importlib.metadata import PackageNotFoundError, version


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
        trl_version = version("trl")
    except PackageNotFoundError:
        return None
    return None if trl_has_value_head() else (
        f"TRL {trl_version} is installed beside verl: verl 0.9's FSDP workers import TRL's "
        "AutoModelForCausalLMWithValueHead, which TRL 1.x removed, so verl training fails at start-up in this "
        "environment (verl_hadw.cpu's CPU runs work around it). Keep the [trl] extra out of verl training "
        "environments.")

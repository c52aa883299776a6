"""The TRL releases (``verl_hadw.TRL_RANGE``) and TRL settings under which HA-DW and DGPO are the methods named."""

from __future__ import annotations

from verl_hadw import TRL_RANGE
from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checks import LossTypes, in_range, installed
from verl_hadw.hf_trainer.option_fields import KEYWORDS
from verl_hadw.hf_trainer.trl_trainer import TRL_LOSSES, check_trl_settings

LOSS_TYPES = LossTypes(TRL_LOSSES, KEYWORDS)  # TRL's users write loss_type='dapo'


def installed_trl() -> str:
    """The installed TRL's version (its distribution's metadata)."""
    return installed("trl", "trl")


def check_trl_version(what: str) -> None:
    """Raise ``ConfigError`` unless the installed TRL lies in ``TRL_RANGE``."""
    found = installed_trl()
    if not in_range(found, TRL_RANGE):
        raise ConfigError(f"{what} supports TRL {TRL_RANGE}; the installed TRL is {found}. Install a TRL in that "
                          f'range: pip install "trl{TRL_RANGE}".')


def check_settings(config) -> None:
    """Raise ``ConfigError`` for a TRL setting of ``config`` (a ``HadwGRPOConfig``) that changes what the method
    computes, or under which DGPO's valid-token averaging would not be exact."""
    check_trl_settings(config, LOSS_TYPES, installed_trl())

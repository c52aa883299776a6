"""The HA-DW difficulty anchor: state machine, stores, client and persistence (see the modules)."""

from verl_hadw.core.anchor.machine import SCHEMA_VERSION, AnchorState, AnchorStepError, AnchorView, population_std

__all__ = ["SCHEMA_VERSION", "AnchorState", "AnchorStepError", "AnchorView", "population_std"]

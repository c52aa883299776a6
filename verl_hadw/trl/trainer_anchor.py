"""The anchor of one TRL trainer, in TRL's words: ``hf_trainer.checkpoint_anchor`` (shared with ms-swift's adapter)
bound to ``trl_terms.TRL``."""

from __future__ import annotations

from verl_hadw.core.options import HadwConfig
from verl_hadw.hf_trainer import checkpoint_anchor as shared
from verl_hadw.trl.trl_terms import TRL

__all__ = ["TrainerAnchor", "OptionsRecord"]


class TrainerAnchor(shared.TrainerAnchor):
    """``hf_trainer.checkpoint_anchor.TrainerAnchor`` whose messages name TRL's fields."""

    def __init__(self, cfg: HadwConfig, options: dict):
        super().__init__(cfg, options, TRL)


class OptionsRecord(shared.OptionsRecord):
    """``hf_trainer.checkpoint_anchor.OptionsRecord`` whose messages name TRL's fields."""

    def __init__(self, key: str, options: dict):
        super().__init__(key, options, TRL)

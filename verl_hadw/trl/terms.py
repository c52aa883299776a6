"""TRL's words for the core's messages: ``HadwGRPOConfig`` field names, ``output_dir``, ``resume_from_checkpoint``
(``hf_trainer.words``, in a Python config's spelling)."""

from __future__ import annotations

from verl_hadw.hf_trainer.words import Spelling, hf_terms

__all__ = ["TRL", "trl_key"]

TRL = hf_terms("TRL", Spelling(flags=False), resume_from="train(resume_from_checkpoint=<its folder>)",
               new_experiment="another output_dir, or train() without resume_from_checkpoint")
trl_key = TRL.key  # the TRL field of an option path: "hadw.anchor.eta" -> hadw_anchor_eta

"""ms-swift's words for the core's messages: command-line flags (``--hadw_lambda_scale``), ``--output_dir``,
``--resume_from_checkpoint`` (``hf_trainer.words``, in a command line's spelling)."""

from __future__ import annotations

from verl_hadw.hf_trainer.words import Spelling, hf_terms

__all__ = ["SWIFT", "swift_flag"]

SWIFT = hf_terms("ms-swift", Spelling(flags=True), resume_from="--resume_from_checkpoint <its folder>",
                 new_experiment="another --output_dir, or no --resume_from_checkpoint (or --resume_only_model true "
                                "--ignore_data_skip true: the weights only, a new run)")
swift_flag = SWIFT.key  # the flag of an option path: "hadw.anchor.eta" -> --hadw_anchor_eta

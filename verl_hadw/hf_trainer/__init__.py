"""What the HF-Trainer-based adapters share (TRL's ``verl_hadw.trl``, ms-swift's ``verl_hadw.swift_adapter``).

Imports only the core and transformers: the anchor of one trainer, its ``checkpoint-N`` file and resume
(``trainer_anchor``). The equations, the reward matrix -> advantages step (``core.reward_matrix``) and the options as
flat fields (``core.option_fields``) need no transformers and live in the core. Neither adapter imports the other.
"""

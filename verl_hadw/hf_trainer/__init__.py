"""What the three HF-Trainer-based adapters (``verl_hadw.trl``, ``verl_hadw.swift``, ``verl_hadw.axolotl``) share:
the options as flat fields, the reward matrix -> advantages step, the anchor's checkpoint file and the trainer hooks.
Imports only the core and transformers."""

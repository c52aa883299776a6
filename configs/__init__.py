"""Hydra configs of the HA-DW and DGPO paper reproductions, shipped as the data package ``verl_hadw_configs``.

Not meant to be imported for code: ``verl-hadw configs`` prints this directory, for
``python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<run>``.
See docs/reproduce.md.
"""

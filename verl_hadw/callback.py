"""``trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback``: the path every YAML names."""

from verl_hadw.verl_adapter.checkpoint_callback import HadwCheckpointCallback  # noqa: F401  (the class lives there)

"""The ``verl.plugins`` entry point of installs made before 0.2 (now ``verl_hadw.verl_adapter.entry_point``)."""

from verl_hadw.verl_adapter.entry_point import ESTIMATORS, register  # noqa: F401  (registers with verl's core_algos)

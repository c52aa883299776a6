"""verl-hadw: HA-DW and DGPO advantage estimators for verl 0.9.1.

Importing this package does nothing heavy. ``verl_hadw.register`` (loaded by verl's ``verl.plugins``
entry point in every process that imports verl) registers ``hadw`` and ``dgpo``.
"""

__version__ = "0.1.0"
VERL_VERSION = "0.9.1"

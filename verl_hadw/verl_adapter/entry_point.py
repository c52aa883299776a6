"""Entry-point target of the ``verl.plugins`` group: registers ``hadw`` and ``dgpo`` in verl.

verl imports this module at the end of ``import verl`` in every process (the ``python -m`` process, the
TaskRunner actor, the workers). It must stay light and idempotent: it imports the estimators, whose decorators
register them, and puts the gdpo/dgpo slip check in front of verl's own ``gdpo`` (``gdpo_slip``). It changes
nothing else in verl: the metrics hook waits for the first hadw/dgpo call (``metrics.enable``). No Ray call, no
file I/O.
"""

from verl_hadw.verl_adapter import estimators
from verl_hadw.verl_adapter.gdpo_slip import guard_verl_gdpo

guard_verl_gdpo()

ESTIMATORS = ("hadw", "dgpo")

__all__ = ["ESTIMATORS", "estimators"]

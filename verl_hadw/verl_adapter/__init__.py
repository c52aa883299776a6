"""verl's adapter: HA-DW and DGPO as verl estimators, over the framework-free core (``verl_hadw.core``).

Everything that knows verl lives here, in one package (the template for another framework's adapter, beside
``verl_hadw.trl``): the registered estimators and the ``verl.plugins`` entry point; the checkpoint callback; the
start-up checks, run once per configuration; the metrics hook and the step resolver; the anchor client, its Ray
store and both checkpoint back-ends (v1 files, legacy snapshots); verl's words for the core's messages.

Named ``verl_adapter``, not ``verl``: a module named ``verl`` inside the package would shadow the real ``verl``
for any tool that puts ``verl_hadw/`` on ``sys.path`` (a script run from inside it), and ``verl_hadw.verl.x`` reads
as verl's own module in tracebacks. Importing it without verl installed fails with one line naming the install;
with a verl outside ``VERL_RANGE`` (0.8.0, 0.10) it raises ``UnsupportedVerlError`` naming the installed version
and the range (``verl_hadw.verl_support``).
"""

from verl_hadw.core.framework import require

require("verl", "verl_hadw.verl_adapter", "verl")

from verl_hadw.verl_support import check as _check_verl  # noqa: E402  (after require: verl is there)

_check_verl()

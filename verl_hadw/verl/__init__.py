"""verl's adapter: HA-DW and DGPO as verl advantage estimators, over the framework-free core (``verl_hadw.core``).
Importing it without verl fails with one line naming the install; a verl outside ``VERL_RANGE`` raises
``UnsupportedVerlError`` (``verl_hadw.verl.support``)."""

from verl_hadw.core.framework import require

require("verl", "verl_hadw.verl", "verl")

from verl_hadw.verl.support import check as _check_verl  # noqa: E402  (after require: verl is there)

_check_verl()

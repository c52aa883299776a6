"""How the verl client's anchor survives a restart: one interface, two back-ends, chosen when the client is built.

- ``checkpoint_files.CheckpointFiles`` (verl's v1 trainer): the checkpoint callback builds the client with it;
  it restores from ``global_step_N/verl_hadw_anchor.json`` and writes that file at every verl save.
- ``legacy_snapshots.LegacySnapshots`` (``trainer.use_v1=false``, no checkpoint hook): the estimator builds the
  client with it on its first call; it restores the snapshot of the step verl resumed from and writes one after
  every step's observation.
- ``Persistence`` itself (no back-end: unit use, notebooks) keeps nothing; the client then refuses a first
  trainer step > 1 unless ``allow_missing_state`` (a resumed run whose anchor nobody restored).

A back-end never changes the anchor's maths: it resumes through the core's rules (``core.anchor.resume``) and
receives the client's states to write.
"""

from __future__ import annotations

from verl_hadw.core.anchor.resume import missing_anchor
from verl_hadw.core.errors import MissingAnchorStateError
from verl_hadw.core.options import HadwConfig
from verl_hadw.verl_adapter.verl_terms import VERL

__all__ = ["Persistence"]


class Persistence:
    """The interface (and the no-persistence back-end). Subclasses override what their trainer offers."""

    #: ``load`` decides about a resumed run itself (restores, refuses or warns): the client's fresh-start guard
    #: is then not needed.
    handles_resume = False
    #: the anchor goes into every verl checkpoint (the v1 callback's back-end, however the callback was built)
    saves_into_checkpoints = False
    #: the trainer step the run's first estimator call must have, once ``load`` knows it (1 fresh, N + 1 resumed
    #: from step N); None: unknown. Tells a call of another run of the same state_key (``client.check_one_run``).
    first_step: int | None = None

    def load(self, cfg: HadwConfig, step: int | None) -> dict | None:
        """The state to continue from, or None for a fresh anchor.

        ``step``: the trainer step of the client's first call (None: built before training or outside a trainer).
        """
        return None

    def after_step(self, step: int, key: str, state: dict) -> None:
        """Called after every observation of trainer step ``step`` with the anchor's state."""

    def on_checkpoint(self, step: int, key: str, state: dict, folder: str) -> None:
        """verl saved the checkpoint ``folder`` of step ``step``."""

    @staticmethod
    def missing(cfg: HadwConfig, message: str, error: type[MissingAnchorStateError] = MissingAnchorStateError) -> None:
        """No usable saved anchor: raise ``error``, or with ``allow_missing_state`` warn (fresh anchor)."""
        missing_anchor(cfg, message, VERL, error)

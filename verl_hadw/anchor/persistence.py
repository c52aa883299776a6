"""How an anchor survives a restart: one interface, two back-ends, chosen when the client is built.

- ``checkpoint_files.CheckpointFiles`` (verl's v1 trainer): the checkpoint callback builds the client with it;
  it restores from ``global_step_N/verl_hadw_anchor.json`` and writes that file at every verl save.
- ``legacy_snapshots.LegacySnapshots`` (``trainer.use_v1=false``, no checkpoint hook): the estimator builds the
  client with it on its first call; it restores the snapshot of the step verl resumed from and writes one after
  every step's observation.
- ``Persistence`` itself (no back-end: unit use, notebooks) keeps nothing; the client then refuses a first
  trainer step > 1 unless ``allow_missing_state`` (a resumed run whose anchor nobody restored).

A back-end never changes the anchor's maths: it hands the client a saved ``AnchorState.to_dict()`` and receives
the client's states to write.
"""

from __future__ import annotations

import dataclasses
import logging

from verl_hadw.anchor.compatibility import ADV_ESTIMATOR, STATE_KEY, anchor_options, check_resume
from verl_hadw.anchor.file_format import PAYLOAD_KEYS
from verl_hadw.errors import FRESH_ANCHOR_WARNING, MissingAnchorStateError
from verl_hadw.options import HadwConfig

__all__ = ["Persistence", "continue_under", "check_saved_options"]

logger = logging.getLogger(__name__)


class Persistence:
    """The interface (and the no-persistence back-end). Subclasses override what their trainer offers."""

    #: ``load`` decides about a resumed run itself (restores, refuses or warns): the client's fresh-start guard
    #: is then not needed.
    handles_resume = False
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
        if not cfg.allow_missing_state:
            raise error(message)
        logger.warning(f"{message} {FRESH_ANCHOR_WARNING}")


def continue_under(saved: dict, cfg: HadwConfig, options: dict, path: str) -> dict:
    """The state of the checked payload ``saved`` (from ``path``), made to continue under this run's config
    ``cfg`` and options ``options`` (``compatibility.options_of``).

    Both back-ends resume through here, so both apply the same rules (``compatibility``): an option that changes
    the meaning of the saved anchor or the method being trained refuses the resume (``ResumeConflictError``);
    any other change (e.g. ``eta`` raised after a freeze warning, ``window`` changed) keeps the anchor's
    history and continues under this run's config, with one warning naming each changed key (old -> new); keys
    this version does not know (a newer version's options or top-level keys) are ignored with that warning.
    The history (C⁺ and y_t of past steps) is data about the run, valid under any tuning; the freeze warning
    itself tells users to change ``eta``/``eta_min``/``sigma_source``, so refusing those would block the advice.
    A smaller window trims the kept history to ``window + 1`` values (only those are ever read); a larger one
    keeps what was saved and fills up as steps commit.
    """
    check_saved_options(saved, options, path)
    state = dict(saved["state"])
    current = cfg.anchor
    keep = current.window + 1  # what AnchorState keeps: m values for σ_t, one more for the freeze check
    state.update(
        config=dataclasses.asdict(current),
        posteriors=state["posteriors"][-keep:],
        accuracies=state["accuracies"][-keep:],
    )
    return state


def check_saved_options(saved: dict, options: dict, path: str) -> None:
    """Apply the resume rules (``compatibility``) to the checked payload ``saved`` of ``path`` against this run's
    ``options``: a changed meaning (the estimator included) raises ``ResumeConflictError``, tuning warns.

    A file with an anchor state was written by HA-DW, whether or not it records ``algorithm.adv_estimator`` (files
    of older versions do not); an options-only file (``state: null``) records the estimator that wrote it.
    """
    state = saved["state"]
    recorded_all = state is None or state["schema_version"] != 1
    if recorded_all:
        recorded = dict(saved["options"])
    else:  # schema 1 recorded the anchor options and the state key only
        recorded = {**anchor_options(state["config"]), STATE_KEY: saved["state_key"]}
    if state is not None:
        recorded.setdefault(ADV_ESTIMATOR, "hadw")
    check_resume(recorded, recorded_all, options, path, sorted(saved.keys() - set(PAYLOAD_KEYS)))

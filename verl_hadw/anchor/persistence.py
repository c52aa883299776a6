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

from verl_hadw.errors import FRESH_ANCHOR_WARNING, MissingAnchorStateError
from verl_hadw.options import AnchorConfig, HadwConfig

__all__ = ["Persistence", "config_changes", "continue_under"]

logger = logging.getLogger(__name__)


class Persistence:
    """The interface (and the no-persistence back-end). Subclasses override what their trainer offers."""

    #: ``load`` decides about a resumed run itself (restores, refuses or warns): the client's fresh-start guard
    #: is then not needed.
    handles_resume = False

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


def config_changes(saved: dict, current: AnchorConfig) -> list[str]:
    """``key: old -> new`` for every anchor option that differs between a saved state and this run."""
    now = dataclasses.asdict(current)
    return [f"{k}: {saved[k]!r} -> {now[k]!r}" for k in now if k in saved and saved[k] != now[k]]


def continue_under(saved: dict, cfg: HadwConfig, path: str) -> dict:
    """The state of the checked payload ``saved`` (from ``path``), made to continue under this run's config.

    A resume whose anchor config differs from the saved one (e.g. ``eta`` raised after a freeze warning,
    ``window`` changed) keeps the anchor's history and continues under this run's config, with a warning naming
    each changed key (old -> new). The history (C⁺ and y_t of past steps) is data about the run, valid under any
    config; the freeze warning itself tells users to change ``eta``/``eta_min``/``sigma_source``, so refusing
    would block the advice. A smaller window trims the kept history to ``window + 1`` values (only those are
    ever read); a larger one keeps what was saved and fills up as steps commit.
    """
    if saved["state_key"] != cfg.state_key:
        logger.warning(f"restoring anchor '{saved['state_key']}' as algorithm.hadw.state_key='{cfg.state_key}'")
    state, current = dict(saved["state"]), cfg.anchor
    changed = config_changes(state["config"], current)
    if changed:
        logger.warning(
            f"{path} was saved under another algorithm.hadw.anchor config ({'; '.join(changed)}): the anchor "
            "keeps its history and continues under this run's config"
        )
    keep = current.window + 1  # what AnchorState keeps: m values for σ_t, one more for the freeze check
    state.update(
        config=dataclasses.asdict(current),
        posteriors=state["posteriors"][-keep:],
        accuracies=state["accuracies"][-keep:],
    )
    return state

"""What the plugin keeps per process in ``PROCESS`` (anchor clients, buffered metrics, checked configs), and verl's
current step. verl calls the estimators as plain functions: whatever must outlive a call lives here."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from verl_hadw.core.metric_values import MetricBuffer


@dataclass
class ProcessState:
    anchors: dict[str, Any] = field(default_factory=dict)  # state_key -> anchor_store.client.AnchorClient
    # state_key -> [(owner, last step)] of clients another run replaced: a later call of theirs is refused
    retired_anchors: dict[str, list] = field(default_factory=dict)
    pending_metrics: MetricBuffer = field(default_factory=MetricBuffer)  # the estimators' per-step metrics
    metrics_opted_out: bool = False  # algorithm.hadw.log_metrics=false was seen: stay out of verl's Tracking
    last_stateless_step: int = 0  # stateless_step's counter outside a trainer
    estimator_checked_run: Any = None  # the fit() whose checkpoint an estimator without an anchor checked
    warned: set[str] = field(default_factory=set)  # warnings given once per process
    checked_configs: dict = field(default_factory=dict)  # parsed and checked configurations, most recent last
    # cpu.patches applied to verl's code: kept by reset (reapplying a patch would wrap verl's function twice)
    applied_patches: set[str] = field(default_factory=set)

    def reset(self) -> None:
        """Start afresh as a new process (tests, notebooks); applied patches and the Tracking.log hook stay."""
        self.__init__(applied_patches=self.applied_patches)
        skip = sys.modules.get("verl.utils.skip.skip_manager")
        if skip is not None:
            skip.SkipManager.set_step(-1)  # verl internal: SkipManager (checked on verl 0.9.0, 0.9.1)


PROCESS = ProcessState()
reset = PROCESS.reset  # ``process_state.reset()``: PROCESS is reset in place, never replaced


def trainer_step() -> int | None:
    """verl's current global step (``SkipManager.step``, set before a step's advantages), or None outside a trainer."""
    from verl.utils.skip.skip_manager import SkipManager
    step = getattr(SkipManager, "step", -1)  # verl internal: SkipManager.step (checked on verl 0.9.0, 0.9.1)
    return step if isinstance(step, int) and step > 0 else None


def trainer_run() -> object | None:
    """A token of verl's current ``fit()``, compared by identity: ``SkipManager.init`` (called at the start of
    ``fit()``) replaces ``SkipManager.skip_instances`` with a new dict."""
    from verl.utils.skip.skip_manager import SkipManager
    return getattr(SkipManager, "skip_instances", None)  # verl internal (checked on verl 0.9.0, 0.9.1)


def stateless_step() -> int:
    """The step dgpo files its metrics under: the trainer's, or the previous such step + 1 outside a trainer."""
    step = trainer_step()
    PROCESS.last_stateless_step = step if step is not None else PROCESS.last_stateless_step + 1
    return PROCESS.last_stateless_step

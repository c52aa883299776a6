"""Everything this plugin keeps per process, in one object with one ``reset``.

verl calls the estimators as plain functions, so what must outlive a call lives here: the anchor clients (one
per ``state_key``), the per-step metric buffer and the metrics opt-out, the step counter of estimators without
an anchor, and the verl patches the CPU path applied. Nothing else in the package keeps module-level state.
Pure Python: it holds the objects, the modules of verl's adapter that own their meaning use them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from verl_hadw.core.metric_values import MetricBuffer

__all__ = ["ProcessState", "PROCESS", "reset"]


@dataclass
class ProcessState:
    anchors: dict[str, Any] = field(default_factory=dict)  # state_key -> anchor.client.AnchorClient
    # state_key -> [(owner, last step)] of clients another run replaced: a later call of theirs is refused
    retired_anchors: dict[str, list] = field(default_factory=dict)
    pending_metrics: MetricBuffer = field(default_factory=MetricBuffer)  # the estimators' per-step metrics
    metrics_opted_out: bool = False  # algorithm.hadw.log_metrics=false was seen: stay out of verl's Tracking
    last_stateless_step: int = 0  # steps.stateless_step's counter outside a trainer
    # verl's fit() whose checkpoint an estimator without an anchor checked (estimator_record: by identity)
    estimator_checked_run: Any = None
    warned: set[str] = field(default_factory=set)  # start-up warnings given once (config_check.warn_unsaved_anchor)
    # the configurations whose options were parsed and checked (run_options.run_options), most recent last
    checked_configs: dict = field(default_factory=dict)
    # cpu.patches applied to verl's code: kept by reset, since a patch cannot be taken back (reapplying it would
    # wrap verl's function twice)
    applied_patches: set[str] = field(default_factory=set)

    def reset(self) -> None:
        """Forget the anchors, buffered metrics, the opt-out, the step counter, the warnings given and the checked
        configurations, and unset
        verl's step (``SkipManager.step``, which the estimators read) if verl is loaded: a fresh process, for tests
        and notebooks. Applied patches stay (see above); the Tracking.log hook stays installed."""
        self.anchors.clear()
        self.retired_anchors.clear()
        self.pending_metrics.clear()
        self.metrics_opted_out = False
        self.last_stateless_step = 0
        self.estimator_checked_run = None
        self.warned.clear()
        self.checked_configs.clear()
        skip = sys.modules.get("verl.utils.skip.skip_manager")
        if skip is not None:
            skip.SkipManager.set_step(-1)


PROCESS = ProcessState()


def reset() -> None:
    """``PROCESS.reset()``."""
    PROCESS.reset()

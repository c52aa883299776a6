"""The paper-reproduction runs the config tests check, composed once per session (tests/ has no __init__.py)."""

from __future__ import annotations

import functools

from repo_paths import ROOT

from verl_hadw.repro import catalogue as K
from verl_hadw.repro import compose as C

# the released-code runs (K.RELEASED_CODE_RUNS) are no paper rows: tests/repro/test_released_variant.py checks them
RUN_FILES = sorted(
    p.stem for p in (ROOT / "configs").glob("*/experiments/*.yaml") if p.stem not in K.RELEASED_CODE_RUNS
)


@functools.cache
def composed_runs() -> dict:
    """Every run composed once (through the run files' own pkg://verl.trainer.config search path), shared by the
    test modules that read them (none changes them)."""
    return {run: C.compose_run(run, fast=False) for run in RUN_FILES}

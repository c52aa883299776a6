"""A TRL HA-DW run on the toy task that is killed during checkpoint-2's save (``kill_during_save``; the moment in
``VERL_HADW_KILL_AT``): ``python trl_killed_run.py OUTPUT_DIR [ESTIMATOR]``. Its config is ``killed_config``, the
one the test's uninterrupted and resumed runs use."""

from __future__ import annotations

import sys

from kill_during_save import install  # noqa: F401  (armed on import, from the environment)
from trl_helpers import killed_config, trainer

if __name__ == "__main__":
    output_dir, estimator = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "hadw")
    trainer(killed_config(output_dir, estimator)).train()
    raise SystemExit(f"the run was not killed: no kill moment of checkpoint-2's save was reached ({output_dir})")

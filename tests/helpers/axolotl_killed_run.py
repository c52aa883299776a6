"""An Axolotl run killed (SIGKILL) during checkpoint-2's save, at the moment in ``VERL_HADW_KILL_AT``
(``kill_during_save``): ``python axolotl_killed_run.py CONFIG`` runs ``axolotl.cli.train``, the module ``axolotl
train`` runs, with the kill armed first."""

import runpy
import sys

from kill_during_save import install  # noqa: F401  (armed on import, from the environment)

if __name__ == "__main__":
    sys.argv = ["axolotl.cli.train", *sys.argv[1:]]
    runpy.run_module("axolotl.cli.train", run_name="__main__")
    raise SystemExit(f"the run was not killed: no kill moment of checkpoint-2's save was reached ({sys.argv[1]})")

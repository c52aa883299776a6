"""The Axolotl environment: the ``[axolotl]`` extra installs into an environment where Axolotl went first and
changes nothing there; that environment passes the Axolotl adapter's tests and those of ``tests/hf_trainer/``.
Axolotl pins its TRL (0.19: ``trl==1.9.0``): it never shares the test environment.

    python tests/helpers/axolotl_environment.py VERSION WORKDIR

A script, not a test file: the session's stage runs it in the background beside the other tests, and
``tests/axolotl/test_axolotl_environment.py`` reads its exit code and output; an assertion here fails it.

A fresh virtualenv gets Axolotl ``VERSION`` first, with CPU torch, as an Axolotl user's machine has them (uv lays it,
from its cache); then this checkout's ``[axolotl]`` extra, with pip. ``pip freeze`` before and after: ``verl-hadw``
added, nothing else added or changed, none of verl, Ray or vLLM. Then ``tests/axolotl/`` (the plugin's keys through
Axolotl's config loading; runs through ``axolotl train`` and its CLI function: the documented YAML, a kill during a
save and the resume, DGPO, the switched-off run against Axolotl's own GRPO) and ``tests/hf_trainer/`` run there
against the installed package. The runs' records are kept under ``WORKDIR/records`` for the reader's comparison with
TRL's adapter and verl's estimator.
"""

import sys
import time
from pathlib import Path

from environment_shell import checkout_copy, install_extra, lay, report, run_tests, sh
from repo_paths import ROOT, TESTS

FORBIDDEN = {"verl", "ray", "vllm"}
FOLDERS = ["axolotl", "hf_trainer"]  # the tests/ folders run here
READER = TESTS / "axolotl" / "test_axolotl_environment.py"  # reads this script's output (in the test environment)


def main(version: str, workdir: Path) -> int:
    timings, tag = {}, f"[axolotl {version}]"
    start = time.monotonic()
    python = lay(workdir / "venv", f"axolotl=={version}", constraints=ROOT / "constraints-cpu.txt")
    timings["axolotl first"] = time.monotonic() - start

    start = time.monotonic()
    after = install_extra(python, checkout_copy(ROOT, workdir / "source"), "axolotl", tag)
    timings["the [axolotl] extra"] = time.monotonic() - start
    assert after["axolotl"] == version and not FORBIDDEN & set(after), sorted(FORBIDDEN & set(after))
    sh(python, "-c", "import sys, verl_hadw.axolotl.grpo_trainer; loaded = set(sys.modules); "
                     "assert not {'verl', 'ray', 'verl_hadw.trl', 'verl_hadw.verl'} & loaded, loaded")

    start = time.monotonic()
    keep = {"AXOLOTL_ENV_KEEP": str(workdir / "records")}
    out = run_tests(workdir / "venv", after, ROOT, FOLDERS, READER, workdir, env=keep)
    timings["pytest (tests/axolotl, tests/hf_trainer)"] = time.monotonic() - start
    report(tag, out, ("PASSED ", "[axolotl train]"), workdir, timings)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2]).resolve()))

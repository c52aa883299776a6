"""The ms-swift environments: the ``[swift]`` extra installs into an environment where ms-swift went first and changes
nothing there; that environment passes the swift adapter's tests and the core's. One environment per end of
``SWIFT_RANGE`` (ms-swift 4.x pins ``trl<1.0``: it never shares the test environment, which holds TRL 1.x).

    python tests/helpers/swift_environment.py VERSION WORKDIR [--lean]

A script, not a test file: the session's stage runs it in the background beside the other tests (it waits on pip
much of its time), and ``tests/swift/test_swift_environment.py`` reads its exit code and output; an assertion
here fails it.

A fresh virtualenv gets ms-swift ``VERSION`` first, with CPU torch and ``msgspec`` (swift imports it without
declaring it), as a swift user's machine has them (uv lays it, from its cache); then this checkout's ``[swift]``
extra, with pip. ``pip freeze`` before and
after: ``verl-hadw`` added, nothing else added or changed, none of verl, Ray, vLLM or TRL's adapter's TRL 1.x. Then
pytest (pinned to what is installed), and ``tests/swift/`` (the adapter, end to end through swift's pipeline
and ``verl-hadw-swift rlhf`` on two CPU ranks; but the environments' reader), ``tests/core/`` (the equations, the
anchor, the file format) and ``tests/hf_trainer/`` run there against the installed package. The HA-DW / DGPO runs'
records are kept under ``WORKDIR/records`` for ``test_swift_environment.py``'s comparison with TRL's adapter and
verl's estimator. ``--lean`` (the oldest release's
environment, for CI's time): the command-line run on one rank instead of two, the switched-off comparison under swift's
``dapo`` loss only, the kill during a save at one moment (``trainer_state``), and not the packed batch (built by
swift 4.6's collate); the newest release's environment runs all of it.
"""

import sys
import time
from pathlib import Path

from environment_shell import checkout_copy, install_extra, lay, report, run_tests, sh
from repo_paths import ROOT, TESTS

FORBIDDEN = {"verl", "ray", "vllm", "wandb"}
FOLDERS = ("core", "swift", "hf_trainer")  # the tests/ folders run here, those present
READER = TESTS / "swift" / "test_swift_environment.py"  # reads this script's output (in the test environment)
PACKED = TESTS / "swift" / "test_swift_packed_batches.py"  # swift 4.6's collate: not in the oldest environment


def main(version: str, workdir: Path, lean: bool = False) -> int:
    timings, tag = {}, f"[swift {version}]"
    venv = workdir / "venv"
    start = time.monotonic()
    python = lay(venv, f"ms-swift=={version}", "msgspec", constraints=ROOT / "constraints-cpu.txt")
    timings["ms-swift first"] = time.monotonic() - start

    start = time.monotonic()
    source = checkout_copy(ROOT, workdir / "source")  # the other environment builds from the checkout meanwhile
    after = install_extra(python, source, "swift", tag)
    timings["the [swift] extra"] = time.monotonic() - start
    assert after["ms-swift"] == version and "trl" in after  # and the rest as before (install_extra)
    assert not FORBIDDEN & set(after), sorted(FORBIDDEN & set(after))

    sh(python, "-c", "import sys, verl_hadw.swift.grpo_trainer; loaded = set(sys.modules); "
                     "assert not {'verl', 'ray', 'verl_hadw.trl', 'verl_hadw.verl'} & loaded, loaded")

    start = time.monotonic()
    subset = ["-k", "(not switched_off or dapo) and (not moment_of_a_save or trainer_state)",
              "--ignore", str(PACKED.relative_to(ROOT))] if lean else []
    out = run_tests(venv, after, ROOT, list(FOLDERS), READER, workdir, *subset,
                    env={"SWIFT_ENV_KEEP": str(workdir / "records"), "SWIFT_ENV_RANKS": "1" if lean else "2"})
    folders = [name for name in FOLDERS if (TESTS / name).is_dir()]
    timings[f"pytest ({' '.join(folders)})"] = time.monotonic() - start
    report(tag, out, ("PASSED ", "[swift environment]"), workdir, timings)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2]).resolve(), lean="--lean" in sys.argv[3:]))

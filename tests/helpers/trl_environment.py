"""The TRL extra installs into an environment that already has TRL and changes nothing there; the lowest TRL of the
range passes the TRL adapter's own tests there. The matrix's lowest-TRL environment (the test environment holds the
newest TRL of the range).

    python tests/helpers/trl_environment.py WORKDIR

A script, not a test file: the session's stage runs it in the background beside the other tests, and
``tests/trl/test_trl_environment.py`` reads its exit code and output; an assertion here fails it.

A fresh virtualenv gets the lowest release of ``TRL_RANGE`` first (with CPU torch, as a TRL user's machine would
have it), then this checkout's ``[trl]`` extra. ``pip freeze`` before and after: additions only, no installed version
changed, and none of verl, Ray, vLLM or wandb. Then pytest and PEFT (pinned to what is installed), and the TRL
adapter's folder ``tests/trl/`` runs there against the installed package (but its reader of this script), with the
core's own tests (``tests/core/``) and, once it has tests, ``tests/hf_trainer/`` (what TRL's and ms-swift's adapters
share): among them ``examples/trl_hadw.py`` as the docs
show it, a run saved and resumed equal to the run that never stopped, bit for bit, and each TRL feature
(``test_trl_features.py``). TRL goes in first laid by uv from its cache (``environment_shell.lay``), the extra with
pip, so the cost is the installs and the tests themselves: the script prints its timings.
"""

import re
import sys
import time
from pathlib import Path

from environment_shell import freeze, lay, pins, sh
from repo_paths import ROOT, TESTS

FORBIDDEN = {"verl", "ray", "vllm", "wandb"}
FOLDERS = ("core", "trl", "hf_trainer")  # the tests/ folders run here, those present
READER = TESTS / "trl" / "test_trl_environment.py"  # reads this script's output: not a test to run here


def lowest_trl() -> str:
    """The lowest release ``TRL_RANGE`` admits (its ``>=`` bound)."""
    from verl_hadw import TRL_RANGE

    (low,) = re.findall(r">=\s*([0-9][0-9.]*)", TRL_RANGE)
    return low


def main(tmp_path: Path) -> int:
    timings, low = {}, lowest_trl()
    start = time.monotonic()
    # requests: TRL 1.0's GRPOTrainer imports it (trl/generation/vllm_client.py) without declaring it, so a TRL user
    # whose GRPOTrainer works has it (transformers 5 no longer brings it)
    python = lay(tmp_path / "venv", f"trl=={low}", "requests", constraints=ROOT / "constraints-cpu.txt")
    timings["trl first"] = time.monotonic() - start
    before = freeze(python)
    assert before["trl"] == low

    start = time.monotonic()
    sh(python, "-m", "pip", "install", "-q", "--no-compile", f"{ROOT}[trl]")  # no constraints: nothing may need one
    timings["the [trl] extra"] = time.monotonic() - start
    after = freeze(python)
    # in CI's output (tests/trl/test_trl_environment.py prints this script's output), passed or not
    print("\n[trl install] pip freeze before: " + " ".join(f"{k}=={v}" for k, v in sorted(before.items())))
    print("[trl install] pip freeze after:  " + " ".join(f"{k}=={v}" for k, v in sorted(after.items())))

    changed = {k: (v, after.get(k)) for k, v in before.items() if after.get(k) != v}
    assert changed == {}, f"installed versions changed: {changed}"
    added = sorted(after.keys() - before.keys())
    assert "verl-hadw" in added
    assert not FORBIDDEN & set(added), f"the TRL extra brought {sorted(FORBIDDEN & set(added))}"
    print(f"[trl install] added: {added}", flush=True)

    sh(python, "-c", "import sys, verl_hadw.trl; assert 'verl' not in sys.modules and 'ray' not in sys.modules")

    # the TRL adapter's own tests, against the installed package (pytest's script puts no checkout on sys.path):
    # among them the documented example (test_trl_example.py) and the resume, bit for bit (test_trl_training.py).
    # pytest, PEFT for test_trl_features.py (TRL's optional dependency) and mypy for test_trl_types.py, pinned to change
    # nothing installed
    start = time.monotonic()
    sh(python, "-m", "pip", "install", "-q", "--no-compile", "-c", pins(after, tmp_path / "installed.txt"), "pytest",
       "peft", "mypy")
    # and the core's own tests (the equations, the anchor, the file format): they need no verl. By folder, by path
    folders = [str((TESTS / name).relative_to(ROOT)) for name in FOLDERS if (TESTS / name).is_dir()]
    # the kill during a save at one moment, and no run per loss type (the switched-off runs train four loss types
    # bit for bit against TRL's own): every moment and loss type run at the newest TRL, in the test environment
    lean = ["-k", "(not moment_of_a_save or trainer_state) and not each_loss_type"]
    out = sh(tmp_path / "venv" / "bin" / "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--basetemp",
             tmp_path / "pytest", "--ignore", READER.relative_to(ROOT), *lean, *folders, cwd=ROOT)
    timings[f"pytest ({' '.join(folders)})"] = time.monotonic() - start
    print("\n".join(line for line in out.splitlines() if line.startswith("PASSED ") or " passed" in line), flush=True)
    print(f"[trl install] TRL {low}; timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    print("[trl install] every check passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))

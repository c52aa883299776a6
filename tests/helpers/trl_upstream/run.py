"""Run TRL's own ``tests/test_grpo_trainer.py`` with TRL's ``GRPOTrainer`` and with ``HadwGRPOTrainer``, on the same
local stand-in models and data, and list every test whose outcome differs.

TRL's test files are not part of this repository (TRL's code stays in TRL's repository; the PyPI sdist has no tests):
give a clone of https://github.com/huggingface/trl (``--trl-git``, a work tree or a bare git directory) and the
revision to take them from (``--rev``: the release's tag, e.g. ``v1.9.0``). ``test_grpo_trainer.py``,
``testing_utils.py``, ``conftest.py`` and ``__init__.py`` of that revision's ``tests/`` are written, unchanged,
under ``--work`` (default: ``$TMPDIR/trl-upstream``), beside a one-line ``pytest.ini``; the installed TRL is
whatever this Python has.

    python tests/helpers/trl_upstream/run.py --trl-git ~/src/trl --rev v1.9.0      # the whole file, both trainers
    python tests/helpers/trl_upstream/run.py --trl-git ~/src/trl --rev v1.9.0 --subset ci --trainers hadw  # CI subset

What the two runs share and what differs is in ``plugin.py`` (the names patched, the success threshold HA-DW is
given, the stand-ins) and ``standins.py``. The two pytest processes run side by side (``--jobs``), each on one torch
thread; each one's wall time and user+sys CPU seconds are printed. Exit status: 0 when every difference is listed in
``EXPECTED`` below with its reason (docs/trl.md lists the same) and, with ``--subset ci``, every selected test passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = ("__init__.py", "conftest.py", "testing_utils.py", "test_grpo_trainer.py")

# The subset for a CI that can reach a TRL clone (this project's cannot: it runs tests/trl/test_trl_features.py, our
# own test of each of these features): one or two tests per TRL feature the override meets (``plugin.matches``: a
# name selects all its parameter sets, "name[a]" those with a; TRL 1.0-1.6 name them test_training_*). Cost:
# docs/trl.md.
CI_SUBSET = {
    "test_init_minimal": "args omitted (the default config)",
    "test_train_loss_types[dapo]": "loss type: dapo (TRL's default)",
    "test_train_loss_types[bnpo]": "loss type: bnpo",
    "test_train_loss_types[sapo]": "loss type: sapo",
    "test_train_with_eval": "evaluation (the anchor previewed, never moved)",
    "test_train_peft_config": "PEFT",
    "test_train_peft_with_gradient_checkpointing": "gradient checkpointing",
    "test_train_multiple_iterations": "num_iterations > 1 (the anchor once per generation)",
    "test_train_beta_non_zero": "KL (beta > 0)",
    "test_train_multiple_reward_funcs_with_weights": "several reward functions, weighted",
    "test_train_reward_func_conversational": "a reward function on conversational data",
}

# test (without its parameters, or with them) -> why HadwGRPOTrainer's outcome differs from TRL's (docs/trl.md)
EXPECTED = {
    "test_reward_metric_reflects_reward_weights[normalize_then_sum]":
        "refused: multi_objective_aggregation='normalize_then_sum' normalises each reward on its own (GDPO)",
    "test_train_normalize_then_sum_aggregation":
        "refused: multi_objective_aggregation='normalize_then_sum' normalises each reward on its own (GDPO)",
    "test_train_scale_rewards[batch]":
        "refused: scale_rewards='batch' has no counterpart in HA-DW (it normalises within each group)",
}


def materialise(trl_git: str, rev: str, work: Path) -> Path:
    """Write the revision's test files under ``work/<rev>/tests`` (from the clone, unchanged); returns the folder."""
    git = ["git", "-C", trl_git] if (Path(trl_git) / ".git").exists() else ["git", "--git-dir", trl_git]
    commit = subprocess.run([*git, "rev-parse", f"{rev}^{{commit}}"], capture_output=True, text=True, check=True)
    out = work / rev
    (out / "tests").mkdir(parents=True, exist_ok=True)
    for name in FILES:
        show = [*git, "show", f"{rev}:tests/{name}"]
        text = subprocess.run(show, capture_output=True, text=True, check=True).stdout
        (out / "tests" / name).write_text(text)
    (out / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: TRL's slow tests\n    hadw_ci: CI subset\n")
    init = subprocess.run([*git, "show", f"{rev}:trl/__init__.py"], capture_output=True, text=True).stdout
    version = next(iter(re.findall(r'__version__ = "([^"]+)"', init)), "unknown")  # the revision's own, not a tag's
    (out / "REVISION").write_text(f"{rev} {commit.stdout.strip()} (TRL {version})\n")
    return out


def pytest_command(rundir: Path, trainer: str, subset: str, junit: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "tests/test_grpo_trainer.py", "-p", "plugin", "-p", "no:cacheprovider",
           "-q", "-rfE", f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    if subset == "ci":
        cmd += ["-m", "hadw_ci"]
    return cmd


def run_both(rundir: Path, standins: Path, trainers: list[str], subset: str, jobs: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_CACHE": str(standins / "hub"), "TRL_UPSTREAM_STANDINS": str(standins),
           "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1",
           "TRL_UPSTREAM_CI": " ".join(CI_SUBSET), "HF_HUB_DISABLE_TELEMETRY": "1"}
    pending, results = list(trainers), {}
    running: dict[int, tuple[str, subprocess.Popen, float, Path]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            trainer = pending.pop(0)
            junit = rundir / f"junit-{trainer}-{subset}.xml"
            log = open(rundir / f"log-{trainer}-{subset}.txt", "w")
            proc = subprocess.Popen(pytest_command(rundir, trainer, subset, junit), cwd=rundir, stdout=log,
                                    stderr=subprocess.STDOUT, env={**env, "TRL_UPSTREAM_TRAINER": trainer})
            running[proc.pid] = (trainer, proc, time.monotonic(), junit)
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        trainer, proc, start, junit = running.pop(pid)
        results[trainer] = {"wall_s": round(time.monotonic() - start, 1),
                            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                            "exit": os.waitstatus_to_exitcode(status), "outcomes": outcomes(junit)}
        (rundir / f"result-{trainer}-{subset}.json").write_text(json.dumps(results[trainer], indent=1))
    return results


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """test id -> (passed | failed | error | skipped | xfailed, the first line of its message)."""
    if not junit.exists():
        return {}
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        kind, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                message = (child.get("message") or child.text or "").strip().splitlines()[0][:300] if (
                    child.get("message") or child.text) else ""
                kind = {"failure": "failed", "error": "error"}.get(child.tag, "skipped")
                if child.tag == "skipped" and child.get("type") == "pytest.xfail":
                    kind = "xfailed"
                if child.tag in ("failure", "error"):
                    break
        out[name] = (kind, message)
    return out


def counts(result: dict) -> dict[str, int]:
    c = {k: 0 for k in ("passed", "failed", "error", "skipped", "xfailed")}
    for kind, _ in result["outcomes"].values():
        c[kind] += 1
    return c


def expected_reason(test_id: str) -> str | None:
    from plugin import matches

    return next((why for selector, why in EXPECTED.items() if matches(selector, test_id)), None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trl-git", required=True, help="a clone of huggingface/trl (work tree or bare git directory)")
    p.add_argument("--rev", required=True, help="the revision whose tests/ to run (a release tag, e.g. v1.9.0)")
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "trl-upstream"))
    p.add_argument("--trainers", default="trl,hadw")
    p.add_argument("--subset", choices=("all", "ci"), default="all")
    p.add_argument("--jobs", type=int, default=2)
    # a trainer left out of --trainers is compared from its last run of the same revision and subset, if any
    args = p.parse_args(argv)

    import trl

    sys.path.insert(0, str(HERE))
    from standins import build

    work = Path(args.work)
    rundir = materialise(args.trl_git, args.rev, work)
    standins = work / "standins"
    build(standins)
    trainers = [t for t in args.trainers.split(",") if t]  # "": compare the saved runs only
    results = run_both(rundir, standins, trainers, args.subset, args.jobs)
    for t in ("trl", "hadw"):  # a trainer not run now: its last run of this revision and subset, if any
        saved = rundir / f"result-{t}-{args.subset}.json"
        if t not in results and saved.exists():
            results[t] = json.loads(saved.read_text())
            trainers.append(t)

    revision = (rundir / "REVISION").read_text().strip()
    print(f"\nTRL {trl.__version__}; tests/test_grpo_trainer.py at {revision}; subset {args.subset}")
    print("| trainer | passed | failed | error | skipped | xfailed | wall s | user+sys CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for t in trainers:
        c, r = counts(results[t]), results[t]
        print(f"| {t} | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} | {c['xfailed']} | "
              f"{r['wall_s']} | {r['cpu_s']} |")
    status = 0
    if set(trainers) == {"trl", "hadw"}:
        ours, theirs = results["hadw"]["outcomes"], results["trl"]["outcomes"]
        print("\nDifferences (TRL's trainer -> ours):")
        for test_id in sorted(set(ours) | set(theirs)):
            a, b = theirs.get(test_id, ("absent", "")), ours.get(test_id, ("absent", ""))
            if a[0] == b[0]:
                continue
            reason = expected_reason(test_id)
            if reason is None and b[0] != "passed":
                status = 1
            print(f"- {test_id}: {a[0]} -> {b[0]}: {reason or 'UNEXPECTED: ' + b[1]}")
        both = sorted(t for t in theirs
                      if theirs[t][0] in ("failed", "error") and ours.get(t, ("",))[0] == theirs[t][0])
        print(f"\nFailed under both trainers ({len(both)}):")
        for test_id in both:
            print(f"- {test_id}: {theirs[test_id][1]}")
    if args.subset == "ci":
        for t in trainers:
            bad = {k: v for k, v in results[t]["outcomes"].items() if v[0] != "passed"}
            if bad or not results[t]["outcomes"]:
                status = 1
                print(f"\nCI subset under {t}: not all passed: {bad or 'no test ran'}")
    (rundir / f"summary-{args.subset}.json").write_text(json.dumps(
        {"trl": trl.__version__, "revision": revision, "results": results}, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())

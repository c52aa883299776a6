"""``bench_estimators.py`` for two versions of the code in one run: a git ref (before) and this tree (after).

Each round runs this tree's benchmark once per version, each in a fresh process that imports that version's package
(the ref is checked out with ``git worktree`` into a temporary folder and put first on ``PYTHONPATH``), in
alternating order, so load on the machine falls on both alike. Printed per estimator: its ratio to the floor in
each version (the median over rounds of the ratio each run measured within its own rounds) and after / before.
Run: ``python benchmarks/bench_estimators_refs.py REF [--rounds 3] [--size 8192]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)", re.M)
# verl_hadw.register, in both versions: registers the estimators of the version on PYTHONPATH
RUN = "import runpy, sys, verl_hadw.register; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def bench(tree: Path, size: int, repeats: int, mask: str = "float") -> dict[str, float]:
    """estimator -> ratio to the floor, from one run of this tree's benchmark on ``tree``'s package."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]),
               VERL_USE_EXTERNAL_PLUGINS="none")  # the installed entry point names one version: import its alias
    cmd = [sys.executable, "-c", RUN, str(ROOT / "benchmarks" / "bench_estimators.py"), "--sizes", str(size),
           "--repeats", str(repeats), "--threads", "1", "--clock", "cpu", "--mask", mask]
    proc = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the benchmark failed in {tree}:\n{proc.stderr[-3000:]}")
    out = proc.stdout
    return {name: float(ratio) for _, name, _, ratio in ROW.findall(out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ref", help="the git ref measured as 'before'")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--mask", choices=("float", "int64"), default="float")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_refs_") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before), args.ref], check=True)
        try:
            trees = {"before": before, "after": ROOT}
            ratios: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for round_ in range(args.rounds):
                for version in (("before", "after") if round_ % 2 == 0 else ("after", "before")):
                    ratios[version].append(bench(trees[version], args.size, args.repeats, args.mask))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=True)
    print(f"N={args.size}, L=4096, 1 thread, CPU clock, {args.mask} mask; x floor, median of {args.rounds} runs of "
          f"each version (before = {args.ref})")
    print(f"{'estimator':>16} {'before':>8} {'after':>8} {'after/before':>13}")
    for name in ratios["after"][0]:
        if name == "floor":
            continue
        b = statistics.median(r[name] for r in ratios["before"])
        a = statistics.median(r[name] for r in ratios["after"])
        print(f"{name:>16} {b:>8.3f} {a:>8.3f} {a / b:>13.3f}")


if __name__ == "__main__":
    main()

"""The core's estimator calls at a git revision (before) and in this tree (after), timed alternately in one process.

The revision's ``verl_hadw/core`` is extracted with ``git archive`` and imported as the package ``core_before``.
Each round calls ``prepare_batch`` + ``hadw_call`` / ``dgpo_call`` of both versions and the floor once each, in a
fresh random order; printed per estimator: the median ms of each version and the median of the per-round ratio
after / before. The two versions' advantages are checked equal first.
Run: ``python benchmarks/bench_estimators_refs.py REV [--quick] [--threads 1] [--clock cpu] [--mask int64]``.
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from bench_estimators import host_clock, make_batch, timed_round_robin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def core_at(rev: str, folder: Path) -> str:
    """Extract ``verl_hadw/core`` of ``rev`` into ``folder`` as the package ``core_before``; its name."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "verl_hadw/core"], check=True, capture_output=True)
    tarfile.open(fileobj=io.BytesIO(tar.stdout)).extractall(folder)
    package = folder / "core_before"
    (folder / "verl_hadw" / "core").rename(package)
    for path in package.rglob("*.py"):
        path.write_text(path.read_text(encoding="utf-8").replace("verl_hadw.core", "core_before"), encoding="utf-8")
    sys.path.insert(0, str(folder))
    return "core_before"


def estimator(package: str, method: str, rewards, mask, index):
    """One estimator call of ``package``'s core: the batch, then the method's call (a fresh anchor each time)."""
    groups = importlib.import_module(f"{package}.groups")
    advantages = importlib.import_module(f"{package}.advantages")
    options = importlib.import_module(f"{package}.options")
    machine = importlib.import_module(f"{package}.anchor.machine")
    hadw_cfg = options.HadwConfig(base="dgpo" if method == "hadw-over-dgpo" else "grpo")
    dgpo_cfg = options.DgpoConfig()

    def call():
        b = groups.prepare_batch(rewards, mask, index, sorted_ids=method != "hadw")
        if method == "dgpo":
            return advantages.dgpo_call(b, dgpo_cfg, True, str)[0]
        state = machine.AnchorState()
        observe = lambda k, n: state.observe(1, 0, k, n)  # noqa: E731  (a repeated call is not counted twice)
        return advantages.hadw_call(b, hadw_cfg, dgpo_cfg, True, observe, str, preview=observe).advantages
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rev", help="the git revision measured as 'before'")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--mask", choices=("float", "int64"), default="float")
    parser.add_argument("--uids", choices=("str", "tensor"), default="str")
    parser.add_argument("--quick", action="store_true", help="N=1024, L=512")
    args = parser.parse_args()
    if args.quick:
        args.size, args.length = 1024, 512
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="core_before_") as tmp:
        before = core_at(args.rev, Path(tmp))
        rewards, mask, index = make_batch(args.size, 8, args.length, uids=args.uids)
        mask = mask.long() if args.mask == "int64" else mask
        methods = ("hadw", "hadw-over-dgpo", "dgpo")
        runs = {"floor": lambda: rewards.sum(-1)[:, None] * mask}
        for method in methods:
            runs[f"{method} before"] = estimator(before, method, rewards, mask, index)
            runs[f"{method} after"] = estimator("verl_hadw.core", method, rewards, mask, index)
            assert torch.equal(runs[f"{method} before"](), runs[f"{method} after"]()), method
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        times = timed_round_robin(runs, args.repeats, timer=host_clock(clock))
    print(f"N={args.size}, L={args.length}, G=8, {args.mask} mask, {args.uids} uids, torch threads="
          f"{torch.get_num_threads()}, {args.clock} clock, {args.repeats} rounds; before = {args.rev}")
    print(f"floor {statistics.median(times['floor']) * 1e3:.2f} ms")
    print(f"{'estimator':>16} {'before ms':>10} {'after ms':>9} {'after/before':>13}")
    for method in methods:
        old, new = times[f"{method} before"], times[f"{method} after"]
        ratio = statistics.median(a / b for a, b in zip(new, old))
        print(f"{method:>16} {statistics.median(old) * 1e3:>10.2f} {statistics.median(new) * 1e3:>9.2f} {ratio:>13.3f}")


if __name__ == "__main__":
    main()

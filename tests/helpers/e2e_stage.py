"""The stage that runs the session's launches of verl's real ``main_ppo``, in a process of its own.

    python tests/helpers/e2e_stage.py --root DIR [--workers 2] NAME ...

runs the named launches of ``e2e_runs.LAUNCHES`` (and the launches they resume from) into ``DIR/<name>/`` and writes,
when each one ends, ``DIR/<name>.json``: its status (``ok`` or ``error`` with the traceback and the run's log tail),
its wall time and where its files are. The tests read those folders (conftest.py's ``e2e`` fixture); the pytest
process holds no launch thread and no Ray driver of theirs.

A launch runs once, however many tests read it. A launch that resumes another (``after=``) follows it in the same
chain; the chains run ``workers`` at a time, the longest first, and a chain stops at its first failure (what resumes a
failed launch fails with its source's error). One Ray start-up at a time passes the start gate: nodes starting
together on a loaded machine miss Ray's fixed 30 s raylet deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

RAY_STARTED = "Started a local Ray instance"  # ray.init's log line once the node is up
START_GATE_TIMEOUT = 25.0  # seconds a launch may hold the start gate without printing RAY_STARTED (Ray: ~7 s)


@dataclass(frozen=True)
class Launch:
    """One launch: ``start(ctx)`` runs it to the end and returns what the tests read (a dict of JSON values)."""

    name: str
    start: Callable[["Context"], dict]
    after: str | None = None  # the launch whose checkpoint this one resumes from
    cost: float = 60.0  # rough seconds on 2 cores: the longest chain starts first
    proves: str = ""  # what the tests read from it (the launch table in docs/cpu.md)


class StartGate:
    """One launch at a time through Ray's start-up. A launch holds the gate until its output shows ``RAY_STARTED``
    (``on_line``), or for at most ``START_GATE_TIMEOUT`` seconds (a launch that never starts Ray)."""

    def __init__(self):
        self.lock = threading.Lock()

    def enter(self) -> Callable[[str], None]:
        """Acquire; returns the ``on_line`` callback that releases on ``RAY_STARTED`` (``.release()`` at the end)."""
        self.lock.acquire()
        released = threading.Event()

        def release():
            if not released.is_set():
                released.set()
                self.lock.release()

        timer = threading.Timer(START_GATE_TIMEOUT, release)
        timer.daemon = True
        timer.start()

        def on_line(line: str) -> None:
            if RAY_STARTED in line:
                timer.cancel()
                release()

        on_line.release = lambda: (timer.cancel(), release())  # type: ignore[attr-defined]
        return on_line


@dataclass
class Context:
    """What a launch gets: the stage's folder, the toy assets, the results of the launches before it, the gate."""

    root: Path
    assets: str
    gate: StartGate = field(default_factory=StartGate)
    results: dict[str, dict] = field(default_factory=dict)
    meter: "CpuMeter | None" = None

    def workdir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def result(self, name: str) -> dict:
        """The result of a launch this one resumes from (run earlier in its chain)."""
        return self.results[name]


def record_path(root: Path, name: str) -> Path:
    return root / f"{name}.json"


def write_record(root: Path, name: str, record: dict) -> None:
    """Atomically: a reader sees the whole record or none."""
    tmp = root / f".{name}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, record_path(root, name))


def chains(launches: dict[str, Launch], names) -> list[list[str]]:
    """The named launches with what they resume from, as chains (a source, then what resumes it), longest first."""
    wanted: list[str] = []
    for name in names:
        while name is not None and name not in wanted:
            wanted.append(name)
            name = launches[name].after
    heads = [n for n in wanted if launches[n].after is None]
    out = []
    for head in heads:
        chain = [head]
        while True:
            children = [n for n in wanted if launches[n].after == chain[-1]]
            if not children:
                break
            assert len(children) == 1, f"{chain[-1]} is resumed by {children}: one chain each"
            chain.append(children[0])
        out.append(chain)
    return sorted(out, key=lambda c: -sum(launches[n].cost for n in c))


class CpuMeter:
    """Core-seconds per launch: every second, the CPU time of each process under a child of the stage, filed under
    the launch whose folder is that child's working directory (every launch runs in ``<root>/<name>``). What a
    launch costs on 2 cores, whatever ran beside it (a process that lived under a second is missed)."""

    def __init__(self, root: Path, interval: float = 1.0):
        self.root, self.interval = root, interval
        self.seen: dict[str, dict[int, float]] = {}
        self.names: dict[int, str] = {}  # pid -> what it runs (a Ray actor's class, or the program)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, name="cpu-meter", daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.wait(self.interval):
            for child in me.children():
                try:
                    name = Path(child.cwd()).name if Path(child.cwd()).parent == self.root else None
                    tree = [child, *child.children(recursive=True)]
                except psutil.Error:
                    continue
                if name is None:
                    continue
                mine = self.seen.setdefault(name, {})
                for proc in tree:
                    try:
                        times = proc.cpu_times()
                        now = process_name(proc.cmdline())  # a Ray worker takes its actor's name once it has one
                        if now != "ray::IDLE" or not self.names.get(proc.pid, "").startswith("ray::"):
                            self.names[proc.pid] = now
                    except psutil.Error:
                        continue
                    mine[proc.pid] = max(mine.get(proc.pid, 0.0), times.user + times.system)

    def seconds(self, name: str) -> float:
        return round(sum(self.seen.get(name, {}).values()), 1)

    def by_process(self, name: str) -> dict[str, float]:
        """The launch's core-seconds by what each process ran, the largest first: where a launch's cost goes."""
        out: dict[str, float] = {}
        for pid, seconds in self.seen.get(name, {}).items():
            key = self.names.get(pid, "?")
            out[key] = out.get(key, 0.0) + seconds
        return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def process_name(cmdline: list[str]) -> str:
    """``ray::WorkerDict`` for a Ray actor, ``python -m verl.trainer.main_ppo`` for a module, else the program."""
    if not cmdline:
        return "?"
    if cmdline[0].startswith("ray::"):
        return cmdline[0].split()[0]
    program = Path(cmdline[0]).name
    if "-m" in cmdline[1:-1]:
        return f"{program} -m {cmdline[cmdline.index('-m', 1) + 1]}"
    script = next((Path(a).name for a in cmdline[1:] if a.endswith((".py", ".sh"))), "")
    return f"{program} {script}".strip()


def run_chain(ctx: Context, launches: dict[str, Launch], chain: list[str]) -> None:
    failed = None
    for name in chain:
        begin = time.monotonic()
        if failed is not None:
            record = {"status": "error", "error": f"{name} resumes {failed[0]}, which failed: {failed[1]}"}
        else:
            try:
                ctx.results[name] = launches[name].start(ctx)
                record = {"status": "ok", "result": ctx.results[name]}
            except BaseException as error:  # noqa: BLE001 (written down for the tests that read this launch)
                failed = (name, f"{type(error).__name__}: {error}")
                record = {"status": "error", "error": traceback.format_exc()}
        cpu = ctx.meter.seconds(name) if ctx.meter is not None else None
        processes = ctx.meter.by_process(name) if ctx.meter is not None else {}
        record.update(name=name, seconds=round(time.monotonic() - begin, 1), cpu_seconds=cpu,
                      cpu_by_process=processes, proves=launches[name].proves)
        write_record(ctx.root, name, record)
        print(f"[e2e stage] {name}: {record['status']} in {record['seconds']:.0f} s", flush=True)


def run_stage(root: Path, assets: str, launches: dict[str, Launch], names, workers: int = 2) -> None:
    """Run ``names`` (and their sources) into ``root``, ``workers`` chains at a time; a record per launch."""
    ctx = Context(Path(root), assets, meter=CpuMeter(Path(root)))
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chain") as pool:
            for future in [pool.submit(run_chain, ctx, launches, chain) for chain in chains(launches, names)]:
                future.result()
    finally:
        ctx.meter.close()


def read_record(root: Path, name: str) -> dict | None:
    path = record_path(root, name)
    return json.loads(path.read_text()) if path.exists() else None


def launch_table(root: Path, names) -> str:
    """One line per launch: its wall time, its core-seconds (``CpuMeter``) and status, then the sums."""
    rows, total, cpu = [], 0.0, 0.0
    for name in names:
        record = read_record(root, name)
        if record is None:
            rows.append(f"  {name:<26} not run")
            continue
        total += record["seconds"]
        cpu += record.get("cpu_seconds") or 0.0
        rows.append(f"  {name:<26} {record['seconds']:>6.0f} s  {record.get('cpu_seconds') or 0:>6.0f} core-s  "
                    f"{record['status']}")
        top = list((record.get("cpu_by_process") or {}).items())[:4]
        if top:
            rows.append("      " + ", ".join(f"{proc} {sec:.0f}" for proc, sec in top))
    return "\n".join(rows + [f"  {'(sums)':<26} {total:>6.0f} s  {cpu:>6.0f} core-s"])


def workers_from_env() -> int:
    value = os.environ.get("VERL_HADW_E2E_WORKERS", "2")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"VERL_HADW_E2E_WORKERS must be a whole number >= 1, got {value!r}")
    return int(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, type=Path, help="folder of the launches' runs and records")
    parser.add_argument("--workers", type=int, default=None, help="chains at a time (default VERL_HADW_E2E_WORKERS, 2)")
    parser.add_argument("names", nargs="+", help="launches of tests/helpers/e2e_runs.py")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from e2e_runs import LAUNCHES

    from verl_hadw.toy.launch import ensure_assets

    unknown = [n for n in args.names if n not in LAUNCHES]
    if unknown:
        parser.error(f"unknown launches {unknown}; choose from {', '.join(LAUNCHES)}")
    args.root.mkdir(parents=True, exist_ok=True)
    assets = str(args.root / "assets")
    ensure_assets(assets)  # once, before the launches share it
    run_stage(args.root, assets, LAUNCHES, args.names, args.workers or workers_from_env())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The test session's launches of verl's real ``main_ppo``, run in the background, a few at a time.

A ``main_ppo`` run on the CPU toy spends much of its wall time waiting (Ray's start-up, a rollout phase bound by
verl's agent loop, polling), and every run pins torch to one thread per process. So the session starts every
launch its selected tests need as soon as the first test runs, ``workers`` at a time in threads, while pytest goes
on with the other tests; an end-to-end test then waits for the launches it reads (``Pool.result``). Each launch
runs exactly once per session, however many tests read it, and a launch that resumes another starts once that one
has finished. ``VERL_HADW_E2E_WORKERS`` sets how many run at once (default 2; 1 runs them one after another).

Which launches start: those named by the selected tests' ``@pytest.mark.e2e(...)`` markers (conftest.py), so
``pytest tests/test_e2e_legacy.py`` starts only the legacy trainer's two.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

RAY_STARTED = "Started a local Ray instance"  # ray.init's log line once the node is up
START_GATE_TIMEOUT = 45.0  # seconds a launch may hold the start gate without printing RAY_STARTED


@dataclass(frozen=True)
class Launch:
    """One ``main_ppo`` launch: ``start(ctx)`` runs it to the end and returns what the tests read."""

    name: str
    start: Callable[["Context"], Any]
    after: str | None = None  # the launch whose checkpoint this one resumes from
    cost: float = 60.0  # rough seconds on 2 cores: the longest start first


@dataclass
class Context:
    """What a launch gets: its own folder, the session's toy assets, the other launches' results, the gate."""

    root: Path
    assets: str
    pool: "Pool"

    def workdir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def result(self, name: str) -> Any:
        return self.pool.result(name)

    def ray_start(self) -> "StartGate":
        return self.pool.gate


class StartGate:
    """One launch at a time through Ray's start-up: nodes starting together on a loaded machine miss Ray's fixed
    30 s raylet deadline. A launch holds the gate until its output shows ``RAY_STARTED`` (``on_line``), or for at
    most ``START_GATE_TIMEOUT`` seconds (a launch that never starts Ray, or prints it elsewhere)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.holder: threading.Timer | None = None

    def enter(self) -> Callable[[str], None]:
        """Acquire; returns the ``on_line`` callback that releases on ``RAY_STARTED``."""
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
class Pool:
    root: Path
    assets: str
    launches: dict[str, Launch]
    workers: int = 2
    gate: StartGate = field(default_factory=StartGate)

    def __post_init__(self):
        self.futures: dict[str, Future] = {}
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="main_ppo")
        self.timings: dict[str, float] = {}

    def start(self, names) -> None:
        """Submit ``names`` (and what they resume from), the costliest chains first; a resumed launch is submitted
        when the launch it resumes from has finished, so it never holds a worker while waiting."""
        wanted = set()
        for name in names:
            while name is not None and name not in wanted:
                wanted.add(name)
                name = self.launches[name].after
        children: dict[str, list[str]] = {}
        for name in wanted:
            parent = self.launches[name].after
            if parent is not None:
                children.setdefault(parent, []).append(name)

        def chain_cost(name: str) -> float:
            return self.launches[name].cost + max((chain_cost(c) for c in children.get(name, [])), default=0.0)

        with self.lock:
            for name in wanted:
                self.futures.setdefault(name, Future())
        roots = sorted((n for n in wanted if self.launches[n].after is None), key=chain_cost, reverse=True)
        for name in roots:
            self._submit(name, children)

    def _submit(self, name: str, children: dict[str, list[str]]) -> None:
        outer = self.futures[name]
        if outer.running() or outer.done():
            return
        outer.set_running_or_notify_cancel()
        inner = self.executor.submit(self._run, name)

        def finished(done: Future) -> None:
            error = done.exception()
            if error is not None:
                outer.set_exception(error)
            else:
                outer.set_result(done.result())
            for child in sorted(children.get(name, []), key=lambda c: -self.launches[c].cost):
                if error is None:
                    self._submit(child, children)
                else:
                    self.futures[child].set_running_or_notify_cancel()
                    self.futures[child].set_exception(RuntimeError(f"{child} resumes {name}, which failed: {error}"))

        inner.add_done_callback(finished)

    def _run(self, name: str) -> Any:
        begin = time.monotonic()
        try:
            return self.launches[name].start(Context(self.root, self.assets, self))
        finally:
            self.timings[name] = time.monotonic() - begin

    def result(self, name: str, timeout: float = 3600) -> Any:
        """The launch's result, once it has run (started here if no marker asked for it)."""
        with self.lock:
            missing = name not in self.futures
        if missing:
            self.start([name])
        return self.futures[name].result(timeout=timeout)

    def close(self) -> None:
        """Stop what has not started; kill what still runs (a session ended early), so no Ray node outlives it."""
        for future in self.futures.values():
            future.cancel()
        unfinished = any(not f.done() for f in self.futures.values())
        if unfinished:
            import psutil

            for child in psutil.Process().children(recursive=True):
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass
        self.executor.shutdown(wait=True, cancel_futures=True)


def workers_from_env() -> int:
    value = os.environ.get("VERL_HADW_E2E_WORKERS", "2")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"VERL_HADW_E2E_WORKERS must be a whole number >= 1, got {value!r}")
    return int(value)

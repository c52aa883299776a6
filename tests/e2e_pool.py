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
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

RAY_STARTED = "Started a local Ray instance"  # ray.init's log line once the node is up
START_GATE_TIMEOUT = 25.0  # seconds a launch may hold the start gate without printing RAY_STARTED (Ray: ~7 s)


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
        self.children: dict[str, list[str]] = {}
        self.ready: list[str] = []  # launches whose parent (if any) has finished, not yet started
        self.cond = threading.Condition()
        self.closing = False
        self.timings: dict[str, float] = {}
        self.threads = [threading.Thread(target=self._work, name=f"main_ppo-{i}", daemon=True)
                        for i in range(self.workers)]
        for thread in self.threads:
            thread.start()

    def chain_cost(self, name: str) -> float:
        """The launch's cost plus its longest chain of resumed launches: what it keeps a worker busy for."""
        return self.launches[name].cost + max((self.chain_cost(c) for c in self.children.get(name, [])), default=0.0)

    def start(self, names) -> None:
        """Queue ``names`` and what they resume from. A worker takes the ready launch with the longest chain first;
        a resumed launch becomes ready when the launch it resumes from has finished (it never holds a worker while
        waiting)."""
        with self.cond:
            for name in names:
                while name is not None and name not in self.futures:
                    self.futures[name] = Future()
                    parent = self.launches[name].after
                    if parent is not None:
                        self.children.setdefault(parent, []).append(name)
                    done = parent is not None and parent in self.futures and self.futures[parent].done()
                    if parent is None or (done and self.futures[parent].exception() is None):
                        self.ready.append(name)  # nothing to wait for (its source finished before it was asked for)
                    elif done:
                        self._fail_children(parent, self.futures[parent].exception())
                    name = parent
            self.cond.notify_all()

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.ready and not self.closing:
                    self.cond.wait()
                if self.closing:
                    return
                name = max(self.ready, key=self.chain_cost)
                self.ready.remove(name)
            future = self.futures[name]
            future.set_running_or_notify_cancel()
            begin = time.monotonic()
            try:
                result = self.launches[name].start(Context(self.root, self.assets, self))
            except BaseException as error:  # noqa: BLE001 (handed to the tests that read this launch)
                self.timings[name] = time.monotonic() - begin
                future.set_exception(error)
                self._fail_children(name, error)
                continue
            self.timings[name] = time.monotonic() - begin
            future.set_result(result)
            with self.cond:
                self.ready += self.children.get(name, [])
                self.cond.notify_all()

    def _fail_children(self, name: str, error: BaseException) -> None:
        for child in self.children.get(name, []):
            if self.futures[child].done():
                continue
            self.futures[child].set_running_or_notify_cancel()
            self.futures[child].set_exception(RuntimeError(f"{child} resumes {name}, which failed: {error}"))
            self._fail_children(child, error)

    def result(self, name: str, timeout: float = 3600) -> Any:
        """The launch's result, once it has run (queued here if no marker asked for it)."""
        self.start([name])
        return self.futures[name].result(timeout=timeout)

    def close(self) -> None:
        """Start nothing more; kill what still runs (a session ended early), so that no Ray node outlives it."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        if any(f.running() for f in self.futures.values()):
            import psutil

            for child in psutil.Process().children(recursive=True):
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass
        for thread in self.threads:
            thread.join(timeout=60)


def workers_from_env() -> int:
    value = os.environ.get("VERL_HADW_E2E_WORKERS", "2")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"VERL_HADW_E2E_WORKERS must be a whole number >= 1, got {value!r}")
    return int(value)

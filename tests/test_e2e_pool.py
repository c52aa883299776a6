"""The session's launch pool (tests/e2e_pool.py) on stand-in launches: what runs when, and failures reach readers.

The real launches are verl's ``main_ppo`` (tests/e2e_runs.py); these stand-ins sleep, so the scheduling is seen alone.
"""

import threading
import time

import pytest
from e2e_pool import Launch, Pool


def launches(log, fail=()):
    def make(name, seconds):
        def start(ctx):
            log.append(("start", name, threading.current_thread().name))
            time.sleep(seconds)
            if name in fail:
                raise RuntimeError(f"{name} broke")
            log.append(("end", name))
            return name.upper()

        return start

    specs = [("long", 0.3, None, 100), ("long_resumed", 0.05, "long", 10), ("mid", 0.1, None, 50),
             ("short", 0.05, None, 20), ("short_resumed", 0.05, "short", 5)]
    return {n: Launch(n, make(n, s), after=a, cost=c) for n, s, a, c in specs}


def test_longest_chain_first_two_at_a_time_resumed_after_its_source(tmp_path):
    log = []
    pool = Pool(tmp_path, str(tmp_path), launches(log), workers=2)
    pool.start(["long_resumed", "mid", "short_resumed"])  # their sources come with them
    names = ("long", "long_resumed", "mid", "short", "short_resumed")
    assert {n: pool.result(n) for n in names} == {n: n.upper() for n in names}
    pool.close()
    starts = [entry[1] for entry in log if entry[0] == "start"]
    assert starts[:2] == ["long", "mid"]  # the two longest chains take the two workers

    def position(kind, name):
        return next(i for i, entry in enumerate(log) if entry[:2] == (kind, name))

    assert position("end", "long") < position("start", "long_resumed")  # a resumed launch waits for its source
    assert position("end", "short") < position("start", "short_resumed")
    assert [e for e in log if e[0] == "end"][-1] == ("end", "long_resumed")
    assert len({entry[2] for entry in log if entry[0] == "start"}) == 2
    assert set(pool.timings) == {"long", "long_resumed", "mid", "short", "short_resumed"}


def test_a_failed_launch_fails_its_readers_and_what_resumes_it(tmp_path):
    pool = Pool(tmp_path, str(tmp_path), launches([], fail={"short"}), workers=2)
    pool.start(["short_resumed"])
    with pytest.raises(RuntimeError, match="short broke"):
        pool.result("short")
    with pytest.raises(RuntimeError, match="short_resumed resumes short, which failed: short broke"):
        pool.result("short_resumed", timeout=5)
    pool.close()


def test_a_launch_asked_for_after_its_source_finished_still_runs(tmp_path):
    pool = Pool(tmp_path, str(tmp_path), launches([]), workers=1)
    assert pool.result("short") == "SHORT"
    assert pool.result("short_resumed", timeout=5) == "SHORT_RESUMED"  # no marker named it: queued on demand
    pool.close()


def test_stream_hands_over_each_line_and_kills_a_process_that_hangs():
    """``verl_hadw.toy.launch.stream``, what every launch runs through: lines as they come, and a watchdog that
    stops a process whose output never ends (a limit applied after the output ends would never be reached)."""
    import sys

    from verl_hadw.toy.launch import stream

    seen = []
    code, out = stream([sys.executable, "-c", "print('a'); print('b')"], on_line=seen.append)
    assert (code, out, seen) == (0, "a\nb\n", ["a\n", "b\n"])
    begin = time.monotonic()
    code, out = stream([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], timeout=2)
    assert code != 0 and out == "up\n" and time.monotonic() - begin < 30

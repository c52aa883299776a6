"""The launches' stage (tests/helpers/e2e_stage.py) on stand-in launches: what runs when, the records the tests read,
and a failure reaching its readers with its log tail (conftest.py's ``Stage``).

The real launches are verl's ``main_ppo`` (tests/helpers/e2e_runs.py); these stand-ins sleep, so the scheduling is
seen alone.
"""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import Stage
from e2e_stage import Launch, chains, launch_table, read_record, run_stage


def launches(log, fail=()):
    def make(name, seconds):
        def start(ctx):
            log.append(("start", name, threading.current_thread().name))
            time.sleep(seconds)
            if name in fail:
                raise RuntimeError(f"{name} broke\nlast line of its log")
            log.append(("end", name))
            source = ctx.result(name[: -len("_resumed")]) if name.endswith("_resumed") else None
            return {"name": name, "source": source}

        return start

    # the long chain outlasts the other worker's three launches by 0.8 s: their bookkeeping (records, the meter's
    # samples) on a loaded machine once took the 0.15 s margin these had before
    specs = [("long", 1.2, None, 100), ("long_resumed", 0.1, "long", 10), ("mid", 0.3, None, 50),
             ("short", 0.1, None, 20), ("short_resumed", 0.1, "short", 5)]
    return {n: Launch(n, make(n, s), after=a, cost=c) for n, s, a, c in specs}


def test_longest_chain_first_two_at_a_time_resumed_after_its_source(tmp_path):
    log = []
    specs = launches(log)
    assert chains(specs, ["short_resumed", "mid", "long_resumed"]) == [["long", "long_resumed"], ["mid"],
                                                                      ["short", "short_resumed"]]
    run_stage(tmp_path, str(tmp_path), specs, ["long_resumed", "mid", "short_resumed"], workers=2)
    names = ("long", "long_resumed", "mid", "short", "short_resumed")
    records = {n: read_record(tmp_path, n) for n in names}
    assert all(r["status"] == "ok" and r["result"]["name"] == n for n, r in records.items())
    assert records["long_resumed"]["result"]["source"] == {"name": "long", "source": None}  # its source's result
    starts = [entry[1] for entry in log if entry[0] == "start"]
    assert starts[:2] == ["long", "mid"]  # the two longest chains take the two workers

    def position(kind, name):
        return next(i for i, entry in enumerate(log) if entry[:2] == (kind, name))

    assert position("end", "long") < position("start", "long_resumed")  # a resumed launch follows its source
    assert position("end", "short") < position("start", "short_resumed")
    assert [e for e in log if e[0] == "end"][-1] == ("end", "long_resumed")
    assert len({entry[2] for entry in log if entry[0] == "start"}) == 2
    table = launch_table(tmp_path, names)
    assert all(f"  {n}" in table for n in names) and "(sums)" in table and "core-s" in table


def test_a_failed_launch_fails_its_readers_with_its_log_and_what_resumes_it(tmp_path):
    run_stage(tmp_path, str(tmp_path), launches([], fail={"short"}), ["short_resumed", "mid"], workers=2)
    assert read_record(tmp_path, "mid")["status"] == "ok"
    stage = Stage(tmp_path, ["short", "short_resumed", "mid"], None)
    with pytest.raises(RuntimeError, match=r"(?s)launch short failed:.*short broke\nlast line of its log"):
        stage.result("short")
    with pytest.raises(RuntimeError, match="short_resumed resumes short, which failed: RuntimeError: short broke"):
        stage.result("short_resumed")


def test_a_stage_that_died_fails_the_reader_with_the_stage_log(tmp_path):
    (tmp_path / "stage.log").write_text("Traceback ...\nImportError: the stage could not start\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    stage = Stage(tmp_path, ["demo"], proc)
    with pytest.raises(RuntimeError, match="(?s)the e2e stage exited \\(3\\) without running demo.*could not start"):
        stage.result("demo", timeout=30)


@pytest.mark.slow  # waits for a watchdog
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


@pytest.mark.slow  # a process burning CPU for seconds
def test_the_meter_files_a_launchs_core_seconds_under_its_name(tmp_path):
    """A launch's processes run in its folder; the stage adds up their CPU time (the launch table's core-s)."""
    from verl_hadw.toy.launch import stream

    burn = "import time\nend = time.process_time() + 2.5\nwhile time.process_time() < end: pass\n"

    def start(ctx):
        code, _ = stream([sys.executable, "-c", burn], cwd=str(ctx.workdir("burn")))
        return {"code": code}

    run_stage(tmp_path, str(tmp_path), {"burn": Launch("burn", start), "idle": Launch("idle", lambda ctx: {})},
              ["burn", "idle"], workers=2)
    assert 1.5 < read_record(tmp_path, "burn")["cpu_seconds"] < 10
    by_process = read_record(tmp_path, "burn")["cpu_by_process"]
    assert list(by_process) == [f"{Path(sys.executable).name}"] and by_process[Path(sys.executable).name] > 1.5
    assert read_record(tmp_path, "idle")["cpu_seconds"] == 0

"""Every ``verl-hadw`` argument refuses a wrong value in one line naming it, exit status 2, before any work.

The cases are generated from the subcommands' argparse definitions: each argument that takes a value declares its
kind (``verl_hadw/cli/arguments.py``, or argparse ``choices``), and each kind has its wrong inputs (a path under a
regular file, a path in a directory that cannot be made, a directory where a file goes, a binary file where text is
read, a wrong suffix, a nonsense choice, a number out of range). A new subcommand or argument is covered without a
new test. The subcommand itself is replaced by a tripwire, so no case can start training or a simulation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verl_hadw import cli
from verl_hadw.cli.arguments import Choice, Kind, Number, OutputFile, action_name


def valued_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.nargs != 0 and not isinstance(a, argparse._SubParsersAction)]


def kinds(action: argparse.Action) -> tuple[str, ...]:
    declared = action.type.kinds if isinstance(action.type, Kind) else ()
    return declared + (("choice",) if action.choices is not None else ())


@pytest.fixture
def world(tmp_path, monkeypatch):
    """Files of every sort, in a working directory of their own (the defaults, runs/..., land there)."""
    monkeypatch.chdir(tmp_path)
    w = {"text": tmp_path / "config.yaml", "binary": tmp_path / "blob.bin", "dir": tmp_path / "a_dir",
         "fifo": tmp_path / "pipe"}
    w["text"].write_text("trainer:\n  total_training_steps: 2\n")
    w["binary"].write_bytes(bytes(range(256)) * 8)
    w["dir"].mkdir()
    os.mkfifo(w["fifo"])
    return w


def bad_values(action: argparse.Action, w: dict[str, Path]) -> list[tuple[str, str]]:
    """(what is wrong, the value) for every wrong input of the argument's kinds."""
    k, kind = kinds(action), action.type
    wrap = kind.wrap if isinstance(kind, Kind) else str
    suffix = kind.suffixes[0] if isinstance(kind, OutputFile) and kind.suffixes else ""
    under_file, missing = f"{w['text']}/x{suffix}", f"/proc/no/x{suffix}"
    cases = []
    if "choice" in k:
        cases.append(("a nonsense choice", "nonsense"))
    if {"input_file", "input_dir", "input_path", "output_file", "output_dir"} & set(k):
        cases += [("a path under a regular file", wrap(under_file)),
                  ("a path in a directory that cannot be made", wrap(missing))]
    if "input_file" in k or "output_file" in k:
        cases.append(("a directory where a file is expected", wrap(str(w["dir"]))))
    if "input_file" in k:
        cases.append(("a FIFO where a regular file is expected", wrap(str(w["fifo"]))))
    if "text_file" in k:
        cases.append(("a binary file where text is read", wrap(str(w["binary"]))))
    if "input_dir" in k or "output_dir" in k:
        cases.append(("a regular file where a directory is expected", wrap(str(w["text"]))))
    if isinstance(kind, OutputFile) and kind.suffixes:
        cases.append(("a wrong suffix", wrap(str(w["dir"] / "out.txt"))))
    elif getattr(kind, "suffixes", ()) and w["text"].suffix not in kind.suffixes:
        cases.append(("an input file of a type it does not read", wrap(str(w["text"]))))
    if isinstance(kind, Number):
        cases += [("not a number", "x"), ("not finite", "nan")]
        if kind.minimum is not None:
            cases.append(("below the minimum", str(int(kind.minimum) - 1)))
        if kind.maximum is not None:
            cases.append(("above the maximum", str(int(kind.maximum) + 1)))
    return cases


def good_value(action: argparse.Action, w: dict[str, Path]) -> str:
    k, kind = kinds(action), action.type
    if action.choices is not None:
        return str(list(action.choices)[0])
    if isinstance(kind, Choice):
        return kind.names()[0]
    if isinstance(kind, Number):
        return str(kind.minimum if kind.minimum is not None else 1)
    if "input_file" in k:
        return kind.wrap(str(w["text"]))
    if "input_dir" in k or "input_path" in k:
        return kind.wrap(str(w["dir"]))
    return kind.wrap(str(w["dir"] / "out")) if isinstance(kind, Kind) else "x"


def words(action: argparse.Action, value: str) -> list[str]:
    values = [value] * (action.nargs if isinstance(action.nargs, int) else 1)
    return [action.option_strings[0], *values] if action.option_strings else values


def argv_for(name: str, parser, target: argparse.Action, value: str, w) -> list[str]:
    """The subcommand with ``target`` set to ``value`` and every other required argument set right."""
    argv = [name]
    for action in valued_actions(parser):
        if action is not target and (action.required or (not action.option_strings and action.nargs == "+")):
            argv += words(action, good_value(action, w))
    return argv + words(target, value)


def refusal(argv: list[str], capsys) -> tuple[int | str, str]:
    """(exit status, stderr) of ``verl-hadw argv`` in this process; a traceback is returned as the status."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # noqa: BLE001  (the test reports it as the failure it is)
        code = f"raised {type(exc).__name__}: {exc}"
    return code, capsys.readouterr().err


@pytest.fixture
def tripwire(monkeypatch):
    def started(args):
        raise AssertionError(f"verl-hadw {args.command} started with a bad argument")

    monkeypatch.setattr(cli, "run", started)


def test_every_argument_declares_its_kind():
    undeclared = [f"{name} {action_name(a)}" for name in cli.SUBCOMMANDS
                  for a in valued_actions(cli.build_parser([name])[1]) if not kinds(a)]
    assert not undeclared, f"give these a type= from verl_hadw/cli/arguments.py (or choices): {undeclared}"


@pytest.mark.parametrize("name", list(cli.SUBCOMMANDS))
def test_every_bad_argument_is_one_line_naming_it_exit_2(name, world, tripwire, capsys, tmp_path):
    parser = cli.build_parser([name])[1]
    before = sorted(tmp_path.rglob("*"))
    failures = []
    for action in valued_actions(parser):
        for what, value in bad_values(action, world):
            argv = argv_for(name, parser, action, value, world)
            code, err = refusal(argv, capsys)
            lines = err.strip().splitlines()
            expected = f"verl-hadw {name}: error: argument {action_name(action)}: "
            if code != 2 or len(lines) != 1 or not lines[0].startswith(expected) or "Traceback" in err:
                failures.append(f"{what}: verl-hadw {' '.join(argv[1:])} -> status {code}, stderr {err!r}")
    assert not failures, "\n".join(failures)
    assert sorted(tmp_path.rglob("*")) == before  # a refused command wrote nothing (the output probes included)


def test_the_sweep_reaches_every_kind():
    """The generator is not vacuous: the subcommands have arguments of each kind it knows."""
    seen = {k for name in cli.SUBCOMMANDS for a in valued_actions(cli.build_parser([name])[1]) for k in kinds(a)}
    assert {"input_file", "text_file", "input_dir", "input_path", "output_file", "output_dir", "choice",
            "number", "text"} <= seen


@pytest.mark.parametrize("argv, argument", [
    (["simulate", "--suite", ","], "--suite"),  # names no method at all
    (["simulate", "--batch-prompts", "64", "--prompts", "32"], "--batch-prompts"),
    (["configs", "--plan", "hadw", "--costs", "--keep", "0"], "--keep"),
    (["configs", "--keep", "all"], "--keep"),  # only with --costs: refused, not ignored
    (["configs", "--with-dirs"], "--with-dirs"),
    (["data", "--source", "math500="], "--source"),
    (["study", "--methods", "grpo_lr_phi"], "--methods"),  # needs hadw's Φ
    (["study", "--trainer", "trl", "--methods", "grpo_lr_phi"], "--methods"),
    (["study", "--trainer", "trl", "--lr", "0.1"], "--lr"),  # the verl study's; the TRL study has --lrs
    (["study", "--lrs", "0.1", "0.01"], "--lrs"),  # and the reverse
    (["study", "--task", "arith", "--quick"], "--quick"),  # the verl study's quick check runs the toy
    (["study", "--model", "."], "--model"),  # the TRL arithmetic study's; verl pretrains into its assets
    (["results", "."], "RUN_DIR"),  # a directory without metrics
])
def test_refused_arguments_beside_the_sweep(argv, argument, world, capsys, monkeypatch):
    monkeypatch.setattr("verl_hadw.research.sim.runner.run_many", None, raising=False)  # nothing may simulate
    monkeypatch.setattr("verl_hadw.research.study.run_study", None, raising=False)  # nor train
    monkeypatch.setattr("verl_hadw.research.trl_study.run_study", None, raising=False)
    code, err = refusal(argv, capsys)
    assert code == 2 and err.startswith(f"verl-hadw {argv[0]}: error: argument {argument}: ") and err.count("\n") == 1


def run_dir(tmp_path: Path, *lines: dict) -> Path:
    run = tmp_path / "runs" / "hadw_t1_qwen3_4b_grpo_hadw"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


VALIDATION = {"step": 5, "data": {"val-core/math500/acc/mean@1": 0.5}}


def test_results_reads_only_regular_files_and_refuses_a_step_that_is_no_number(tmp_path, capsys):
    run = run_dir(tmp_path, VALIDATION)
    (run / "x.log").mkdir()  # a directory with a log's name
    os.mkfifo(run / "stalled.out")  # would never end if read
    assert cli.main(["results", str(run), "--no-plot"]) == 0 and "50.0" in capsys.readouterr().out
    bad = run_dir(tmp_path / "other", VALIDATION, {"step": "final", "data": {"val-core/math500/acc/mean@1": 0.6}})
    assert cli.main(["results", str(bad), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("verl-hadw results: error: argument RUN_DIR: ")
    assert "metrics.jsonl, line 2: \"step\" is 'final', not a whole number" in err


def test_a_file_error_while_running_names_the_argument(tmp_path, capsys, monkeypatch):
    from verl_hadw.cli import results_cmd

    run, plot = run_dir(tmp_path, VALIDATION), tmp_path / "figures" / "results.png"

    def refused(results, path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(results_cmd, "plot", refused)
    assert cli.main(["results", str(run), "--plot", str(plot)]) == 2
    err = capsys.readouterr().err
    assert err == f"verl-hadw results: error: argument --plot: writing {plot}: Permission denied\n"

    import pandas as pd

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")  # a full disk: the error names no file

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    table = tmp_path / "table.csv"
    assert cli.main(["results", str(run), "--no-plot", "--csv", str(table)]) == 2
    err = capsys.readouterr().err
    assert err == f"verl-hadw results: error: argument --csv: writing {table}: No space left on device\n"


def test_a_text_config_that_is_no_yaml_mapping_names_config(world, capsys):
    (world["dir"] / "broken.yaml").write_text("trainer: [1, 2\n")
    (world["dir"] / "list.yaml").write_text("- 1\n- 2\n")
    for config, problem in [("broken.yaml", "is not a config verl wrote"), ("list.yaml", "holds a list")]:
        argv = ["smoke-check", "--config", str(world["dir"] / config), "--log", str(world["text"]),
                "--resume-log", str(world["text"])]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("verl-hadw smoke-check: error: argument --config: ") and problem in err
        assert err.count("\n") == 1


def test_the_console_script_prints_one_line_and_no_traceback(tmp_path):
    script = Path(sys.executable).with_name("verl-hadw")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "verl_hadw.cli"]
    (tmp_path / "afile").write_text("x\n")
    proc = subprocess.run([*command, "theory", "--out", str(tmp_path / "afile" / "out")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"verl-hadw theory: error: argument --out: {tmp_path / 'afile'} is not a directory\n"

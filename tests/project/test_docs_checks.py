"""The check of each kind of command the docs show (tests/project/test_docs_commands.py finds them and applies these):
cheap and real, nothing is run. Scripts and benchmarks exist and know the flags given to them; `verl-hadw`
arguments parse with the real argparse parser; run names are runs; Hydra overrides compose with the config they
are given to, and verl `main_ppo` overrides of `hadw` / `dgpo` runs pass the plugin's start-up validation; pytest
paths and test names exist (read with ast); pip extras are declared. A program no check knows fails. Below the
checks: tests that each refuses what is not real."""

from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib
import importlib.util
import re
import shlex
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from repo_paths import ROOT

ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
RUN_NAME = re.compile(r"^(?:hadw|dgpo)_\w+$")
OVERRIDE = re.compile(r"^[+~]{0,2}[A-Za-z_][\w.@/-]*=")
# other people's tools: the subcommands shown and the file of ours each one reads (their flags are theirs to check)
TOOLS = {"ruff": (("check", "--version"), "pyproject.toml"), "mkdocs": (("build", "serve"), "mkdocs.yml"),
         "pre-commit": (("run", "install"), ".pre-commit-config.yaml"),
         "hf": (("download",), "verl_hadw/repro/data.py")}
CONFIG_DIR = "@config_dir"  # stands for $(verl-hadw configs), verl-hadw's config directory
PYTEST_FLAGS = {"-q", "-x", "-v", "-s", "-p", "-m", "-k", "--durations", "--co", "-n"}  # -n: pytest-xdist's


def placeholder(token: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*(=[A-Z][A-Z0-9_]*)?(…|\.\.\.)?", token)) or "<" in token or "…" in token


def check(tokens: list[str]) -> None:
    """Dispatch one command (a token list) to the check of its program; an unknown program fails."""
    while tokens and ENV.match(tokens[0]):
        check_env(tokens.pop(0))
    assert tokens, "an environment assignment without a command"
    program, args = re.sub(r"^(\.venv|\.nox/[\w-]+)/bin/", "", tokens[0]), tokens[1:]
    if program == "export":
        for assignment in args:
            check_env(assignment)
        return None
    if program in ("bash", "sh"):
        return check_script(args[0], args[1:])
    if re.fullmatch(r"(\./)?scripts/\S+", program):
        return check_script(program, args)
    if program in ("python", "python3"):
        return check_python(args)
    if program in TOOLS:
        return check_tool(program, args)
    checks = {"verl-hadw": check_cli, "pytest": check_pytest, "pip": check_pip, "sbatch": check_sbatch,
              "verl-hadw-swift": check_swift, "swift": check_swift, "nox": check_nox}
    assert program in checks, f"no check knows the program {program!r}: add one to tests/project/test_docs_commands.py"
    return checks[program](args)


def check_env(assignment: str) -> None:
    name = assignment.split("=", 1)[0]
    if name.startswith("VERL_HADW_"):  # ours: some script or module must read it
        assert any(name in p.read_text(encoding="utf-8", errors="replace") for d in ("verl_hadw", "scripts")
                   for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in (".py", ".sh", ".sbatch", "")), (
            f"{name} is read by no script or module")


def script_text(path: Path) -> str:
    """A script's text and that of the scripts it hands over to (reproduce_hadw.sh -> reproduce_paper.sh)."""
    text = path.read_text(encoding="utf-8")
    others = [p for p in (ROOT / "scripts").rglob("*") if p.is_file() and p != path and p.name in text]
    return text + "".join(p.read_text(encoding="utf-8") for p in others)


def check_script(script: str, args: list[str]) -> None:
    path = ROOT / script.removeprefix("./")
    assert path.is_file(), f"{script} does not exist"
    if path.suffix == ".py":
        return check_flags_in(path, args)
    if path.name == "test_cpu.sh":  # its arguments go to pytest
        return check_pytest(args)
    check_flags_in(path, args, text=script_text(path))
    runs = [a for a in args if RUN_NAME.match(a)]
    for run in runs:
        assert run in available_runs(), f"{script}: no run {run!r} (verl-hadw configs --list)"
    overrides = [a for a in args if OVERRIDE.match(a)]
    if path.name == "demo_cpu.sh" or (path.name == "gpu_smoke.sh" and "--cpu" in args):  # the CPU demo's config
        compose_config(ROOT / "configs" / "cpu", "demo", overrides)
    elif overrides and runs:
        compose_run(runs[0], overrides)
    elif overrides and (paper := re.search(r"reproduce_(hadw|dgpo)", path.name)):
        from verl_hadw.repro.catalogue import plan

        compose_run(plan(paper[1])[-1][1], overrides)
    else:
        assert not overrides or any(placeholder(a) for a in args), f"{script}: nothing to compose {overrides} with"


def check_flags_in(path: Path, args: list[str], text: str | None = None) -> None:
    text = path.read_text(encoding="utf-8") if text is None else text
    for flag in (a.split("=", 1)[0] for a in args if a.startswith("--") and a != "--"):
        assert re.search(rf"{re.escape(flag)}\b", text), f"{path} does not know {flag}"


def check_python(args: list[str]) -> None:
    args = [a for a in args if a != "-u"]
    if args[0] == "-c":
        return check_python_code(args[1])
    if args[0] != "-m":
        assert re.fullmatch(r"(benchmarks|scripts|examples|tests)/\S+\.py", args[0]), f"python {args[0]}: not ours"
        return check_script(args[0], args[1:])
    module, rest = args[1], args[2:]
    modules = {"pytest": check_pytest, "verl.trainer.main_ppo": check_main_ppo, "verl_hadw.cli": check_cli,
               "mkdocs": lambda rest: check_tool("mkdocs", rest)}
    if module in modules:
        return modules[module](rest)
    assert module.split(".")[0] in ("verl", "verl_hadw"), f"python -m {module}: no check knows this module"
    spec = importlib.util.find_spec(module)  # verl's or ours: it must run as a module and know the flags given
    assert spec is not None, f"python -m {module}: no such module"
    main = Path(spec.origin).parent / "__main__.py" if spec.submodule_search_locations else Path(spec.origin)
    assert main.is_file(), f"python -m {module}: it has no __main__"
    check_flags_in(main, rest)


def check_python_code(code: str) -> None:
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


def cli_parser(name: str) -> argparse.ArgumentParser:
    """verl-hadw's parser with the real parser of subcommand ``name`` (as verl_hadw.cli.main builds it)."""
    from verl_hadw import cli

    assert name in cli.SUBCOMMANDS, f"verl-hadw has no subcommand {name!r}"
    parser = argparse.ArgumentParser(prog="verl-hadw", exit_on_error=False)
    importlib.import_module(f"verl_hadw.cli.{cli.SUBCOMMANDS[name][0]}").add_subcommand(
        parser.add_subparsers(dest="command", required=True))
    return parser


def check_cli(args: list[str]) -> None:
    # a placeholder stands for a value of the right type: parse with "1" in its UPPER-CASE words (N, K, NAME=DIR)
    sample = [re.sub(r"[A-Z][A-Z0-9_]*", "1", a) if placeholder(a) and "<" not in a else a for a in args]
    try:
        namespace = cli_parser(args[0]).parse_args(sample)
    except (SystemExit, argparse.ArgumentError) as exc:  # a bad argument (--help exits 0)
        assert isinstance(exc, SystemExit) and exc.code == 0, f"verl-hadw {' '.join(args)}: argparse refused it: {exc}"
        return
    runs = [a for a in args if RUN_NAME.match(a)]
    for run in runs:
        assert run in available_runs(), f"verl-hadw: no run {run!r}"
    only = args[args.index("--only") + 1] if "--only" in args[:-1] else None
    if only and not placeholder(only):
        assert fnmatch.filter(available_runs(), only), f"--only {only!r} matches no run"
    overrides = [o for o in getattr(namespace, "overrides", []) or [] if OVERRIDE.match(o)]
    if overrides:
        from verl_hadw.repro.catalogue import plan

        assert runs or getattr(namespace, "plan", None), f"verl-hadw {' '.join(args)}: no run to compose with"
        compose_run(runs[0] if runs else plan(namespace.plan)[-1][1], overrides)


def check_main_ppo(args: list[str]) -> None:
    options = dict(a.split("=", 1) for a in args if a.startswith("--config-"))
    overrides = [a for a in args if not a.startswith("--")]
    path, name = options.get("--config-path"), options.get("--config-name", "ppo_trainer")
    from verl_hadw.toy.config_paths import config_dir, verl_config_dir

    if path is None:
        directory = verl_config_dir()
    elif path == CONFIG_DIR:
        directory = config_dir()
    else:
        directory = ROOT / path.removeprefix("$PWD/")
    assert directory.is_dir(), f"--config-path={path}: no such directory"
    if placeholder(name):
        return
    config = compose_config(directory, name, overrides)
    if config.algorithm.adv_estimator in ("hadw", "dgpo"):
        from verl_hadw.verl.startup_check import validate_config

        validate_config(config)


def check_pytest(args: list[str]) -> None:
    markers = re.findall(r"^    (\w+):", (ROOT / "pytest.ini").read_text(encoding="utf-8"), re.M)
    it = iter(args)
    for arg in it:
        if arg.startswith("-"):
            flag = arg.split("=", 1)[0]
            assert flag in PYTEST_FLAGS, f"pytest {arg}: a flag this check does not know"
            if flag in ("-m", "-k", "-p", "-n") or (flag == "--durations" and "=" not in arg):
                value = next(it)
                if flag == "-n":  # pytest-xdist's workers: the test extra installs it
                    assert importlib.util.find_spec("xdist") and (value.isdigit() or value == "auto"), f"-n {value}"
                if flag == "-m":
                    names = set(re.findall(r"\w+", value)) - {"and", "or", "not"}
                    assert names <= set(markers), f"pytest -m {value!r}: unregistered marker"
            continue
        file, _, name = arg.partition("::")
        assert list(ROOT.glob(file)) if "*" in file else (ROOT / file).exists(), f"pytest {arg}: no {file}"
        if name:
            assert name in defined_names(ROOT / file), f"pytest {arg}: no test {name} in {file}"


@lru_cache(maxsize=None)
def defined_names(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))


def nox_sessions() -> tuple[set[str], set[str]]:
    """The session names and tags noxfile.py defines (read, not imported: nox is not installed here)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    names, tags = set(), set(re.findall(r'tags=\[?"(\w+)"', (ROOT / "noxfile.py").read_text(encoding="utf-8")))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("session" in ast.unparse(d) for d in node.decorator_list):
            names.add(node.name)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "RELEASES":
            for framework, releases in ast.literal_eval(node.value).items():
                names |= {f"{ {'ms-swift': 'swift'}.get(framework, framework)}-{r}" for r in releases}
    return names, tags


def check_nox(args: list[str]) -> None:
    """nox's listing, a session by name (``-s``), a tag (``-t``), reuse flags; after ``--``, pytest's arguments."""
    names, tags = nox_sessions()
    args, _, rest = (args[:args.index("--")], None, args[args.index("--") + 1:]) if "--" in args else (args, None, [])
    it = iter(args)
    for arg in it:
        assert arg in ("-l", "-s", "-t", "-R", "-r"), f"nox {arg}: a flag this check does not know"
        if arg == "-s":
            for name in (value := next(it)).split():
                assert placeholder(name) or name in names, f"nox -s {value}: no such session in noxfile.py"
        if arg == "-t":
            assert (value := next(it)) in tags, f"nox -t {value}: no session has that tag"
    if rest:
        check_pytest(rest)


def check_pip(args: list[str]) -> None:
    if args == ["freeze"]:  # what an install changed: docs/trl.md
        return
    assert args[0] == "install", f"pip {args[0]}: only pip install and pip freeze are shown"
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    extras = set(re.findall(r'^    "(\w+)": ', setup, re.M))
    it = iter(args[1:])
    for arg in it:
        if arg in ("-c", "-r"):
            assert (ROOT / next(it)).is_file(), f"pip install {arg}: no such file"
        elif arg.startswith("-"):
            assert arg in ("-e", "-q", "-U", "--no-build-isolation"), f"pip install {arg}: unknown here"
        else:
            spec = re.fullmatch(r"(?P<name>[\w.-]+?)(\[(?P<extras>[\w,]+)\])?([=<>!~].*)?", arg)
            assert spec, f"pip install {arg}: not a requirement"
            known = spec["name"] in (".", "verl-hadw", *TOOLS) or f'"{spec["name"]}' in setup
            assert known, f"pip install {arg}: neither this package, one of its dependencies nor a known tool"
            assert set((spec["extras"] or "").split(",")) - {""} <= extras, f"pip install {arg}: unknown extra"


def check_tool(program: str, args: list[str]) -> None:
    subcommands, ours = TOOLS[program]
    assert args[0] in subcommands and (ROOT / ours).is_file(), f"{program} {args[0]}: not a use shown here"
    if program == "hf":  # a dataset the catalogue names, through the hf CLI of the venv (huggingface_hub)
        assert (Path(sys.executable).parent / "hf").is_file(), "hf download: no hf CLI in the venv"
        catalogue = (ROOT / "verl_hadw" / "repro" / "catalogue.py").read_text(encoding="utf-8")
        for repo in (a for a in args[1:] if "/" in a and not a.startswith("-") and not placeholder(a)):
            assert f'"{repo}"' in catalogue, f"hf download {repo}: not a dataset of the catalogue"


def check_swift(args: list[str]) -> None:
    """``swift rlhf`` / ``verl-hadw-swift rlhf``: the subcommand the adapter routes, and every HA-DW / DGPO flag
    one the adapter declares (swift's own flags are swift's to check: it is not installed here)."""
    from verl_hadw.hf_trainer.option_fields import ADAPTER_FIELDS, declared_fields

    if args == ["--help"]:  # verl-hadw-swift --help: says what runs (tests/swift, the environments)
        return
    assert args and args[0] == "rlhf", f"swift {args[:1]}: the adapter routes rlhf only"
    ours = {f"--{name}" for name in [*declared_fields(), *ADAPTER_FIELDS]}
    for flag in (a.split("=")[0] for a in args[1:] if a.startswith(("--hadw_", "--dgpo_", "--adv_", "--accuracy_"))):
        assert flag in ours, f"{flag}: not a flag of verl-hadw-swift rlhf"


def check_sbatch(args: list[str]) -> None:
    rest = [a for a in args if not a.startswith("-")]
    if rest:
        check_script(rest[0], rest[1:])


# ------------------------------------------------------------------------------------------------ composing
@lru_cache(maxsize=None)
def available_runs() -> tuple[str, ...]:
    from verl_hadw.repro.compose import available_runs as runs

    return tuple(runs())


@lru_cache(maxsize=None)
def _compose_run(run: str, overrides: tuple[str, ...]) -> None:
    from verl_hadw.repro.compose import compose_run as compose

    compose(run, list(overrides))


def compose_run(run: str, overrides: list[str]) -> None:
    _compose_run(run, tuple(o for o in overrides if not placeholder(o.split("=", 1)[1])))


@lru_cache(maxsize=None)
def _compose(directory: Path, name: str, overrides: tuple[str, ...]):
    from hydra import compose, initialize_config_dir

    from verl_hadw.toy.config_paths import verl_config_dir

    search = [] if directory == verl_config_dir() else [f"hydra.searchpath=[file://{verl_config_dir()}]"]
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        return compose(config_name=name, overrides=[*overrides, *search])


def compose_config(directory: Path, name: str, overrides: list[str]):
    return _compose(directory, name, tuple(o for o in overrides if not placeholder(o.split("=", 1)[1])))


# ------------------------------------------------------------------------------------------------ the checks' tests
@pytest.mark.parametrize("command, says", [
    ("make docs", "no check knows the program 'make'"),
    ("bash scripts/no_such_script.sh", "scripts/no_such_script.sh does not exist"),
    ("scripts/train.sh hadw_no_such_run", "no run 'hadw_no_such_run'"),
    ("scripts/train.sh hadw_t1_qwen3_4b_grpo --no-such-flag", "does not know --no-such-flag"),
    ("bash scripts/demo_cpu.sh algorithm.no_such_key=1", "Could not override 'algorithm.no_such_key'"),
    ("verl-hadw configs --plan nobody", "argparse refused it"),
    ("verl-hadw no-such-subcommand", "verl-hadw has no subcommand 'no-such-subcommand'"),
    ("verl-hadw configs --plan hadw --only nothing_matches_*", "matches no run"),
    ("python -m verl.trainer.main_ppo algorithm.adv_estimator=hadw +algorithm.hadw.lamda_scale=1.3",
     "Did you mean 'algorithm.hadw.lambda_scale'"),  # the plugin's own start-up validation
    ("python -m verl.trainer.main_ppo --config-path=configs/cpu --config-name=no_such_config", "no_such_config"),
    ("python -m pytest tests/cli/test_cli.py::test_no_such_test", "no test test_no_such_test in tests/cli/test_cli.py"),
    ("python -m pytest -m fast", "unregistered marker"),
    ("python -m pytest tests/test_nothing_*.py", "no tests/test_nothing_*.py"),
    ("python benchmarks/no_such_bench.py", "benchmarks/no_such_bench.py does not exist"),
    ("python -c 'from verl_hadw.core.options import no_such_name'", "has no no_such_name"),
    ("pip install -e .[no_such_extra]", "unknown extra"),
    ("VERL_HADW_NO_SUCH_VARIABLE=1 verl-hadw doctor", "VERL_HADW_NO_SUCH_VARIABLE is read by no script or module"),
])
def test_each_check_refuses_what_is_not_real(command, says, monkeypatch):
    monkeypatch.setenv("VERL_HADW_ASSETS", "/assets")
    with pytest.raises(Exception, match=re.escape(says)):  # a check's AssertionError, or Hydra's / the plugin's
        check(shlex.split(command))

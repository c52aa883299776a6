"""Every environment verl-hadw is tested in: one nox session each, laid by uv from its cache.

    nox -l                            # every session, with what it runs
    nox -s trl-1.0.0                  # one session
    nox -t ci                         # CI's set (scripts/test_cpu.sh): lint, typecheck, docs, the main suite, the
                                      # lowest and highest release of each range, the comparison across frameworks
    nox -t sweep                      # every release of each declared range, and transformers: docs/install.md's table
    nox -R -s tests -- -m "not slow"  # the quick loop (-R: the environment as it is); after --, pytest's arguments

A framework session installs the framework first, as its users have it, then this checkout's extra, and fails unless
the extra added ``verl-hadw`` and nothing else (``uv pip list`` before and after, printed). The test tools then go in
pinned to what is installed, and the adapter's tests run against the installed package (pytest's script puts no
checkout on ``sys.path``). The ms-swift and Axolotl sessions keep the generation batches they trained on under
``.nox/records/<session>``; ``compare`` replays them through TRL's adapter and verl's estimator.

``RELEASES`` lists the releases of each range; a declared range in ``verl_hadw/__init__.py`` holds only releases that
passed the sweep (``tests/project/test_tested_releases.py`` holds the ranges to the table in ``docs/install.md``).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.needs_version = ">=2025.2.9"
# Every process of a session writes bytecode on first import, under .nox/pycache (never beside the checkout's sources):
# with PYTHONDONTWRITEBYTECODE set, each of them (every test worker, every Ray worker of a launch) would compile torch,
# transformers and verl from source again (pytest's collection alone: 14 of its 21 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = str(Path(__file__).resolve().parent / ".nox" / "pycache")
# a crash in any session's process (at interpreter exit too: rc 139) prints every thread's Python stack
os.environ["PYTHONFAULTHANDLER"] = "1"
# uv reads no pip settings: a folder of local wheels pip is told of (the CPU build of torch, say) is uv's too
if os.environ.get("PIP_FIND_LINKS") and not os.environ.get("UV_FIND_LINKS"):
    os.environ["UV_FIND_LINKS"] = os.environ["PIP_FIND_LINKS"]

ROOT = Path(__file__).resolve().parent
CONSTRAINTS = str(ROOT / "constraints-cpu.txt")  # torch==2.13.0: CPU machines never pull a newer build
RECORDS = ROOT / ".nox" / "records"  # the generation batches the ms-swift and Axolotl sessions trained on
RESULTS = ROOT / ".nox" / "sweep"  # one JSON per sweep session: framework, release, result, date
INSTALL_PAGE = ROOT / "docs" / "install.md"  # shows the sweep's table between these two lines
BEGIN, END = "<!-- tested releases: nox -t sweep writes this table -->", "<!-- end of tested releases -->"

# Every release of each declared range (each minor's newest patch, and the range's lowest release); CI runs the first
# and the last of each. A new release: add it here, run its session, and widen the range if it passed.
RELEASES = {
    "verl": ["0.9.0", "0.9.1"],
    "trl": ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.1", "1.6.0", "1.7.1", "1.8.0", "1.9.2", "1.10.0",
            "1.11.0", "1.12.0", "1.13.0", "1.14.2", "1.15.0", "1.16.0"],
    "ms-swift": ["4.3.0", "4.3.2", "4.4.2", "4.5.3", "4.6.0"],
    "axolotl": ["0.19.0"],
    # the HF adapters override transformers' private Trainer._save_checkpoint and _get_output_dir: every minor that
    # TRL's newest release accepts, under it, through TRL's adapter's training, saving and resuming
    "transformers": ["4.56.2", "4.57.6", "5.0.0", "5.1.0", "5.2.0", "5.3.0", "5.4.0", "5.5.4", "5.6.2", "5.7.0",
                     "5.8.1", "5.9.0", "5.10.4", "5.11.0", "5.12.1", "5.13.1", "5.14.1", "5.15.1", "5.16.1",
                     "5.17.0", "5.18.0", "5.19.0", "5.20.2", "5.21.1", "5.22.2", "5.23.0", "5.24.0"],
}
# What a user of the framework has beside it: verl's default trainer imports these without declaring them; TRL
# 1.0's GRPOTrainer imports requests; ms-swift imports msgspec.
BESIDE = {"verl": ["TransferQueue>=0.1.10", "pyzmq", "msgspec", "cachetools", "fastapi", "uvicorn", "wrapt"],
          "trl": ["requests"], "ms-swift": ["msgspec"], "axolotl": [], "transformers": ["requests"]}
EXTRA = {"verl": "verl", "trl": "trl", "ms-swift": "swift", "axolotl": "axolotl", "transformers": "trl"}
# verl's adapter's tests that need TRL beside verl run in the main suite (``tests``), where both are installed
VERL_WITHOUT_TRL = ["--ignore", "tests/verl/test_host_reads_reward_matrix.py", "--ignore",
                    "tests/verl/test_resume_ways_back.py", "--ignore", "tests/verl/test_verl_and_trl_agree.py",
                    "-k", "not trl and not test_the_sweep_reaches_every_refusal"]
FOLDERS = {"verl": ["tests/verl", *VERL_WITHOUT_TRL], "trl": ["tests/core", "tests/trl", "tests/hf_trainer"],
           "ms-swift": ["tests/core", "tests/swift", "tests/hf_trainer"],
           "axolotl": ["tests/axolotl", "tests/hf_trainer"],
           "transformers": ["tests/trl/test_trl_training.py", "tests/trl/test_trl_kill_during_save.py"]}
TOOLS = ["pytest", "pytest-xdist", "hypothesis", "psutil", "peft", "mypy"]  # the tests' own, pinned to the framework's
SEED = ["--seed"]  # pip in every test environment, as a user's has it: tests run pip (the resolver, a verl 0.8.0)
PYTEST = ["-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q", "-rfE"]
# A release below the newest runs its adapter's tests leaner: one moment of the kill during a save, the switched-off
# comparison under one loss type (the newest release runs them all, in CI and in the sweep).
LEAN = {"trl": ["-k", "(not moment_of_a_save or trainer_state) and not each_loss_type"],
        "ms-swift": ["-k", "(not switched_off or dapo) and (not moment_of_a_save or trainer_state)",
                     "--ignore", "tests/swift/test_swift_packed_batches.py"],
        "transformers": ["-k", "not moment_of_a_save or trainer_state"], "axolotl": [],
        "verl": []}
# verl below its newest release: the estimators' files and those of what differs between releases (the version check,
# the gdpo guard, dynamic sampling, the snapshots back-end 0.9.0's v1 trainer uses), not the files of 0.9.1's
# checkpoint hook (they import it), and verl 0.9.0's main_ppo end to end
VERL_OLDER = [*(f"tests/verl/test_{name}.py" for name in ("estimators", "input_checks", "verl_integration",
                                                         "parse_once", "verl_versions", "gdpo_with_dgpo_options",
                                                         "dynamic_sampling", "legacy_resume")),
              "tests/e2e/test_verl090_e2e.py", "-m", "not verl091"]


def outside(session: nox.Session) -> None:
    """The session's temporary files outside its virtualenv: nox's ``create_tmp`` points TMPDIR into it, where Ray
    refuses its temp_dir ("must not be child directory of virtualenv root"): verl's main_ppo would hang at start."""
    session.env["TMPDIR"] = tempfile.mkdtemp(prefix=f"nox-{session.name}-")


def newest(framework: str) -> str:
    return RELEASES[framework][-1]


def installed(session: nox.Session) -> dict[str, str]:
    """name -> version of what the session's environment holds (``uv pip list``)."""
    out = session.run("uv", "pip", "list", "--quiet", "--format", "json", silent=True, external=True, stderr=None)
    return {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in json.loads(out)}


def install_extra(session: nox.Session, extra: str, editable: bool = False) -> dict[str, str]:
    """This checkout's ``extra`` into the framework's environment, as a user installs it (no constraints); fails
    unless it added ``verl-hadw`` alone and changed nothing installed. What is installed after."""
    before = installed(session)
    source = ["-e", f".[{extra}]"] if editable else [f".[{extra}]"]
    session.install("--reinstall-package", "verl-hadw", "--refresh-package", "verl-hadw", *source)
    after = installed(session)
    if "verl-hadw" in before and before == after:  # nox -R: nothing installed, the environment as it was made
        session.log("installs skipped (-R): the extra's diff was checked when this environment was made")
        return after
    changed = {k: (v, after.get(k)) for k, v in before.items() if after.get(k) != v}
    added = sorted(after.keys() - before.keys())
    session.log(f"freeze before: {' '.join(f'{k}=={v}' for k, v in sorted(before.items()))}")
    session.log(f"freeze diff of the [{extra}] extra: added {added}, changed {changed or 'nothing'}")
    if added != ["verl-hadw"] or changed:
        session.error(f"the [{extra}] extra must add verl-hadw alone: it added {added} and changed {changed}")
    return after


def install_tools(session: nox.Session, after: dict[str, str], *tools: str) -> None:
    """The tests' tools, pinned to what is installed: they may add packages, never change one."""
    pins = Path(session.env["TMPDIR"]) / "installed.txt"  # not session.create_tmp(): it points TMPDIR back inside
    pins.write_text("".join(f"{k}=={v}\n" for k, v in after.items() if re.fullmatch(r"[0-9][0-9a-z.+]*", v)))
    session.install("-c", str(pins), *(tools or TOOLS))


def pytest(session: nox.Session, *args: str, env: dict | None = None) -> None:
    session.run("pytest", *PYTEST, *args, env={"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1",
                                               "TOKENIZERS_PARALLELISM": "false", **(env or {})})


def framework(session: nox.Session, name: str, release: str) -> None:
    """One release of ``name``: the framework first, then the extra (its freeze diff checked), then its adapter's
    tests. A sweep writes the result to ``RESULTS`` whatever it is."""
    outcome = "failed"
    outside(session)
    try:
        if name == "transformers":
            first = [f"trl=={newest('trl')}", f"transformers=={release}"]
        else:
            first = [f"{name}=={release}"]
        session.install("-c", CONSTRAINTS, *first, *BESIDE[name])
        after = install_extra(session, EXTRA[name])
        install_tools(session, after)
        args = list(session.posargs) or [*FOLDERS[name], *([] if release == newest(name) else LEAN[name])]
        env = {}
        if name in ("ms-swift", "axolotl"):
            shutil.rmtree(RECORDS / session.name, ignore_errors=True)  # this run's records, none of an earlier one
            env["VERL_HADW_RECORDS"] = str(RECORDS / session.name)
            env["SWIFT_ENV_RANKS"] = "2" if release == newest(name) else "1"
        if name == "verl" and release != newest(name) and not session.posargs:
            args = VERL_OLDER
        pytest(session, *args, env=env)
        outcome = "passed"
    finally:
        if not session.posargs:  # the adapter's tests as the sweep runs them: a row of docs/install.md's table
            RESULTS.mkdir(parents=True, exist_ok=True)
            row = {"framework": name, "release": release, "result": outcome, "date": datetime.date.today().isoformat()}
            (RESULTS / f"{session.name}.json").write_text(json.dumps(row))


def define(name: str, release: str) -> None:
    ends = (RELEASES[name][0], newest(name))
    covered = name in ("verl", "trl") and release == newest(name)  # the main suite's environment: see ``tests``
    tags = ["sweep"] + (["ci"] if release in ends and name != "transformers" and not covered else [])
    short = {"ms-swift": "swift"}.get(name, name)

    def run(session: nox.Session) -> None:
        framework(session, name, release)

    paths = FOLDERS[name]
    shown = [p for i, p in enumerate(paths) if p.startswith("tests/") and (i == 0 or paths[i - 1] != "--ignore")]
    run.__doc__ = f"{name} {release}, then the [{EXTRA[name]}] extra; {' '.join(shown)}."
    nox.session(name=f"{short}-{release}", tags=tags, venv_params=SEED)(run)


@nox.session(tags=["ci"])
def lint(session: nox.Session) -> None:
    """ruff check (pyproject.toml), the ruff .pre-commit-config.yaml pins."""
    (rev,) = re.findall(r"ruff-pre-commit\s+rev: v([\d.]+)", (ROOT / ".pre-commit-config.yaml").read_text())
    session.install(f"ruff=={rev}")
    session.run("ruff", "check", ".")


@nox.session(tags=["ci"])
def typecheck(session: nox.Session) -> None:
    """mypy over the examples, as a user's type checker reads them: the installed package is typed (py.typed)."""
    session.install("-c", CONSTRAINTS, f"trl=={newest('trl')}", *BESIDE["trl"], ".[trl]", "mypy")
    session.run("mypy", "examples/trl_hadw.py")  # pyproject.toml's [tool.mypy]


@nox.session(tags=["ci"])
def docs(session: nox.Session) -> None:
    """mkdocs build --strict: every page in the nav, every link and anchor found."""
    session.install("mkdocs>=1.6,<2")
    session.run("mkdocs", "build", "--strict", "--site-dir", session.create_tmp() + "/site")


@nox.session(tags=["ci"], venv_params=SEED)
def tests(session: nox.Session) -> None:
    """The main suite on both cores: verl's and TRL's newest releases (their freeze diff checked), every folder but
    the ms-swift and Axolotl adapters'; the demo's and the trainer modes' main_ppo launches."""
    outside(session)
    session.install("-c", CONSTRAINTS, f"verl=={newest('verl')}", f"trl=={newest('trl')}", *BESIDE["verl"],
                    *BESIDE["trl"])
    install_extra(session, "verl,trl", editable=True)
    session.install("-c", CONSTRAINTS, "-e", ".[verl,trl,repro,research,test]")
    session.run("python", "-m", "verl_hadw.cli", "doctor")  # verl sees the estimators
    session.run("pytest", *PYTEST, "--durations=25", *session.posargs,
                env={"WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_TELEMETRY": "1"})


for _name in RELEASES:
    for _release in RELEASES[_name]:
        define(_name, _release)


@nox.session(tags=["ci"], venv_params=SEED)
def compare(session: nox.Session) -> None:
    """The same generation batches through every framework: what the ms-swift and Axolotl sessions trained on,
    replayed through TRL's adapter and verl's estimator (run those sessions first)."""
    session.install("-c", CONSTRAINTS, f"verl=={newest('verl')}", f"trl=={newest('trl')}", *BESIDE["verl"],
                    *BESIDE["trl"], *TOOLS)
    session.install("--reinstall-package", "verl-hadw", "--refresh-package", "verl-hadw", ".[verl,trl]")
    kept = [RECORDS / f"{short}-{r}" for short, name in (("swift", "ms-swift"), ("axolotl", "axolotl"))
            for r in (RELEASES[name][0], newest(name))]
    pytest(session, "tests/hf_trainer/test_across_frameworks.py",
           env={"VERL_HADW_COMPARE": os.pathsep.join(str(k) for k in dict.fromkeys(kept))})


@nox.session(tags=["sweep"], venv_backend="none")
def tested_releases(session: nox.Session) -> None:
    """The sweep's table (framework, release, result, date) into docs/install.md."""
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    order = {(f, r): (i, j) for i, f in enumerate(RELEASES) for j, r in enumerate(RELEASES[f])}
    rows = sorted((r for r in rows if (r["framework"], r["release"]) in order),
                  key=lambda r: order[r["framework"], r["release"]])
    missing = sorted(set(order) - {(r["framework"], r["release"]) for r in rows})
    if missing:
        session.error(f"no sweep result for {missing}: run nox -t sweep")
    lines = [BEGIN, "", "| framework | release | result | date |", "|---|---|---|---|"]
    lines += [f"| {r['framework']} | {r['release']} | {r['result']} | {r['date']} |" for r in rows]
    page = INSTALL_PAGE.read_text()
    head, rest = page.split(BEGIN)
    INSTALL_PAGE.write_text(head + "\n".join(lines) + "\n\n" + END + rest.split(END)[1])
    session.log(f"{INSTALL_PAGE.relative_to(ROOT)}: {len(rows)} releases")

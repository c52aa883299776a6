"""The package's import graph: no loops, dependencies only downward, no private names across modules, a lazy CLI;
and the tests' layout: each test file in the folder of the package it tests, the helpers in tests/helpers/.

The packages and what each may import are the packages table of docs/layout.md: the core, the four adapters (verl's, in
its subpackages; TRL's, ms-swift's and Axolotl's, over their shared hf_trainer package); the core imports no adapter,
and no adapter another. Every import counts, also those inside functions (an import loop through a lazy import is still
a loop).
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import HELPERS, ROOT, TESTS

PACKAGE = ROOT / "verl_hadw"

# package -> (the modules in it, as prefixes of dotted names; the packages it may import besides itself)
ADAPTERS = ["verl", "trl", "swift", "axolotl"]
# verl's adapter: entry modules at its top, and two subpackages (folders) below them, each importing only downward
VERL_PACKAGES = ["verl", "verl.anchor_store", "verl.config", "verl.base"]
PACKAGES = {
    # the framework-free core: nothing of ours outside it (tests/core/test_core_alone.py: nor any framework)
    "core": (["verl_hadw.core"], []),
    "top": (["verl_hadw"], []),  # the version and the ranges
    # verl's adapter's entry modules
    "verl": (["verl_hadw.verl"], ["core", "top", *VERL_PACKAGES[1:]]),
    # the anchor: client, stores, persistence, both checkpoint back-ends
    "verl.anchor_store": (["verl_hadw.verl.anchor_store"], ["core", "top", "verl.config", "verl.base"]),
    # the config's jobs: one read per call, the parse, the checks
    "verl.config": (["verl_hadw.verl.config"], ["core", "top", "verl.base"]),
    # the entry modules both subpackages build on: verl's words, the process state (and verl's current step), the
    # installed verl against the range (read without importing verl) and whether verl's workers start beside TRL
    "verl.base": ([f"verl_hadw.verl.{m}" for m in ("verl_terms", "process_state", "support")],
                  ["core", "top"]),
    # what the HF-Trainer-based adapters share: the core and transformers only
    "hf_trainer": (["verl_hadw.hf_trainer"], ["core", "top"]),
    "trl": (["verl_hadw.trl"], ["core", "top", "hf_trainer"]),  # never verl's adapter: a TRL install has no verl
    # ms-swift's adapter: its own environment (trl<1.0), so never TRL's adapter, nor verl's
    "swift": (["verl_hadw.swift"], ["core", "top", "hf_trainer"]),
    # Axolotl's adapter: its own environment (it pins its TRL), so never TRL's adapter, nor verl's
    "axolotl": (["verl_hadw.axolotl"], ["core", "top", "hf_trainer"]),
    "cpu": (["verl_hadw.cpu"], ["core", "top", *VERL_PACKAGES]),
    # the toy and arithmetic tasks, their launcher, where configs live, verl's console lines, headless plots
    "toy": (["verl_hadw.toy"], ["core", "top", *VERL_PACKAGES]),
    "repro": (["verl_hadw.repro"], ["core", "top", *VERL_PACKAGES, "toy"]),
    # the studies: verl's through main_ppo, the TRL study through TRL's adapter (research.trl_study_run)
    "research": (["verl_hadw.research"], ["core", "top", *VERL_PACKAGES, "toy", "hf_trainer", "trl"]),
    "cli": (["verl_hadw.cli"], ["core", "top", *VERL_PACKAGES, "cpu", "toy", "repro", "research"]),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def package_of(module: str) -> str:
    """The package whose longest prefix matches ``module``."""
    best = max(
        ((prefix, package) for package, (prefixes, _) in PACKAGES.items() for prefix in prefixes
         if module == prefix or (prefix != "verl_hadw" and module.startswith(prefix + "."))),
        key=lambda pair: len(pair[0]),
        default=(None, None),
    )
    assert best[1] is not None, f"{module} is in no package: add it to PACKAGES (and docs/layout.md)"
    return best[1]


def imports_of(module: str) -> list[tuple[str, list[str], int]]:
    """(imported verl_hadw module, names taken from it, line) for every import statement of ``module``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "verl_hadw"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] != "verl_hadw":
                continue
            names = [a.name for a in node.names]
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            out += [(m, [], node.lineno) for m in submodules]  # ``from pkg import module``
            out.append((base, [n for n in names if f"{base}.{n}" not in MODULES], node.lineno))
    return [(target, names, line) for target, names, line in out if target in MODULES]


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_is_in_a_package():
    assert len(MODULES) > 40
    for module in MODULES:
        package_of(module)


def test_no_import_loops():
    edges = {m: {t for t, _, _ in GRAPH[m] if t != m} for m in GRAPH}
    state, loops = {}, []

    def visit(m, path):
        state[m] = "open"
        for t in sorted(edges[m]):
            if state.get(t) == "open":
                loops.append(" -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert loops == [], "import loops:\n" + "\n".join(loops)


def test_dependencies_point_only_downward():
    upward = []
    for module, imports in GRAPH.items():
        package = package_of(module)
        allowed = {package, *PACKAGES[package][1]}
        upward += [f"{module}:{line} imports {t} ({package} -> {package_of(t)})"
                   for t, _, line in imports if package_of(t) not in allowed]
    assert upward == [], "imports against the layering:\n" + "\n".join(upward)


def test_no_private_name_is_imported_across_modules():
    private = [f"{module}:{line} imports {t}.{n}" for module, imports in GRAPH.items() for t, names, line in imports
               for n in names if n.startswith("_") and not n.startswith("__") and t != module]
    private += [f"{module}:{line} imports {t}" for module, imports in GRAPH.items() for t, _, line in imports
                if any(part.startswith("_") and not part.startswith("__") for part in t.split("."))]
    assert private == [], "\n".join(private)


def test_the_graph_sees_what_it_checks():
    """The checks above would pass on an empty graph: make sure they see the known edges."""
    client = {t for t, _, _ in GRAPH["verl_hadw.verl.anchor_store.client"]}
    assert {"verl_hadw.verl.anchor_store.stores", "verl_hadw.core.errors",
            "verl_hadw.verl.process_state"} <= client
    validation = {t for t, _, _ in GRAPH["verl_hadw.verl.startup_check"]}
    assert "verl_hadw.verl.estimators" in validation  # a lazy import
    assert package_of("verl_hadw.core.anchor.machine") == "core" and package_of("verl_hadw") == "top"
    assert package_of("verl_hadw.verl.checkpoint_callback") == "verl"
    assert package_of("verl_hadw.trl.grpo_trainer") == "trl"


# the roles every HF-Trainer-based adapter holds, under the same names (a new framework copies one adapter's folder)
HF_ADAPTERS, HF_ROLES = ("trl", "swift", "axolotl"), ("grpo_config.py", "grpo_trainer.py", "checks.py")


def test_the_hf_adapters_hold_the_same_roles_under_the_same_names():
    for adapter in HF_ADAPTERS:
        files = {p.name for p in (PACKAGE / adapter).glob("*.py")}
        assert set(HF_ROLES) <= files, f"verl_hadw/{adapter}/ lacks {sorted(set(HF_ROLES) - files)}"


def test_no_two_modules_share_a_file_name_but_the_adapters_roles():
    names = {}
    for module, path in MODULES.items():
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.name, []).append(module)
    shared = {n: ms for n, ms in names.items() if len(ms) > 1 and n not in HF_ROLES}
    assert shared == {}, f"file names used by several modules: {shared}"


@pytest.mark.parametrize("argv", [None, ["options"], ["doctor", "--help"]])
def test_the_cli_imports_no_repro_or_research_module_it_does_not_run(argv):
    code = (
        "import sys\n"
        "import verl_hadw.cli as cli\n"
        + ("" if argv is None else f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n")
        + "print(sorted(m for m in sys.modules if m.startswith(('verl_hadw.repro', 'verl_hadw.research'))))\n"
        "print(sorted(m for m in sys.modules if m.startswith('verl_hadw.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded, commands = out.strip().splitlines()[-2:]
    assert loaded == "[]"
    expected = [] if argv is None else sorted([f"verl_hadw.cli.{argv[0]}_cmd", "verl_hadw.cli.arguments"])
    assert commands == repr(expected)


# ------------------------------------------------------------------------------------------------ the tests' layout
# tests/ folder -> the packages (of PACKAGES) its test files test (tests/README.md); None: the project's own checks
TEST_FOLDERS = {
    "core": ["core"],
    "verl": VERL_PACKAGES,  # its entry modules and its subpackages (config/, anchor_store/)
    "trl": ["trl"],
    "swift": ["swift"],
    "axolotl": ["axolotl"],
    "hf_trainer": ["hf_trainer"],
    "e2e": ["cpu", "toy"],  # verl's real main_ppo on CPU: verl_hadw.cpu and the toy's launcher
    "repro": ["repro"],
    "research": ["research"],
    "cli": ["cli"],
    "project": None,
}
TOP_LEVEL_TESTS: set[str] = set()  # test files allowed at tests/ itself, outside every folder: none
NAMED_FILE = re.compile(r"[\w./-]+\.(?:py|sh|sbatch)\b")
RUNNABLE = {p.name: p for folder in (HELPERS, ROOT / "scripts", ROOT / "examples", ROOT / "benchmarks")
            for p in sorted(folder.rglob("*")) if p.suffix in (".py", ".sh", ".sbatch")}


def all_test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def package_named(name: str) -> str | None:
    """The package of a dotted name under verl_hadw (a module, or a name in one), None for no module of ours."""
    module = max((m for m in MODULES if name == m or name.startswith(m + ".")), key=len, default=None)
    return None if module is None else package_of(module)


def reach(path: Path, seen: set[Path], named: bool) -> set[str]:
    """The packages ``path`` imports: itself, and through the helpers and its folder's test files it imports; with
    ``named``, also the packages it names (``verl_hadw.x`` or ``verl_hadw/x``: a subprocess's code, a path) and those of
    the files it names that run (a helpers script, a script, an example, a benchmark), transitively."""
    if path in seen:
        return set()
    seen.add(path)
    text = path.read_text(encoding="utf-8")
    packages, others = set(), set()
    if path.suffix == ".py":
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "verl_hadw"]
            else:
                continue
            packages |= {package_named(n) for n in names if n.split(".")[0] == "verl_hadw"} - {None}
            others |= {n.split(".")[0] for n in names}
    local = {**{p.stem: p for p in HELPERS.glob("*.py")}, **{p.stem: p for p in path.parent.glob("test_*.py")}}
    for module in sorted(others & set(local)):
        packages |= reach(local[module], seen, named)
    if named:
        named_here = re.findall(r"verl_hadw[./]\w+(?:\.\w+)*", text)
        packages |= {package_named(m.replace("/", ".")) for m in named_here} - {None}
        for name in sorted({Path(n).name for n in NAMED_FILE.findall(text)} & set(RUNNABLE)):
            packages |= reach(RUNNABLE[name], seen, named)
    return packages


def test_every_test_file_is_in_the_folder_of_a_package():
    assert set(TEST_FOLDERS) - {"project", "e2e"} <= set(PACKAGES) and "core" in TEST_FOLDERS
    misplaced = [str(p.relative_to(TESTS)) for p in all_test_files()
                 if not (p.parent.parent == TESTS and p.parent.name in TEST_FOLDERS)
                 and not (p.parent == TESTS and p.name in TOP_LEVEL_TESTS)]
    assert misplaced == [], f"test files outside the packages' folders (TEST_FOLDERS, tests/README.md): {misplaced}"
    names = [p.name for p in all_test_files()]
    assert sorted({n for n in names if names.count(n) > 1}) == [], "test file names must be unique across tests/"


def test_each_test_file_tests_a_package_of_its_folder():
    """It imports a module of the folder's packages, or names one (a subprocess's code, a script it runs): itself, or
    through the helpers and its folder's test files."""
    assert len(all_test_files()) > 80
    strays = []
    for path in all_test_files():
        packages, where = TEST_FOLDERS.get(path.parent.name), str(path.relative_to(TESTS))
        if packages is None:
            continue
        if not set(packages) & reach(path, set(), named=True):
            strays.append(f"{where} tests none of {packages}")
    assert strays == [], "\n".join(strays)


def test_the_cores_tests_import_only_the_core():
    """What the TRL and ms-swift environments run of the core (tests/core/) imports nothing of verl_hadw outside it."""
    core_tests = sorted((TESTS / "core").glob("test_*.py"))
    outside = {str(p.relative_to(TESTS)): sorted(packages - {"core"}) for p in core_tests
               if (packages := reach(p, set(), named=False)) - {"core"}}
    assert outside == {}


def test_the_helpers_live_in_tests_helpers():
    """Outside tests/helpers/ only test files, conftest.py files and tests/README.md; no __init__.py anywhere."""
    files = [p for p in TESTS.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert any(p.parent == HELPERS for p in files) and (TESTS / "README.md").is_file()
    stray = [str(p.relative_to(TESTS)) for p in files if HELPERS not in p.parents
             and not (p.name.startswith("test_") and p.suffix == ".py") and p.name != "conftest.py"
             and p != TESTS / "README.md"]
    assert stray == [], f"helpers outside tests/helpers/: {stray}"
    assert [p for p in files if p.name == "__init__.py"] == []  # verl's wheel installs a top-level ``tests``


def test_the_readme_names_every_folder():
    readme = (TESTS / "README.md").read_text(encoding="utf-8")
    folders = [p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert set(folders) <= set(TEST_FOLDERS) | {"helpers"}, folders
    assert [f for f in [*TEST_FOLDERS, "helpers"] if f"`tests/{f}/`" not in readme] == []

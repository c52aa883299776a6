"""The core stands alone: it imports nothing beyond torch, numpy and the standard library, and each adapter without
its framework fails with one line naming the install command."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

CORE = ROOT / "verl_hadw" / "core"
FRAMEWORKS = ("verl", "trl", "swift", "ray", "omegaconf", "hydra", "transformers")
CORE_MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in CORE.rglob("*.py") if "__pycache__" not in p.parts
)

# A finder that makes every import of a framework (and of its submodules) raise, as in an environment without it.
BLOCK = f"""
import sys, importlib.abc
BLOCKED = {FRAMEWORKS!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: the core must not import it")
        return None
sys.meta_path.insert(0, Block())
"""


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_every_core_module_imports_with_every_framework_blocked():
    assert len(CORE_MODULES) >= 14 and "verl_hadw.core.anchor.machine" in CORE_MODULES
    code = (
        "import importlib\n"
        f"for name in {CORE_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "ours = sorted(m for m in sys.modules if m.startswith('verl_hadw') and m != 'verl_hadw'"
        " and not m.startswith('verl_hadw.core'))\n"
        "frameworks = sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED)\n"
        "print(ours, frameworks)\n"
    )
    proc = run(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[] []"  # nothing of an adapter loaded, no framework


def test_the_blocker_blocks():
    """The test above would pass with a finder that blocks nothing."""
    proc = run("import omegaconf\n")
    assert proc.returncode != 0 and "omegaconf is blocked" in proc.stderr


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add((node.module or "").split(".")[0])
    return names


def test_the_core_names_nothing_beyond_torch_numpy_and_the_standard_library():
    """Also the imports a run may never reach (inside functions, under a condition)."""
    allowed = set(sys.stdlib_module_names) | {"torch", "numpy", "__future__"}
    outside = {}
    for path in CORE.rglob("*.py"):
        names = _top_level_imports(path)
        ours = names - allowed - {"verl_hadw"}
        if ours:
            outside[str(path.relative_to(ROOT))] = sorted(ours)
        source = path.read_text(encoding="utf-8")
        for module in ("verl_hadw.verl", "verl_hadw.trl", "verl_hadw.swift", "verl_hadw.axolotl",
                       "verl_hadw.hf_trainer",
                       "verl_hadw.cpu", "verl_hadw.toy"):
            if module in {line.split()[1] for line in source.splitlines() if line.startswith(("from ", "import "))}:
                outside.setdefault(str(path.relative_to(ROOT)), []).append(module)
    assert outside == {}


@pytest.mark.parametrize("adapter, framework, extra", [
    ("verl_hadw.verl", "verl", "verl"),
    ("verl_hadw.verl.checkpoint_callback", "verl", "verl"),
    ("verl_hadw.trl", "trl", "trl"),
    ("verl_hadw.swift", "swift", "swift"),
    ("verl_hadw.axolotl", "axolotl", "axolotl"),
])
def test_an_adapter_without_its_framework_fails_with_one_line_naming_the_install(adapter, framework, extra):
    proc = run(f"import {adapter}\n")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: ") and f"needs {framework}, which is not installed" in last
    assert f'pip install "verl-hadw[{extra}]"' in last and f'pip install -e ".[{extra}]"' in last

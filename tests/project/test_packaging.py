"""Packaging: a wheel built from a clean checkout builds without setuptools package warnings, ships every YAML,
and works installed non-editable (a fresh virtualenv that sees verl's dependencies but not this checkout)."""

import os
import re
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from repo_paths import ROOT

import verl_hadw

pytestmark = pytest.mark.slow

PACKAGE_WARNINGS = re.compile(
    r"absent from the `packages` configuration|Package would be ignored|package init file .* not found", re.I
)


def sh(*cmd, cwd=None, env=None, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel of the checkout's committed files (``git ls-files``: what a clean clone has)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    files = sh("git", "ls-files", cwd=ROOT).split()
    for name in files:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes((ROOT / name).read_bytes())
    log = sh(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp / "dist", src)
    (path,) = (tmp / "dist").glob("verl_hadw-*.whl")
    return path, log, files


def test_wheel_builds_without_package_warnings_and_ships_every_yaml(wheel):
    path, log, files = wheel
    assert not PACKAGE_WARNINGS.findall(log), PACKAGE_WARNINGS.findall(log)
    names = set(zipfile.ZipFile(path).namelist())
    yamls = {
        f.replace("configs/", "verl_hadw_configs/", 1)
        for f in files
        if f.startswith("configs/") and f.endswith(".yaml")
    }
    assert len(yamls) > 40 and yamls <= names, sorted(yamls - names)
    modules = {f for f in files if f.startswith("verl_hadw/") and f.endswith(".py")}
    assert modules <= names, sorted(modules - names)


def test_wheel_metadata_has_one_verl_range_and_the_extras(wheel):
    """The base install is the core (torch, numpy); verl comes with [verl] as a range (one place: VERL_RANGE), TRL
    with [trl] as a range, never verl; the HF adapters' extras bound transformers (TRANSFORMERS_RANGE); [gpu]
    follows verl's own GPU pins through its extras (vllm, fsdp)."""
    from packaging.requirements import Requirement

    path, _, _ = wheel
    (meta,) = [n for n in zipfile.ZipFile(path).namelist() if n.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(path).read(meta).decode()
    requires = [Requirement(r) for r in re.findall(r"^Requires-Dist: (.*)$", text, re.M)]
    core = sorted(r.name for r in requires if r.marker is None)
    assert core == ["numpy", "torch"]
    by_extra = {}
    for r in requires:
        if r.marker is not None:
            by_extra.setdefault(str(r.marker).split('"')[1], {})[r.name] = r
    assert by_extra["verl"]["verl"].specifier == Requirement(f"verl{verl_hadw.VERL_RANGE}").specifier
    assert by_extra["verl"]["verl"].specifier.contains(verl_hadw.VERL_VERSION)
    assert set(by_extra["trl"]) == {"trl", "transformers"} and str(by_extra["trl"]["trl"].specifier) != ""
    trl = by_extra["trl"]["trl"].specifier
    assert trl == Requirement(f"trl{verl_hadw.TRL_RANGE}").specifier and not trl.contains("0.29.1")
    transformers = Requirement(f"transformers{verl_hadw.TRANSFORMERS_RANGE}").specifier  # its private API: bounded
    assert all(by_extra[extra]["transformers"].specifier == transformers for extra in ("trl", "swift", "axolotl"))
    assert str(by_extra["gpu"]["verl"].specifier) == f"=={verl_hadw.VERL_VERSION}"
    assert by_extra["gpu"]["verl"].extras == {"fsdp", "vllm"}
    assert re.search(r"^Version: " + re.escape(verl_hadw.__version__) + "$", text, re.M)
    assert "License-Expression: Apache-2.0" in text.splitlines() and "License-File: LICENSE" in text.splitlines()
    licence = zipfile.ZipFile(path).read(meta.replace("METADATA", "licenses/LICENSE")).decode()
    assert licence == (ROOT / "LICENSE").read_text() and "Apache License" in licence and "Version 2.0" in licence
    for extra in ("verl", "trl", "repro", "research", "test", "gpu"):
        assert f"Provides-Extra: {extra}" in text


def test_the_verl_extra_installs_beside_the_installed_verl(tmp_path):
    """pip's resolver, offline, in this environment (verl 0.9.1 installed, as a verl user's): the checkout's
    [verl] extra would install verl-hadw alone, replacing and adding nothing."""
    import json
    from importlib.metadata import version

    report = tmp_path / "report.json"
    sh(sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation", "--report", report,
       "-q", f"{ROOT}[verl]", cwd=tmp_path)
    installs = [(i["metadata"]["name"], i["metadata"]["version"]) for i in json.loads(report.read_text())["install"]]
    assert [name for name, _ in installs] == ["verl-hadw"], installs
    assert version("verl") == "0.9.1"


def test_sdist_and_wheel_pass_twine_check(tmp_path):
    """``python -m build`` (sdist and wheel from a clean copy) and ``twine check``: ready to publish."""
    src = tmp_path / "src"
    for name in sh("git", "ls-files", cwd=ROOT).split():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes((ROOT / name).read_bytes())
    sh(sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp_path / "dist", src)
    built = sorted((tmp_path / "dist").iterdir())
    assert sorted(p.suffix for p in built) == [".gz", ".whl"], built
    with tarfile.open(next(p for p in built if p.suffix == ".gz")) as sdist:  # the licence travels with the source
        assert f"verl_hadw-{verl_hadw.__version__}/LICENSE" in sdist.getnames()
    out = sh(sys.executable, "-m", "twine", "check", "--strict", *built)
    assert out.count("PASSED") == 2, out


def _new_venv(tmp: Path, *install: str | Path) -> tuple[Path, Path]:
    """A new virtualenv with ``pip install --no-deps --no-index *install``; verl and friends come from this
    environment's site-packages, added to the new one's ``sys.path`` by a ``.pth`` line: a folder named so is only
    searched, its own ``.pth`` files (this checkout's editable install among them) are not run, so nothing of the
    checkout can leak in. (A copy of it made of symlinks would give every module a new path, and Python would
    compile torch and verl again for it.)"""
    sh(sys.executable, "-m", "venv", "--without-pip", tmp / "venv")
    (ours,) = [Path(p) for p in site.getsitepackages() if (Path(p) / "verl").is_dir()]
    (new_site,) = (tmp / "venv" / "lib").glob("python*/site-packages")
    (new_site / "deps.pth").write_text(f"{ours}\n")
    python = tmp / "venv" / "bin" / "python"
    sh(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *install)
    return tmp / "venv", new_site


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A new virtualenv with the wheel installed."""
    return _new_venv(tmp_path_factory.mktemp("venv"), wheel[0])


def run_in(venv, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VERL_HADW_CONFIGS")}
    return sh(*args, cwd=venv[0].parent, env=env)


def test_installed_wheel_doctor_configs_and_demo_config(venv):
    bin_dir = venv[0] / "bin"
    out = run_in(venv, bin_dir / "verl-hadw", "doctor")
    assert "all good" in out and "hadw -> verl_hadw.verl.estimators.compute_hadw_outcome_advantage" in out
    runs = run_in(venv, bin_dir / "verl-hadw", "configs", "--list")
    assert "hadw_t1_qwen3_4b_grpo_hadw" in runs and "dgpo_t1_dgpo" in runs
    # a run of <paper>/experiments/ composes from the installed YAMLs (no configs/__init__.py: a namespace package)
    where = run_in(venv, bin_dir / "verl-hadw", "configs").strip()
    assert Path(where, "hadw", "experiments", "hadw_t1_qwen3_4b_grpo_hadw.yaml").is_file()
    assert not list(Path(where).rglob("*.py")) and Path(where).resolve().is_relative_to(venv[1].resolve()), where
    name = run_in(venv, bin_dir / "verl-hadw", "configs", "--get", "trainer.experiment_name", "dgpo_t1_dgpo")
    assert name.strip().splitlines()[-1] == "dgpo_t1_dgpo"
    where = run_in(venv, bin_dir / "python", "-c",
                   "from verl_hadw.toy.launch import config_dir; import verl_hadw, os; "
                   "print(config_dir()); print(os.path.dirname(verl_hadw.__file__))").split()
    assert Path(where[0], "demo.yaml").is_file()
    for p in where:  # both from the installed wheel, not the checkout
        assert Path(p).resolve().is_relative_to(venv[1].resolve()), p


def test_editable_install_finds_the_checkouts_configs(tmp_path):
    """``pip install -e`` (setuptools' editable finder maps the namespace package verl_hadw_configs to configs/):
    ``verl-hadw configs`` prints the checkout's configs/ and composes a run from it."""
    src = tmp_path / "src"
    for name in sh("git", "ls-files", cwd=ROOT).split():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes((ROOT / name).read_bytes())
    venv = _new_venv(tmp_path, "--no-build-isolation", "-e", src)
    bin_dir = venv[0] / "bin"
    assert Path(run_in(venv, bin_dir / "verl-hadw", "configs").strip()) == src / "configs"
    found = run_in(venv, bin_dir / "python", "-c", "import importlib.util as u; "
                   "print(list(u.find_spec('verl_hadw_configs').submodule_search_locations)[0])")
    assert Path(found.strip()) == src / "configs"  # the installed mapping, not config_paths' checkout fallback
    name = run_in(venv, bin_dir / "verl-hadw", "configs", "--get", "trainer.experiment_name", "hadw_t7_lambda_15")
    assert name.strip().splitlines()[-1] == "hadw_t7_lambda_15"


def test_installed_wheel_runs_hadw_through_verl(venv):
    code = (
        "import numpy as np, torch, verl_hadw\n"
        "from omegaconf import OmegaConf\nfrom verl import DataProto\n"
        "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
        "from verl.trainer.ppo.ray_trainer import compute_advantage\n"
        "r = torch.zeros(4, 3); r[:, -1] = torch.tensor([1., 0., 1., 1.])\n"
        "d = DataProto.from_dict(tensors={'token_level_rewards': r, 'response_mask': torch.ones(4, 3)},"
        " non_tensors={'uid': np.array(list('aabb'), dtype=object)})\n"
        "cfg = OmegaConf.create({'adv_estimator': 'hadw', 'norm_adv_by_std_in_grpo': True})\n"
        "adv = compute_advantage(d, 'hadw', config=cfg).batch['advantages']\n"
        "import inspect; print('SRC=' + inspect.getfile(get_adv_estimator_fn('hadw')))\n"
        "print('POS=%s' % (float(adv[0, 0]) > 0))\n"
    )
    out = run_in(venv, venv[0] / "bin" / "python", "-c", code)
    src, positive = re.search(r"^SRC=(.*)$", out, re.M).group(1), re.search(r"^POS=(.*)$", out, re.M).group(1)
    assert Path(src).resolve().is_relative_to(venv[1].resolve()) and positive == "True"


# ----------------------------------------------------------------------------------------------- GPU install
FAKE_PYTHON = r"""#!/usr/bin/env bash
# records what scripts/install_gpu.sh asks pip (and the environment flash-attn's build sees); runs nothing
echo "$* | MAX_JOBS=${MAX_JOBS:-unset}" >>"$PIP_LOG"
"""


def _pins(script: str) -> dict[str, str]:
    return dict(re.findall(r"\b(torch|torchvision|torchaudio|flash-attn)==([0-9.]+)", script))


def test_gpu_install_order_and_pins(tmp_path):
    """scripts/install_gpu.sh (the README's GPU command): torch at verl's pins first, then flash-attn built with
    --no-build-isolation against it (or a prebuilt wheel), then verl[vllm,fsdp] + verl-hadw[gpu,repro]; its pins
    are verl 0.9.1's own (read from the installed verl's metadata)."""
    from importlib.metadata import requires

    script = (ROOT / "scripts" / "install_gpu.sh").read_text()
    verl_pins = {}
    for req in requires("verl"):
        match = re.match(r"(torch|torchvision|torchaudio|flash-attn)==([0-9.]+); extra == \"(\S+)\"", req)
        if match and match.group(3) in ("vllm", "fsdp", "flash-attn-cu130torch211"):
            verl_pins[match.group(1)] = match.group(2)
    assert _pins(script) == verl_pins == {"torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0",
                                          "flash-attn": "2.8.3"}
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(FAKE_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    log = tmp_path / "pip.log"
    torch = "torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0"
    for wheel in ("", "https://example.org/flash_attn-2.8.3+cu13torch2.11-cp311-cp311-linux_x86_64.whl"):
        log.write_text("")
        env = {**os.environ, "VERL_HADW_VENV": str(venv), "PIP_LOG": str(log), "FLASH_ATTN_WHEEL": wheel}
        env.pop("MAX_JOBS", None)
        sh("bash", ROOT / "scripts" / "install_gpu.sh", env=env)
        calls = [line for line in log.read_text().splitlines() if line.startswith("-m pip")]
        flash = (["-m pip install packaging ninja psutil wheel setuptools einops | MAX_JOBS=unset",
                  "-m pip install --no-build-isolation flash-attn==2.8.3 | MAX_JOBS=4"] if not wheel
                 else [f"-m pip install {torch} {wheel} | MAX_JOBS=unset"])
        assert calls == ["-m pip install -U pip | MAX_JOBS=unset", f"-m pip install {torch} | MAX_JOBS=unset",
                         *flash, f"-m pip install {torch} -e .[gpu,repro] | MAX_JOBS=unset"]
        last = log.read_text().split("\n-m pip install " + torch + " -e .[gpu,repro] | MAX_JOBS=unset\n", 1)[1]
        assert last.startswith("-c import flash_attn, torch, verl, verl_hadw, vllm")  # then a check that all import


@pytest.mark.slow  # a minute, most of it waiting on pip's downloads and resolver
def test_gpu_install_set_resolves(tmp_path):
    """pip's resolver (a real `pip install --dry-run --report` in a fresh virtualenv, PyPI metadata only: no
    CUDA wheel is downloaded) accepts the whole pinned set, with flash-attn as the script installs it (step 2,
    before the rest). Prints the versions it picks."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install_gpu.sh"), "--resolve-only"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=2400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    report = out[out.index("[install_gpu] resolved"):]
    print(f"\n{report}(scripts/install_gpu.sh --resolve-only)")
    picked = dict(re.findall(r"^  (\S+)\s+(\S+)", report, re.M))
    assert picked["torch"] == "2.11.0" and picked["vllm"] == "0.24.0" and picked["transformers"] == "5.9.0"
    assert picked["flash-attn"] == "2.8.3" and picked["verl"] == "0.9.1" and picked["verl-hadw"] != "MISSING"


USER_NAMED = r"""
import importlib, importlib.metadata as md, pathlib, re
dist = md.distribution("verl-hadw")
eps = {(e.group, e.name): e.value for e in dist.entry_points}
assert eps[("verl.plugins", "verl_hadw")] == "verl_hadw.verl.entry_point", eps
assert eps[("console_scripts", "verl-hadw")] == "verl_hadw.cli:main", eps
assert eps[("console_scripts", "verl-hadw-swift")] == "verl_hadw.swift.cli:main", eps
for e in dist.entry_points:
    if e.name != "verl-hadw-swift":  # needs ms-swift: loaded by the ms-swift environments (tests/swift)
        assert e.load() is not None, e
import verl_hadw_configs
configs = pathlib.Path(list(verl_hadw_configs.__path__)[0])
text = "\n".join(p.read_text() for p in sorted(configs.rglob("*.yaml")))
targets = set(re.findall(r"(?:_target_|checkpoint_callback_class): *(verl_hadw\S+)", text))
packages = set(re.findall(r"pkg://(verl_hadw[\w.]*)", text))
named = {"verl_hadw.verl.startup_check.StartupCheck", "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"}
assert named <= targets, targets
assert {"verl_hadw.repro.reward", "verl_hadw.cpu.sampler"} <= packages, packages
for path in sorted(targets):
    module, name = path.rsplit(".", 1)
    assert isinstance(getattr(importlib.import_module(module), name), type), path
for module in sorted(packages) + ["verl_hadw.verl.entry_point", "verl_hadw.trl"]:
    importlib.import_module(module)
from verl_hadw.verl.entry_point import register
from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer
from verl_hadw.core.anchor.file_format import STATE_FILE
assert STATE_FILE == "verl_hadw_anchor.json"
for adapter, extra in (("swift", "swift"), ("axolotl", "axolotl")):  # their frameworks' own environments
    try:
        importlib.import_module(f"verl_hadw.{adapter}")
    except ModuleNotFoundError as e:
        assert f'pip install "verl-hadw[{extra}]"' in str(e), e
print("USER-NAMED OK", len(targets), len(packages), sorted(targets | packages))
"""


def test_every_path_a_user_names_imports_from_the_installed_wheel(venv):
    """What users name and this layout must keep: setup.py's entry points and console scripts, the YAMLs'
    ``_target_``, ``pkg://`` paths and ``trainer.checkpoint_callback_class``, the entry point,
    ``verl_hadw.trl``, and the anchor file's name; ``verl_hadw.swift.rlhf_main`` and the ``verl-hadw-swift``
    script load in the ms-swift environments (tests/swift/test_swift_arguments.py),
    ``verl_hadw.axolotl.HadwPlugin`` in the Axolotl environment (tests/axolotl/), which install the extras; here each
    names its install."""
    out = run_in(venv, venv[0] / "bin" / "python", "-c", USER_NAMED)
    assert "USER-NAMED OK" in out, out

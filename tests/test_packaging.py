"""Packaging: a wheel built from a clean checkout builds without setuptools package warnings, ships every YAML,
and works installed non-editable (a fresh virtualenv that sees verl's dependencies but not this checkout)."""

import os
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
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


def test_wheel_metadata_has_one_verl_pin_and_the_extras(wheel):
    """The plugin needs verl alone; [gpu] follows verl's own GPU pins through its extras (vllm, fsdp)."""
    import verl_hadw

    path, _, _ = wheel
    (meta,) = [n for n in zipfile.ZipFile(path).namelist() if n.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(path).read(meta).decode()
    requires = re.findall(r"^Requires-Dist: (.*)$", text, re.M)
    core = [r for r in requires if "extra ==" not in r]
    assert f"verl=={verl_hadw.VERL_VERSION}" in core
    assert not any(
        r.split("[")[0].split("=")[0].split(">")[0].strip() in {"scipy", "matplotlib", "math-verify"} for r in core
    )
    assert f'verl[fsdp,vllm]=={verl_hadw.VERL_VERSION}; extra == "gpu"' in requires
    assert re.search(r"^Version: " + re.escape(verl_hadw.__version__) + "$", text, re.M)
    for extra in ("repro", "research", "test", "gpu"):
        assert f"Provides-Extra: {extra}" in text


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A new virtualenv with the wheel installed; verl and friends come from this environment's site-packages
    (linked in, minus this checkout's editable install), so nothing of the checkout can leak in."""
    path, _, _ = wheel
    tmp = tmp_path_factory.mktemp("venv")
    sh(sys.executable, "-m", "venv", "--without-pip", tmp / "venv")
    (ours,) = [Path(p) for p in site.getsitepackages() if (Path(p) / "verl").is_dir()]
    farm = tmp / "deps"
    farm.mkdir()
    for entry in ours.iterdir():
        if "verl_hadw" in entry.name or entry.suffix == ".pth":
            continue
        (farm / entry.name).symlink_to(entry)
    (new_site,) = (tmp / "venv" / "lib").glob("python*/site-packages")
    (new_site / "deps.pth").write_text(f"{farm}\n")
    python = tmp / "venv" / "bin" / "python"
    sh(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", path)
    return tmp / "venv", new_site


def run_in(venv, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VERL_HADW_CONFIGS")}
    return sh(*args, cwd=venv[0].parent, env=env)


def test_installed_wheel_doctor_configs_and_demo_config(venv):
    bin_dir = venv[0] / "bin"
    out = run_in(venv, bin_dir / "verl-hadw", "doctor")
    assert "all good" in out and "hadw -> verl_hadw.estimators.compute_hadw_outcome_advantage" in out
    runs = run_in(venv, bin_dir / "verl-hadw", "configs", "--list")
    assert "hadw_t1_qwen3_4b_grpo_hadw" in runs and "dgpo_t1_dgpo" in runs
    where = run_in(venv, bin_dir / "python", "-c",
                   "from verl_hadw.toy.launch import config_dir; import verl_hadw, os; "
                   "print(config_dir()); print(os.path.dirname(verl_hadw.__file__))").split()
    assert Path(where[0], "demo.yaml").is_file()
    for p in where:  # both from the installed wheel, not the checkout
        assert Path(p).resolve().is_relative_to(venv[1].resolve()), p


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

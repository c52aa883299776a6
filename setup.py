"""verl-hadw: HA-DW and DGPO advantage estimators for verl (a verl plugin, no fork).

The version and the verl pin are read from ``verl_hadw/__init__.py`` (one place each). The plugin installs with
verl alone; extras: ``repro`` (paper reproductions), ``research`` (theory, simulator), ``test``, ``gpu``.
CPU machines: install with ``-c constraints-cpu.txt`` (torch==2.13.0), or pip pulls a CUDA torch.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
META = dict(
    re.findall(r'^(__version__|VERL_VERSION|\w+_RANGE) = "([^"]+)"', (HERE / "verl_hadw" / "__init__.py").read_text(),
               re.M)
)
VERL = f"verl{META['VERL_RANGE']}"
TRANSFORMERS = f"transformers{META['TRANSFORMERS_RANGE']}"  # the HF adapters reach into its private Trainer methods
# verl's default (v1) trainer imports TransferQueue ... uvicorn, but verl's base requirements omit them; wrapt: the
# entry point's post-import hook (verl_hadw/verl/entry_point.py).
VERL_EXTRA = [VERL, "TransferQueue>=0.1.10", "pyzmq", "msgspec", "cachetools", "fastapi", "uvicorn", "wrapt"]

# configs/ (Hydra YAMLs of the reproductions and the CPU demo) ships as the data package verl_hadw_configs, a
# namespace package (no __init__.py: nothing under configs/ is Python; verl_hadw.toy.config_paths finds it by its
# search locations); every sub-directory is listed as a package so setuptools ships its YAMLs without "absent from
# packages" warnings.
CONFIG_PACKAGES = ["verl_hadw_configs"] + sorted(
    "verl_hadw_configs." + ".".join(p.relative_to(HERE / "configs").parts)
    for p in (HERE / "configs").rglob("*")
    if p.is_dir() and "__pycache__" not in p.parts
)

EXTRAS = {
    "verl": VERL_EXTRA,  # the verl plugin (verl_hadw.verl): beside the user's verl, within VERL_RANGE
    # HA-DW / DGPO in TRL's GRPOTrainer (verl_hadw.trl): no verl, Ray or vLLM
    "trl": [f"trl{META['TRL_RANGE']}", TRANSFORMERS],
    # HA-DW / DGPO in ms-swift's GRPO (verl_hadw.swift), in swift's own environment (it pins trl<1.0);
    # msgspec: swift imports it without declaring it
    "swift": [f"ms-swift{META['SWIFT_RANGE']}", "msgspec", TRANSFORMERS],
    # HA-DW / DGPO in Axolotl's GRPO (verl_hadw.axolotl: its plugin), in Axolotl's own environment (it pins trl)
    "axolotl": [f"axolotl{META['AXOLOTL_RANGE']}", TRANSFORMERS],
    # reward checker, results plot (datasets, pandas, tensorboard: verl); the kit composes and runs verl configs
    "repro": [*VERL_EXTRA, "math-verify", "matplotlib"],
    "research": [*VERL_EXTRA, "scipy", "matplotlib"],  # bias theory, simulator plots (the simulator calls verl)
    "test": [
        "pytest",
        "pytest-xdist",
        "hypothesis",
        "build",
        "setuptools",
        "psutil",
        "ruff",
        "mypy",
        "mkdocs>=1.6,<2",
        "twine",
        "uv",
    ],  # pytest-xdist: the quick loop on both cores (-n 2); build, twine: wheel and sdist checks; psutil: RSS;
    # ruff: lint; mypy: a TRL user's script type-checks (tests/trl/test_trl_types.py); mkdocs: the docs build (anchors need 1.6);
    # uv: the ms-swift environments lay their base environments (ms-swift first) from its cache in seconds
    # GPU-only, never installed on CPU machines: verl's own pins (vllm 0.24.0, torch 2.11.0, transformers 5.9.0,
    # its flash-attn build) through its extras.
    "gpu": [f"verl[vllm,fsdp]=={META['VERL_VERSION']}", *VERL_EXTRA[1:]],
}

setup(
    name="verl-hadw",
    version=META["__version__"],
    description="HA-DW and DGPO group-relative advantage estimators: one core; verl, TRL, ms-swift, Axolotl adapters",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license_expression="Apache-2.0",  # SPDX (PEP 639); the LICENSE file ships in the wheel and the sdist
    license_files=["LICENSE"],
    python_requires=">=3.10",
    packages=find_packages(include=["verl_hadw", "verl_hadw.*"]) + CONFIG_PACKAGES,
    package_dir={"verl_hadw_configs": "configs"},
    package_data={"verl_hadw": ["py.typed"], **{pkg: ["*.yaml"] for pkg in CONFIG_PACKAGES}},  # typed (PEP 561)
    install_requires=["torch", "numpy"],  # the core; every framework comes with its extra
    extras_require=EXTRAS,
    entry_points={
        "verl.plugins": ["verl_hadw = verl_hadw.verl.entry_point"],
        "console_scripts": ["verl-hadw = verl_hadw.cli:main", "verl-hadw-swift = verl_hadw.swift.cli:main"],
    },
)

"""verl-hadw: HA-DW and DGPO advantage estimators for verl 0.9.1 (a verl plugin, no fork).

CPU machines: install with a constraints file pinning torch==2.13.0 (see README), or pip pulls a CUDA torch.
GPU machines: install your own torch / vllm / flash-attn first, or use the ``gpu`` extra.
"""

from setuptools import find_packages, setup

setup(
    name="verl-hadw",
    version="0.1.0",
    description="HA-DW and DGPO group-relative advantage estimators for verl",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["verl_hadw", "verl_hadw.*"]) + ["verl_hadw_configs"],
    # configs/ (Hydra YAMLs of the paper reproductions) ships as the data package verl_hadw_configs, so
    # `verl-hadw configs` finds it in editable and regular installs alike.
    package_dir={"verl_hadw_configs": "configs"},
    package_data={"verl_hadw_configs": ["*.yaml", "**/*.yaml"]},
    include_package_data=True,
    install_requires=[
        "verl==0.9.1",
        # verl 0.9.1's default (v1) trainer imports these, but its base requirements omit them.
        "TransferQueue>=0.1.10",
        "pyzmq",
        "msgspec",
        "cachetools",
        "fastapi",
        "uvicorn",
        "torch",  # CPU: pin 2.13.0 with constraints-cpu.txt; GPU: bring your CUDA build
        "numpy",
        "omegaconf",
        "hydra-core",
        "ray",
        "pandas",
        "pyarrow",
        "scipy",  # bias theory (verl_hadw.research.theory)
        "matplotlib",  # plots (theory, simulator, results)
        "math-verify",  # math answer checking for the paper reproductions' reward
        "datasets",  # verl-hadw data: Hugging Face datasets for the reproductions
        "tensorboard",  # verl-hadw results: reads verl's tensorboard event files
    ],
    extras_require={
        "test": ["pytest", "hypothesis", "setuptools"],  # setuptools: tests/test_configs.py builds a wheel
        # GPU-only: never installed on CPU machines (scripts/install_cpu.sh does not use it).
        "gpu": ["vllm>=0.18.0", "flash-attn"],
    },
    entry_points={
        "verl.plugins": ["verl_hadw = verl_hadw.register"],
        "console_scripts": ["verl-hadw = verl_hadw.cli:main"],
    },
)

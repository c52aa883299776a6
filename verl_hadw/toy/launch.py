"""Run verl's own ``python -m verl.trainer.main_ppo`` on CPU with the toy assets, and read its log.

Used by ``scripts/demo_cpu.sh``, the end-to-end tests and ``benchmarks/bench_cpu_e2e.sh``. It sets only
what verl's extension points need (``VERL_USE_EXTERNAL_MODULES=verl_hadw.cpu``, ``VERL_PLATFORM=cpu``,
``VERL_HADW_ASSETS``) and passes the config from ``configs/cpu``; everything else is verl's code.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_DIR = os.path.join(REPO, "configs", "cpu")
STEP_LINE = re.compile(r"^(?:\(\w+ pid=\d+\) )?step:(\d+) - (.*)$")


def environment(assets: str) -> dict:
    env = dict(os.environ)
    env.update(
        VERL_USE_EXTERNAL_MODULES="verl_hadw.cpu",
        VERL_PLATFORM="cpu",
        VERL_HADW_ASSETS=os.path.abspath(assets),
        HYDRA_FULL_ERROR="1",
        WANDB_MODE="disabled",
        TOKENIZERS_PARALLELISM="false",
        RAY_DEDUP_LOGS="0",
        PYTHONUNBUFFERED="1",
    )
    return env


def command(overrides: list[str], config_name: str = "demo") -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", f"--config-path={CONFIG_DIR}", f"--config-name={config_name}", *overrides]


def ensure_assets(assets: str) -> None:
    if not os.path.exists(os.path.join(assets, "assets.json")):
        from verl_hadw.toy.assets import build

        build(assets)


def parse_steps(log: str) -> dict[int, dict[str, float]]:
    """Per-step metrics from verl's console logger lines ``step:N - key:value - ...``."""
    steps: dict[int, dict[str, float]] = {}
    for line in log.splitlines():
        match = STEP_LINE.match(line.strip())
        if not match:
            continue
        values = {}
        for item in match.group(2).split(" - "):
            key, _, value = item.rpartition(":")
            try:
                values[key] = float(value)
            except ValueError:
                continue
        steps.setdefault(int(match.group(1)), {}).update(values)
    return steps


def run(assets: str, overrides: list[str], cwd: str | None = None, echo: bool = False, timeout: float = 900):
    """Run main_ppo; returns (exit code, full output). ``echo`` streams verl's output while it runs."""
    ensure_assets(assets)
    proc = subprocess.Popen(
        command(overrides), cwd=cwd or REPO, env=environment(assets), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if echo:
                sys.stdout.write(line)
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assets", default=os.path.join(REPO, "runs", "cpu_assets"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for main_ppo")
    args = parser.parse_args()
    code, _ = run(args.assets, args.overrides, echo=True)
    sys.exit(code)


if __name__ == "__main__":
    main()

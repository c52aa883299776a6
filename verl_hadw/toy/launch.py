"""Run verl's own ``python -m verl.trainer.main_ppo`` on CPU with the toy assets, and read its log.

Used by ``scripts/demo_cpu.sh``, the end-to-end tests and ``benchmarks/bench_cpu_e2e.sh``. It sets only
what verl's extension points need (``VERL_USE_EXTERNAL_MODULES=verl_hadw.cpu``, ``VERL_PLATFORM=cpu``,
``VERL_HADW_ASSETS``) and passes the config from ``configs/cpu``; everything else is verl's code.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from verl_hadw.toy.console_log import parse_steps

__all__ = [
    "config_dir", "command", "demo_overrides", "environment", "parse_steps", "run", "stable_metrics", "stream",
    "table_printer",
]


def config_dir() -> str:
    """``configs/cpu``, found the way ``verl-hadw configs`` finds the configs (editable or regular install)."""
    from verl_hadw.toy.config_paths import config_dir as configs

    return str(configs() / "cpu")


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
    # Ray otherwise pre-starts one idle Python worker per logical CPU (16 here): seconds of start-up each
    env.setdefault("RAY_prestart_worker_first_driver", "0")
    env.setdefault("RAY_num_prestart_python_workers", "0")
    return env


def command(overrides: list[str], config_name: str = "demo", python: str | None = None) -> list[str]:
    """main_ppo with the demo config, plus what ``trainer.v1.trainer_mode`` needs (``toy.modes``; the user's
    own overrides come last and win). ``python``: the interpreter to run it with (default: this one), e.g. one of
    another environment with another verl, which must have this package installed too."""
    from verl_hadw.toy.modes import mode_overrides

    extra = mode_overrides(overrides, config_dir(), config_name)
    head = [python or sys.executable, "-m", "verl.trainer.main_ppo", f"--config-path={config_dir()}"]
    head.append(f"--config-name={config_name}")
    return [*head, *extra, *overrides]


def ensure_assets(assets: str, test_rows: int = 32, task: str = "toy") -> None:
    """Build the assets of ``task`` in ``assets`` unless a folder of that task, its current version and
    ``test_rows`` is there."""
    from verl_hadw.toy.assets import VERSION, build

    path = os.path.join(assets, "assets.json")
    if os.path.exists(path):
        with open(path) as f:
            built = json.load(f)
        if (built.get("version"), built.get("task", "toy"), built.get("test_rows", 32)) == (VERSION, task, test_rows):
            return
    build(assets, test_rows=test_rows, task=task)


VOLATILE = re.compile(r"timing|(^|/)perf/|memory|throughput")  # wall-clock and memory readings


def stable_metrics(values: dict[str, float]) -> dict[str, float]:
    """The metrics of one step that a deterministic run reproduces exactly: all but timings and memory."""
    return {key: value for key, value in values.items() if not VOLATILE.search(key)}


def stream(cmd: list[str], cwd: str | None = None, env: dict | None = None, on_line=None,
           timeout: float | None = None) -> tuple[int, str]:
    """Run ``cmd`` with stderr merged into stdout; returns (exit code, full output). ``on_line`` sees each line as
    it arrives. ``timeout``: kill the process after that many seconds (a hung process never closes its output, so
    a limit applied after the output ends would never be reached); None waits as long as it runs."""
    proc = subprocess.Popen(cmd, cwd=cwd or os.getcwd(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    watchdog = threading.Timer(timeout, proc.kill) if timeout is not None else None
    if watchdog is not None:
        watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
        proc.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, "".join(lines)


TASK_OVERRIDES = {"toy": [], "arith": ["+task=arith"]}  # each task's config on top of demo.yaml: configs/cpu/task/


def run(assets: str, overrides: list[str], cwd: str | None = None, on_line=None, timeout: float | None = None,
        test_rows: int = 32, python: str | None = None, env: dict | None = None, task: str = "toy"):
    """Run main_ppo on ``task``'s demo config; returns (exit code, full output). ``on_line`` sees each output line as
    it arrives; ``timeout`` as in ``stream``; ``python`` as in ``command``; ``env``: variables set on top of the run's
    environment."""
    ensure_assets(assets, test_rows, task)
    return stream(command([*TASK_OVERRIDES[task], *overrides], python=python), cwd,
                  {**environment(assets), **(env or {})}, on_line, timeout)


TABLE = [  # (column, metric, format)
    ("step", None, "{:>4}"),
    ("reward", "critic/score/mean", "{:>6.3f}"),
    ("C_prior", "hadw/anchor_prior", "{:>7.3f}"),
    ("C_post", "hadw/anchor_posterior", "{:>7.3f}"),
    ("y_t", "hadw/batch_acc", "{:>6.3f}"),
    ("eta_t", "hadw/eta_t", "{:>6.3f}"),
    ("phi_mean", "hadw/phi_mean", "{:>8.3f}"),
    ("phi_min", "hadw/phi_min", "{:>7.3f}"),
    ("phi_max", "hadw/phi_max", "{:>7.3f}"),
    ("amplified", "hadw/frac_amplified", "{:>9.3f}"),
    ("step_s", "timing_s/step", "{:>6.1f}"),
]


def table_printer(out=sys.stdout):
    """An ``on_line`` callback printing one row of HA-DW metrics per verl step line."""
    out.write(" ".join(f"{name:>{len(fmt.format(0)) if metric else 4}}" for name, metric, fmt in TABLE) + "\n")

    def on_line(line: str) -> None:
        for step, values in parse_steps(line).items():
            columns = [
                fmt.format(step if metric is None else values.get(metric, float("nan"))) for _, metric, fmt in TABLE
            ]
            out.write(" ".join(columns) + "\n")
            out.flush()

    return on_line


DEMO_SAVE_FREQ = 15  # the demo saves verl checkpoints (each with the anchor) at steps 15 and 30


def demo_overrides(out: str, name: str = "demo") -> list[str]:
    """What ``scripts/demo_cpu.sh`` adds to configs/cpu/demo.yaml: its name, checkpoints under ``out``."""
    return [f"trainer.experiment_name={name}", f"trainer.default_local_dir={os.path.abspath(out)}/checkpoints",
            f"trainer.save_freq={DEMO_SAVE_FREQ}"]


ASSETS = {"toy": os.path.join("runs", "cpu_assets"), "arith": os.path.join("runs", "arith_assets")}
TEST_ROWS = {"toy": 32, "arith": 400}  # held-out prompts; arith: each tier's 100, the TRL study's held-out set


def main() -> None:
    from verl_hadw.toy import TASKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=TASKS, default="toy",
                        help="toy: the one-character task from random weights; arith: sums and products from the "
                             "pretrained model (configs/cpu/task/arith.yaml on top of the demo's config)")
    parser.add_argument("--assets", default=None, help=f"default: {ASSETS['toy']}; --task arith: {ASSETS['arith']}")
    parser.add_argument("--log", default=None, help="write verl's full output here and print a metrics table")
    parser.add_argument("--plot", default=None, help="with --log: also save reward, C⁻ and y_t per step as this PNG")
    parser.add_argument("--demo", default=None, metavar="DIR",
                        help="the demo: a fresh run logged to DIR/main_ppo.log, plotted to DIR/demo.png, verl "
                             "checkpoints in DIR/checkpoints (removed first, so the run does not resume)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for main_ppo")
    args = parser.parse_args()
    overrides = list(args.overrides)
    if args.demo is not None:
        shutil.rmtree(os.path.join(args.demo, "checkpoints"), ignore_errors=True)
        args.log, args.plot = os.path.join(args.demo, "main_ppo.log"), os.path.join(args.demo, "demo.png")
        overrides = [*demo_overrides(args.demo, "demo" if args.task == "toy" else f"demo_{args.task}"), *overrides]
    start = time.monotonic()
    assets, rows = args.assets or ASSETS[args.task], TEST_ROWS[args.task]
    if args.log is None:
        code, _ = run(assets, overrides, on_line=sys.stdout.write, test_rows=rows, task=args.task)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
        print(f"verl main_ppo output: {args.log}")
        code, log = run(assets, overrides, on_line=table_printer(), test_rows=rows, task=args.task)
        with open(args.log, "w") as f:
            f.write(log)
        if code != 0:
            sys.stdout.write(log[-4000:])
        else:
            print_held_out(parse_steps(log), args.task)
            if args.plot:
                summarise_run(parse_steps(log), args.plot)
    print(f"main_ppo took {time.monotonic() - start:.0f} s (exit code {code})")
    sys.exit(code)


def print_held_out(steps: dict[int, dict[str, float]], task: str) -> None:
    """Held-out accuracy per tier at the first and the last validation (verl's ``val-core/<task>_<tier>/acc/...``),
    where the run validated more than once."""
    from verl_hadw.toy import task_module

    tiers = task_module(task).TIERS
    found = {step: {t: v for key, v in values.items() for t in tiers
                    if key.startswith(f"val-core/{task_module(task).data_source(t)}/acc/mean@")}
             for step, values in steps.items()}
    validated = sorted(step for step, accs in found.items() if len(accs) == len(tiers))
    if len(validated) >= 2:
        first, last = validated[0], validated[-1]
        print(f"held-out accuracy per tier, step {first} -> step {last}: " + ", ".join(
            f"{t} {found[first][t]:.3f} -> {found[last][t]:.3f}" for t in tiers))


def summarise_run(steps: dict[int, dict[str, float]], png: str) -> None:
    """Print the first-5 / last-5 mean reward and write the run's PNG."""
    from verl_hadw.toy.plot import plot_run, rise

    if len(steps) >= 10:  # two separate 5-step windows
        first, last = rise(steps)
        print(f"mean reward: steps 1-5 {first:.3f}, last 5 steps {last:.3f} (rise {last - first:+.3f})")
    print(f"plot: {plot_run(steps, png)}")


if __name__ == "__main__":
    main()

"""The paper-reproduction configs: where they live, the run catalogue (tables, paper numbers, launch plan), and
``verl-hadw configs`` (print the directory, list/show/compose/validate runs, print a paper's launch plan).

The YAMLs live in the checkout's ``configs/`` and ship as the data package ``verl_hadw_configs`` (setup.py), so
:func:`config_dir` finds them in editable and regular installs. Every run composes over verl's own
``ppo_trainer`` (``hydra.searchpath: [pkg://verl.trainer.config]`` in each run file) and is launched with::

    python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<run> [overrides]

The catalogue below is the single source of truth for which runs make which table and for the papers'
numbers (HA-DW: arXiv 2601.08521 v2, Tables 1, 2, 3, 7; DGPO/MathForge: arXiv 2601.20614 v1, Tables 1, 3, 4);
``verl-hadw results`` and ``scripts/reproduce_*.sh`` read it.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BENCHMARKS",
    "BENCHMARK_NAMES",
    "TABLES",
    "ALIASES",
    "EVAL_ONLY",
    "Row",
    "Table",
    "config_dir",
    "verl_config_dir",
    "run_names",
    "paper_of",
    "plan",
    "compose_run",
    "add_subcommand",
]

PAPERS = ("hadw", "dgpo")

# data_source ids written by `verl-hadw data`, in each paper's column order.
BENCHMARKS: dict[str, tuple[str, ...]] = {
    "hadw": ("math500", "aime25", "amc23", "minerva", "olympiadbench"),
    "dgpo": ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench"),
}
BENCHMARK_NAMES = {
    "math500": "MATH500",
    "aime24": "AIME24",
    "aime25": "AIME25",
    "amc23": "AMC23",
    "minerva": "Minerva",
    "olympiadbench": "OlympiadBench",
}


@dataclass(frozen=True)
class Row:
    """One row of a paper table: the paper's label, the run (config name) that reproduces it, its numbers."""

    label: str
    run: str
    paper: tuple[float | None, ...] = ()  # per benchmark, in BENCHMARKS[paper] order ("%"); () = not reported
    paper_avg: float | None = None  # the table's AVG column as printed (None: not reported)


@dataclass(frozen=True)
class Table:
    paper: str
    key: str
    title: str
    rows: tuple[Row, ...] = field(default_factory=tuple)


def _h(label, run, *values):
    *bench, avg = values
    return Row(label, run, tuple(bench), avg)


_T1 = "hadw_t1_"
TABLES: tuple[Table, ...] = (
    # ------------------------------------------------------------------------------------------ HA-DW
    Table("hadw", "hadw_t1", "HA-DW Table 1: main results (MATH500 / AIME25 avg@16 / AMC23 avg@16 / Minerva / OlympiadBench)", (
        _h("Qwen3-4B-Base GRPO", _T1 + "qwen3_4b_grpo", 75.4, 19.6, 60.3, 33.8, 43.5, 46.5),
        _h("Qwen3-4B-Base GRPO+HA-DW", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, 48.7),
        _h("Qwen3-4B-Base GSPO", _T1 + "qwen3_4b_gspo", 75.8, 20.0, 62.2, 35.3, 42.3, 47.1),
        _h("Qwen3-4B-Base GSPO+HA-DW", _T1 + "qwen3_4b_gspo_hadw", 77.6, 19.6, 68.6, 37.1, 43.2, 49.2),
        _h("Qwen3-4B-Base DAPO", _T1 + "qwen3_4b_dapo", 76.8, 18.3, 60.0, 35.7, 43.2, 46.8),
        _h("Qwen3-4B-Base DAPO+HA-DW", _T1 + "qwen3_4b_dapo_hadw", 78.6, 21.3, 65.0, 37.5, 45.3, 49.5),
        _h("Qwen3-8B-Base GRPO", _T1 + "qwen3_8b_grpo", 78.8, 20.4, 64.2, 38.2, 46.4, 49.6),
        _h("Qwen3-8B-Base GRPO+HA-DW", _T1 + "qwen3_8b_grpo_hadw", 80.0, 22.9, 72.8, 39.7, 47.1, 52.5),
        _h("Qwen3-8B-Base GSPO", _T1 + "qwen3_8b_gspo", 78.6, 21.7, 67.0, 37.9, 45.9, 50.2),
        _h("Qwen3-8B-Base GSPO+HA-DW", _T1 + "qwen3_8b_gspo_hadw", 80.2, 22.1, 66.5, 41.9, 47.6, 51.7),
        _h("Qwen3-8B-Base DAPO", _T1 + "qwen3_8b_dapo", 79.2, 20.4, 67.5, 39.3, 47.2, 50.7),
        _h("Qwen3-8B-Base DAPO+HA-DW", _T1 + "qwen3_8b_dapo_hadw", 82.8, 23.3, 70.0, 40.8, 50.0, 53.4),
        _h("LLaMA-3.2-3B-Instruct GRPO", _T1 + "llama3_3b_grpo", 51.4, 2.7, 31.7, 22.8, 19.9, 25.7),
        _h("LLaMA-3.2-3B-Instruct GRPO+HA-DW", _T1 + "llama3_3b_grpo_hadw", 53.2, 3.3, 35.0, 23.9, 20.1, 27.1),
        _h("LLaMA-3.2-3B-Instruct GSPO", _T1 + "llama3_3b_gspo", 48.6, 1.9, 30.9, 23.2, 19.8, 24.9),
        _h("LLaMA-3.2-3B-Instruct GSPO+HA-DW", _T1 + "llama3_3b_gspo_hadw", 50.4, 2.3, 32.7, 22.4, 21.0, 25.8),
        _h("LLaMA-3.2-3B-Instruct DAPO", _T1 + "llama3_3b_dapo", 52.4, 2.5, 35.0, 22.4, 20.2, 26.5),
        _h("LLaMA-3.2-3B-Instruct DAPO+HA-DW", _T1 + "llama3_3b_dapo_hadw", 53.2, 3.1, 37.5, 24.6, 22.3, 28.1),
    )),
    Table("hadw", "hadw_t2", "HA-DW Table 2: fixed vs dynamic anchor (Qwen3-4B-Base, GRPO+HA-DW)", (
        _h("Base (GRPO)", _T1 + "qwen3_4b_grpo", 75.4, 19.6, 60.3, 33.8, 43.5, 46.5),
        _h("fixed anchor 0.4", "hadw_t2_fixed_anchor_04", 77.0, 18.5, 63.1, 37.5, 44.3, 48.1),
        _h("fixed anchor 0.5", "hadw_t2_fixed_anchor_05", 76.6, 20.0, 62.7, 35.7, 44.0, 47.8),
        _h("fixed anchor 0.6", "hadw_t2_fixed_anchor_06", 76.8, 21.3, 61.1, 36.4, 44.3, 48.0),
        _h("C_t (dynamic)", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, 48.7),
    )),
    Table("hadw", "hadw_t3", "HA-DW Table 3: group size (Qwen3-4B-Base; the paper prints no AVG)", (
        _h("GRPO, G=8", _T1 + "qwen3_4b_grpo", 75.4, 19.6, 60.3, 33.8, 43.5, None),
        _h("GRPO, G=16", "hadw_t3_qwen3_4b_grpo_g16", 76.2, 19.2, 61.6, 34.2, 43.9, None),
        _h("GRPO+HA-DW, G=8", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, None),
    )),
    Table("hadw", "hadw_t7", "HA-DW Table 7: lambda_scale (Qwen3-4B-Base, GRPO+HA-DW)", (
        _h("lambda 0.5", "hadw_t7_lambda_05", 75.4, 18.1, 61.1, 34.2, 43.7, 46.5),
        _h("lambda 0.8", "hadw_t7_lambda_08", 76.8, 19.2, 61.3, 34.9, 43.7, 47.2),
        _h("lambda 1.0", "hadw_t7_lambda_10", 76.8, 18.5, 61.6, 36.0, 44.3, 47.4),
        # λ = 1.3 is the Table 1 run (identical row in the paper); hadw_t7_lambda_13 is an alias config of it.
        _h("lambda 1.3", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, 48.7),
        _h("lambda 1.5", "hadw_t7_lambda_15", 77.8, 20.8, 63.1, 37.1, 44.0, 48.6),
        _h("lambda 1.7", "hadw_t7_lambda_17", 76.4, 20.0, 63.4, 36.4, 44.3, 48.1),
        _h("lambda 2.0", "hadw_t7_lambda_20", 76.8, 19.0, 61.9, 35.3, 43.5, 47.3),
    )),
    # ------------------------------------------------------------------------------------------- DGPO
    Table("dgpo", "dgpo_t1", "DGPO Table 1: Qwen2.5-Math-7B on MATH (AIME24/25, AMC23 avg@32; others avg@4)", (
        _h("Base", "dgpo_t1_base", 12.19, 4.79, 35.23, 48.60, 15.07, 16.33, 22.04),
        _h("GRPO", "dgpo_t1_grpo", 20.94, 8.44, 58.98, 72.20, 27.76, 37.33, 37.61),
        _h("DGPO", "dgpo_t1_dgpo", 23.85, 10.21, 61.02, 74.25, 31.07, 38.33, 39.79),
    )),
    Table("dgpo", "dgpo_t3", "DGPO Table 3: component ablation and DQW temperature (the paper prints only Avg)", (
        Row("GRPO", "dgpo_t1_grpo", (), 37.61),
        Row("valid-token averaging only", "dgpo_t3_vtn_only", (), 37.71),
        Row("+ DGAE (no DQW)", "dgpo_t3_vtn_dgae", (), 38.65),
        Row("full DGPO, T = 2.0", "dgpo_t1_dgpo", (), 39.79),
        Row("T = 1.0", "dgpo_t3_temp_1", (), 39.03),
        Row("T = 5.0", "dgpo_t3_temp_5", (), 39.53),
        Row("T = 10.0", "dgpo_t3_temp_10", (), 39.27),
    )),
    Table("dgpo", "dgpo_t4", "DGPO Table 4: DGPO combined with GPG, DAPO and GSPO (Qwen2.5-Math-7B)", (
        _h("GPG", "dgpo_t4_gpg", 21.98, 9.06, 59.61, 72.05, 27.21, 37.67, 37.93),
        _h("GPG+DGPO", "dgpo_t4_gpg_dgpo", 21.77, 10.00, 60.00, 73.45, 30.06, 38.26, 38.92),
        _h("DAPO", "dgpo_t4_dapo", 21.25, 8.75, 58.20, 72.70, 29.50, 37.22, 37.94),
        _h("DAPO+DGPO", "dgpo_t4_dapo_dgpo", 24.48, 9.79, 58.75, 74.90, 31.99, 39.56, 39.91),
        _h("GSPO", "dgpo_t4_gspo", 19.38, 8.33, 60.16, 73.00, 28.12, 37.26, 37.71),
        _h("GSPO+DGPO", "dgpo_t4_gspo_dgpo", 23.33, 10.00, 59.14, 74.15, 30.88, 38.41, 39.32),
    )),
)

# Config files that are another run under a second name (same trainer.experiment_name, so the same run dir).
ALIASES = {"hadw_t7_lambda_13": _T1 + "qwen3_4b_grpo_hadw"}
# Runs that are only evaluated (the untrained base model).
EVAL_ONLY = frozenset({"dgpo_t1_base"})
# HA-DW Fig. 1(c): GRPO+HA-DW beats GRPO by +3.4 points on MATH500 Hard (levels 4-5); no per-level numbers printed.
HADW_HARD_GAIN = ("hadw_t1_qwen3_4b_grpo", "hadw_t1_qwen3_4b_grpo_hadw", 3.4)


def paper_of(run: str) -> str:
    paper = run.split("_", 1)[0]
    if paper not in PAPERS:
        raise ValueError(f"run {run!r} belongs to no paper: run names start with 'hadw_' or 'dgpo_'")
    return paper


def run_names(paper: str | None = None) -> list[str]:
    """Distinct runs of the catalogue in table order (aliases excluded)."""
    seen: dict[str, None] = {}
    for table in TABLES:
        if paper is None or table.paper == paper:
            for row in table.rows:
                seen.setdefault(row.run, None)
    return list(seen)


def plan(paper: str, only: str | None = None) -> list[tuple[str, str]]:
    """The launch plan of a paper: ``(action, run)`` in table order, each run once.

    HA-DW reports verl's in-training validation (the paper's protocol runs at every ``test_freq``), so its plan
    only trains. DGPO's final evaluation (4096-token budget, all six benchmarks) is a separate ``val_only`` pass
    on the last checkpoint, so each DGPO run is trained and then evaluated; the base model is only evaluated.
    ``only``: a shell pattern on run names (``dgpo_t4_*``) to keep part of the plan.
    """
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; choose one of: {', '.join(PAPERS)}")
    steps: list[tuple[str, str]] = []
    for run in run_names(paper):
        if only and not fnmatch.fnmatchcase(run, only):
            continue
        if run not in EVAL_ONLY:
            steps.append(("train", run))
        if paper == "dgpo":
            steps.append(("eval", run))
    return steps


# --------------------------------------------------------------------------------------------- locations
def config_dir() -> Path:
    """Directory holding the run YAMLs (``--config-path`` for verl's ``main_ppo``).

    ``$VERL_HADW_CONFIGS`` if set; else the ``verl_hadw_configs`` data package (the checkout's ``configs/`` in an
    editable install, ``site-packages/verl_hadw_configs`` in a regular one); else ``configs/`` next to this
    package (a source tree on ``PYTHONPATH`` without installing).
    """
    env = os.environ.get("VERL_HADW_CONFIGS")
    if env:
        path = Path(env).expanduser().resolve()
        if not path.is_dir():
            raise FileNotFoundError(f"VERL_HADW_CONFIGS={env!r} is not a directory")
        return path
    spec = importlib.util.find_spec("verl_hadw_configs")
    if spec is not None and spec.origin:
        return Path(spec.origin).resolve().parent
    checkout = Path(__file__).resolve().parent.parent / "configs"
    if (checkout / "hadw" / "base.yaml").is_file():
        return checkout
    raise FileNotFoundError(
        "verl-hadw's configs were not found: reinstall the package (pip install -e . or pip install .) so the "
        "verl_hadw_configs data package exists, or set VERL_HADW_CONFIGS=/path/to/verl-hadw/configs"
    )


def verl_config_dir() -> Path:
    """verl's ``trainer/config`` directory, located without importing verl (``import verl`` costs seconds)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("verl is not installed: pip install verl==0.9.1")
    path = Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config"
    if not (path / "ppo_trainer.yaml").is_file():
        raise FileNotFoundError(f"{path} has no ppo_trainer.yaml: is verl 0.9.1 installed?")
    return path


def available_runs() -> list[str]:
    """Run config names present in :func:`config_dir` (top-level YAMLs)."""
    return sorted(p.stem for p in config_dir().glob("*.yaml"))


def describe(run: str) -> str:
    """The first comment line of a run file (its one-line description)."""
    for line in (config_dir() / f"{run}.yaml").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def compose_run(run: str, overrides: list[str] | tuple[str, ...] = (), *, fast: bool = True):
    """Compose ``run`` exactly as ``main_ppo --config-path=config_dir() --config-name=run overrides`` does.

    ``fast`` points Hydra's search path at verl's config directory as a file path instead of the run file's
    ``pkg://verl.trainer.config`` (same files; it only avoids importing verl). Returns the DictConfig (struct).
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    directory = config_dir()
    if not (directory / f"{run}.yaml").is_file():
        known = ", ".join(available_runs())
        raise ValueError(f"no run config {run!r} in {directory}. Known runs: {known}")
    extra = [f"hydra.searchpath=[file://{verl_config_dir()}]"] if fast else []
    try:
        with initialize_config_dir(config_dir=str(directory), version_base=None, job_name=run):
            return compose(config_name=run, overrides=[*overrides, *extra])
    except HydraException as exc:
        raise ValueError(f"composing {run!r} with overrides {list(overrides)} failed: {exc}") from exc


def run_dir(run: str, overrides=()) -> str:
    """The run's output directory (``paths.run_dir``: checkpoints/, tensorboard/, metrics/, logs/, eval/)."""
    return str(compose_run(run, overrides).paths.run_dir)


# ------------------------------------------------------------------------------------------- validation
def validate_like_main_ppo(config, deep: bool = False) -> dict:
    """Run on ``config`` the checks verl 0.9.1's ``main_ppo`` makes in the ``python -m`` process, then the
    first steps of its TaskRunner (resolve the config, build the plugin's checkpoint callback checks).

    verl's own ``main`` body is executed (``main_ppo.main.__wrapped__``: ``auto_set_device``, ``validate_config``
    with ``need_reference_policy``/``need_critic``, ``run_ppo`` up to ``ray.init``); only the parts that need a
    Ray cluster or GPUs are stubbed: ``ray.init`` records its kwargs, the TaskRunner actor is replaced by an
    in-process runner that does what ``TaskRunnerV1.run`` does before building the trainer (``OmegaConf.resolve``,
    ``get_trainer_cls``) plus ``verl_hadw.callback.validate_config`` (what ``HadwCheckpointCallback`` runs at
    trainer construction); ``deep`` adds verl's worker-side conversion of the rollout config to
    ``RolloutConfig``. Returns what was recorded.
    """
    from unittest import mock

    import ray
    from omegaconf import OmegaConf
    from verl.trainer import main_ppo

    from verl_hadw.callback import validate_config as plugin_validate

    record: dict = {}

    class _Runner:
        @classmethod
        def remote(cls, *args, **kwargs):
            return cls()

        @classmethod
        def options(cls, **kwargs):
            return cls

        class run:  # noqa: N801  (mirrors `runner.run.remote(config)`)
            @staticmethod
            def remote(cfg):
                from verl.trainer.ppo.v1 import get_trainer_cls

                cfg.transfer_queue.enable = True
                OmegaConf.resolve(cfg)
                record["trainer_cls"] = get_trainer_cls(cfg.trainer.v1.trainer_mode).__name__
                record["estimator"] = plugin_validate(cfg)
                if deep:
                    from verl.utils.config import omega_conf_to_dataclass
                    from verl.workers.config import RolloutConfig

                    record["rollout"] = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout, RolloutConfig)
                record["resolved"] = cfg
                return "ok"

    def fake_init(**kwargs):
        record["ray_init"] = kwargs

    with (
        mock.patch.object(ray, "is_initialized", return_value=False),
        mock.patch.object(ray, "init", side_effect=fake_init),
        mock.patch.object(ray, "get", side_effect=lambda ref: ref),
        mock.patch.object(main_ppo, "TaskRunnerV1", _Runner),
    ):
        main_ppo.main.__wrapped__(config)
    if "resolved" not in record:
        raise RuntimeError("verl's main_ppo returned without starting the TaskRunner (trainer.use_v1=false?)")
    return record


# -------------------------------------------------------------------------------------------------- CLI
def _cmd_configs(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    overrides = list(args.overrides)
    if args.list:
        for run in available_runs():
            note = f"  (alias of {ALIASES[run]})" if run in ALIASES else ""
            print(f"{run:34s} {describe(run)}{note}")
        return 0
    if args.plan:
        steps = plan(args.plan, args.only)
        if not steps:
            raise ValueError(f"--only {args.only!r} matches no run of the {args.plan} plan")
        for action, run in steps:
            line = f"{action} {run}"
            if args.with_dirs:
                line += f" {run_dir(run, overrides)}"
            print(line)
        return 0
    if args.locate:  # for the launchers: the config directory and the run directory, one per line
        print(config_dir())
        print(run_dir(args.locate, overrides))
        return 0
    if args.show or args.get or args.validate:
        key, run = args.get if args.get else (None, args.show or args.validate)
        cfg = compose_run(run, overrides, fast=not args.validate)
        if args.get:
            value = OmegaConf.select(cfg, key, throw_on_missing=True)
            if value is None and OmegaConf.select(cfg, key, default="__absent__") == "__absent__":
                raise ValueError(f"{run}: no key {key!r} in the composed config")
            print(OmegaConf.to_yaml(value, resolve=True).strip() if OmegaConf.is_config(value) else value)
        elif args.show:
            print(OmegaConf.to_yaml(cfg, resolve=True), end="")
        else:
            record = validate_like_main_ppo(cfg, deep=True)
            print(f"{run}: ok (verl validate_config, TaskRunner {record['trainer_cls']}, estimator {record['estimator']})")
        return 0
    print(config_dir())
    return 0


def configs_main(args: argparse.Namespace) -> int:
    try:
        return _cmd_configs(args)
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"verl-hadw configs: {exc}", file=sys.stderr)
        return 2


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "configs",
        help="paper-reproduction configs: print their directory, list, show, validate runs, print launch plans",
        description="Without options: print the config directory, for "
        "python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<run>.",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the run configs with their description")
    group.add_argument("--show", metavar="RUN", help="print RUN's composed config (with OVERRIDES), resolved")
    group.add_argument("--get", nargs=2, metavar=("KEY", "RUN"), help="print one resolved key of RUN's config")
    group.add_argument("--validate", metavar="RUN", help="run verl main_ppo's config checks and the plugin's on RUN")
    group.add_argument("--locate", metavar="RUN", help="print the config directory and RUN's output directory")
    group.add_argument("--plan", choices=PAPERS, help="print a paper's launch plan: 'train RUN' / 'eval RUN' lines")
    p.add_argument("--with-dirs", action="store_true", help="with --plan: append each run's output directory")
    p.add_argument("--only", metavar="GLOB", help="with --plan: only runs matching this shell pattern (dgpo_t4_*)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as on the main_ppo command line")
    p.set_defaults(func=configs_main)

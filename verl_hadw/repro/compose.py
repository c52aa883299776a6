"""Where the paper-reproduction configs live and how a run composes, exactly as verl's ``main_ppo`` would.

A run is ``configs/<paper>/experiments/<run>.yaml`` (shipped as the data package ``verl_hadw_configs``), composed
over verl's own ``ppo_trainer`` and launched with
``python -m verl.trainer.main_ppo --config-path=$(verl-hadw configs) --config-name=<paper>/experiments/<run>``.
"""

from __future__ import annotations

from pathlib import Path

from verl_hadw.toy.config_paths import config_dir, verl_config_dir

__all__ = [
    "config_dir",
    "verl_config_dir",
    "available_runs",
    "config_name",
    "describe",
    "compose_run",
    "run_dir",
    "validate_like_main_ppo",
]


def _run_files() -> dict[str, Path]:
    """Run name -> its YAML: every ``<paper>/experiments/<run>.yaml`` of :func:`config_dir`, and its top-level
    YAMLs (none in ``configs/``; ``demo`` when ``$VERL_HADW_CONFIGS`` points at ``configs/cpu``)."""
    directory = config_dir()
    files: dict[str, Path] = {}
    for path in sorted([*directory.glob("*/experiments/*.yaml"), *directory.glob("*.yaml")]):
        if path.stem in files:  # the run name alone must say which file runs
            raise ValueError(f"two run configs are named {path.stem!r}: {files[path.stem]} and {path}")
        files[path.stem] = path
    return files


def available_runs() -> list[str]:
    """Run names present in :func:`config_dir` (the file names of ``<paper>/experiments/*.yaml``)."""
    return sorted(_run_files())


def _run_file(run: str) -> Path:
    files = _run_files()
    if run not in files:
        raise ValueError(f"no run config {run!r} in {config_dir()}. Known runs: {', '.join(sorted(files))}")
    return files[run]


def config_name(run: str) -> str:
    """``run``'s Hydra config name under :func:`config_dir` (``--config-name``): ``<paper>/experiments/<run>``."""
    return _run_file(run).relative_to(config_dir()).with_suffix("").as_posix()


def describe(run: str) -> str:
    """The first comment line of a run file (its one-line description), after Hydra's ``# @package`` line."""
    for line in _run_file(run).read_text(encoding="utf-8").splitlines():
        if line.startswith("#") and not line.lstrip("# ").startswith("@"):
            return line.lstrip("# ").strip()
    return ""


def compose_run(run: str, overrides: list[str] | tuple[str, ...] = (), *, fast: bool = True):
    """Compose ``run`` exactly as ``main_ppo --config-path=config_dir() --config-name=config_name(run) overrides``
    does (the evaluation pass of ``scripts/train.sh --eval`` adds ``eval=<paper>``).

    ``fast`` points Hydra's search path at verl's config directory as a file path instead of the run file's
    ``pkg://verl.trainer.config`` (same files; it only avoids importing verl). Returns the DictConfig (struct).
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    name = config_name(run)
    extra = [f"hydra.searchpath=[file://{verl_config_dir()}]"] if fast else []
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None, job_name=run):
            return compose(config_name=name, overrides=[*overrides, *extra])
    except HydraException as exc:
        hint = ""
        if any(str(o).startswith("+eval=") for o in overrides):  # the old spelling, before runs moved to experiments/
            hint = "\nThe evaluation pass is eval=<paper>, without '+': every run file has the default /eval: null."
        raise ValueError(f"composing {run!r} with overrides {list(overrides)} failed: {exc}{hint}") from exc


def run_dir(run: str, overrides=()) -> str:
    """The run's output directory (``paths.run_dir``: checkpoints/, tensorboard/, metrics/, logs/, eval/)."""
    return str(compose_run(run, overrides).paths.run_dir)


# ------------------------------------------------------------------------------------------- validation
def validate_like_main_ppo(config, deep: bool = False) -> dict:
    """Run on ``config`` the checks verl 0.9.1's ``main_ppo`` makes before training, without a cluster.

    The ``python -m`` process's checks, as ``main_ppo.main`` calls them (``auto_set_device``, verl's
    ``validate_config`` with ``need_reference_policy``/``need_critic``); the ``ray.init`` arguments ``run_ppo``
    would build (recorded, not called); then what the TaskRunner does before building the trainer
    (``get_trainer_cls``, ``OmegaConf.resolve``) plus ``verl_hadw.verl.startup_check.validate_config`` (what
    ``HadwCheckpointCallback`` runs at trainer construction). ``deep`` adds verl's worker-side conversion of the
    rollout config to ``RolloutConfig``. Nothing of verl or Ray is patched. Returns what was recorded.
    """
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from verl_hadw.verl.startup_check import validate_config as plugin_validate

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    ray_init = config.ray_kwargs.get("ray_init", {})
    runtime_env = OmegaConf.merge(get_ppo_ray_runtime_env(config), ray_init.get("runtime_env", {}))
    record: dict = {"ray_init": OmegaConf.to_container(OmegaConf.create({**ray_init, "runtime_env": runtime_env}))}

    resolved = config.copy()
    if resolved.trainer.use_v1:
        from verl.trainer.ppo.v1 import get_trainer_cls

        record["trainer_cls"] = get_trainer_cls(resolved.trainer.v1.trainer_mode).__name__
        resolved.transfer_queue.enable = True  # as TaskRunnerV1.run does
    else:
        record["trainer_cls"] = "RayPPOTrainer"
    OmegaConf.resolve(resolved)
    record["estimator"] = plugin_validate(resolved)
    if deep:
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import RolloutConfig

        record["rollout"] = omega_conf_to_dataclass(resolved.actor_rollout_ref.rollout, RolloutConfig)
    record["resolved"] = resolved
    return record

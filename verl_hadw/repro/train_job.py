"""What scripts/train.sh decides around a verl run: the overrides of a resume, and checkpoint retention after DONE.

Resume: skip verl's pre-training validation when the resumed step needs none or has it logged already. Retention
(``VERL_HADW_KEEP``: ``final``, ``all`` or ``N``; docs/reproduce.md) applies after the run's DONE marker.
``python -m verl_hadw.repro.train_job prune CHECKPOINT_DIR --keep final|all|N [--resume]`` is what train.sh runs.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from verl_hadw.repro.costs import parse_keep

__all__ = ["checkpoint_steps", "resume_step", "resume_overrides", "prune", "main"]

STEP_RE = re.compile(r"^global_step_(\d+)$")
OPTIMIZER_GLOB = "optim_world_size_*"


def checkpoint_steps(ckpt_dir: str | Path) -> list[int]:
    """The ``global_step_<n>`` directories under ``ckpt_dir``, ascending."""
    path = Path(ckpt_dir)
    if not path.is_dir():
        return []
    return sorted(int(m.group(1)) for p in path.iterdir() if p.is_dir() and (m := STEP_RE.match(p.name)))


def resume_step(ckpt_dir: str | Path) -> int | None:
    """The step verl resumes from (``latest_checkpointed_iteration.txt``, as ``find_latest_ckpt_path``), or None."""
    marker = Path(ckpt_dir) / "latest_checkpointed_iteration.txt"
    try:
        step = int(marker.read_text().strip())
    except (OSError, ValueError):
        return None
    return step if (Path(ckpt_dir) / f"global_step_{step}").is_dir() else None


def _validated_steps(run_dir: Path) -> set[int]:
    """Steps with verl validation metrics (``val-core/...``) in the run's logs (the eval/ pass excluded)."""
    from verl_hadw.repro.results import load_scalars

    try:
        frame = load_scalars(run_dir, exclude=run_dir / "eval")
    except Exception:  # no or unreadable logs: nothing is known to be validated  # noqa: BLE001
        return set()
    if frame is None or len(frame) == 0:
        return set()
    return {int(s) for s in frame.loc[frame["tag"].str.startswith("val-core/"), "step"]}


def resume_overrides(cfg, total_steps: int | None = None) -> list[str]:
    """Overrides for this start of the run (``cfg``: composed): ``trainer.val_before_train=false`` on a resume
    whose checkpoint step needs no validation or has its validation logged; nothing otherwise."""
    # verl validates before training on every start, so each requeue would repeat a logged step's validation; but
    # verl saves a step's checkpoint before validating it (v1 ``trainer_base.py`` ``fit``), so a job killed in between
    # has that step's validation still to do (docs/reproduce.md, "No repeated validation")
    trainer = cfg.trainer
    if trainer.get("val_only", False) or not trainer.get("val_before_train", True):
        return []
    if trainer.get("resume_mode", "auto") != "auto":
        return []
    step = resume_step(trainer.default_local_dir)
    if step is None:
        return []
    freq = int(trainer.test_freq)
    is_test_step = freq > 0 and (step % freq == 0 or (total_steps is not None and step >= total_steps))
    if is_test_step and step not in _validated_steps(Path(cfg.paths.run_dir)):
        return []  # the job died between saving and logging this step's validation: let verl redo it
    return ["trainer.val_before_train=false"]


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def prune(ckpt_dir: str | Path, keep: str | int = "final", finished: bool = True) -> tuple[list[Path], int]:
    """Apply the retention policy to a run's checkpoints; returns (removed paths, bytes freed).

    The newest complete checkpoint is the one ``latest_checkpointed_iteration.txt`` names (verl writes it after
    the save). ``finished`` (after DONE): keep the newest ``N`` (``final``: 1, without optimizer state) and drop
    leftovers of an interrupted later save. Not finished (before a resume): only checkpoints older than the
    resume point beyond the newest ``N`` go, whole; verl 0.9.1 would never delete them (it tracks only the saves
    of its own process), so each requeue would leave one more full checkpoint behind.
    """
    keep = parse_keep(str(keep))
    root = Path(ckpt_dir)
    steps = checkpoint_steps(root)
    newest = resume_step(root)
    if newest is None and finished and steps:
        newest = steps[-1]
    if keep == "all" or newest is None:
        return [], 0
    complete = [s for s in steps if s <= newest]
    keep_n = 1 if keep == "final" else keep
    doomed = [root / f"global_step_{s}" for s in complete[: max(0, len(complete) - keep_n)]]
    if finished:
        doomed += [root / f"global_step_{s}" for s in steps if s > newest]
        if keep == "final":
            doomed += sorted((root / f"global_step_{newest}").rglob(OPTIMIZER_GLOB))
    freed = 0
    for path in doomed:
        freed += _size(path)
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return doomed, freed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_hadw.repro.train_job", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prune", help="apply VERL_HADW_KEEP to a finished run's checkpoint directory")
    p.add_argument("ckpt_dir")
    p.add_argument("--keep", default="final", help="final (default) | all | N")
    p.add_argument("--resume", action="store_true", help="before a resume: drop only superseded checkpoints")
    args = parser.parse_args(argv)
    try:
        removed, freed = prune(args.ckpt_dir, args.keep, finished=not args.resume)
    except ValueError as exc:
        print(f"prune: {exc}", file=sys.stderr)
        return 2
    kept = checkpoint_steps(args.ckpt_dir)
    print(f"[prune] {args.ckpt_dir}: keep={args.keep}, removed {len(removed)} path(s), freed {freed / 1e9:.1f} GB; "
          f"checkpoints left: {', '.join(f'global_step_{s}' for s in kept) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

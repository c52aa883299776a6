"""``verl-hadw results <run dirs...>``: verl's validation metrics -> the papers' tables, side by side, and a plot.

Each run directory is searched for verl's tensorboard events, ``file`` logger jsonl and console logs, merged by step.
A benchmark's score is ``val-core/<data_source>/acc/mean@N`` at the last validation (``--step`` picks another); logs
under ``<run>/eval/`` win over the in-training validation. Runs are matched to the papers' rows by directory name.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from verl_hadw.repro.catalogue import (
    ALIASES,
    BENCHMARK_NAMES,
    BENCHMARKS,
    HADW_HARD_GAIN,
    TABLES,
    Table,
)
from verl_hadw.toy.console_log import iter_console

__all__ = [
    "RunResult",
    "read_run",
    "load_scalars",
    "paper_tables",
    "level_table",
    "render",
    "other_runs_table",
    "ResultsError",
]

# val-core/<data_source>/acc/mean@N: the mean over prompts of the per-prompt mean over N samples (avg@N); MATH500's
# levels come as val-aux/math500/acc_level<k>/mean@N and acc_easy|mid|hard (logged by verl_hadw.repro.reward)
VAL_RE = re.compile(r"^val-(?:core|aux)/(?P<ds>[^/]+)/(?P<var>[^/]+)/mean@(?P<n>\d+)$")
LEVEL_COLUMNS = (
    "acc_easy",
    "acc_mid",
    "acc_hard",
    "acc_level1",
    "acc_level2",
    "acc_level3",
    "acc_level4",
    "acc_level5",
)
LEVEL_NAMES = {"acc_easy": "Easy (L1)", "acc_mid": "Mid (L2-3)", "acc_hard": "Hard (L4-5)"} | {
    f"acc_level{k}": f"L{k}" for k in range(1, 6)
}


class ResultsError(RuntimeError):
    """No usable metrics in a run directory, or a bad argument."""


@dataclass
class RunResult:
    name: str
    path: Path
    step: int | None  # the validation step reported
    final: dict[str, float]  # data_source -> accuracy in %
    levels: dict[str, float]  # acc_easy/... -> accuracy in % (MATH500)
    curves: "object"  # pandas DataFrame: index step, columns data_source, values %
    source: str  # "eval" or "training validation"
    samples: dict[str, int] = field(default_factory=dict)  # data_source -> N of mean@N


# --------------------------------------------------------------------------------------------- readers
def _read_tensorboard(directory: Path) -> list[tuple[int, float, str, float]]:
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(directory), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    rows = []
    for tag in acc.Tags().get("scalars", []):
        for event in acc.Scalars(tag):
            rows.append((int(event.step), float(event.wall_time), tag, float(event.value)))
    return rows


def _read_jsonl(path: Path, order: float) -> list[tuple[int, float, str, float]]:
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            if not isinstance(entry, dict) or "step" not in entry or not isinstance(entry.get("data"), dict):
                continue
            step = entry["step"]
            if isinstance(step, bool) or not isinstance(step, int):
                raise ResultsError(f"{path}, line {i + 1}: \"step\" is {step!r}, not a whole number (verl's file "
                                   "logger writes the global step)")
            for key, value in entry["data"].items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    rows.append((step, order + i * 1e-6, key, float(value)))
    return rows


def _read_console(path: Path, order: float) -> list[tuple[int, float, str, float]]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [(step, order + i * 1e-6, key, value) for i, step, key, value in iter_console(f)]


def load_scalars(directory: Path, exclude: Path | None = None):
    """All scalars under ``directory`` (recursive; ``exclude`` subtree skipped) as a DataFrame step/tag/value.

    Duplicates (the same tag and step in several files or formats, or re-logged after a resume) keep the entry
    written last (tensorboard wall time; file modification time and line order for jsonl and console logs).
    """
    import pandas as pd

    def skipped(p: Path) -> bool:
        return exclude is not None and (p == exclude or exclude in p.parents)

    rows: list[tuple[int, float, str, float]] = []
    event_dirs = sorted({p.parent for p in directory.rglob("events.out.tfevents.*") if not skipped(p) and p.is_file()})
    for d in event_dirs:
        rows += _read_tensorboard(d)
    # regular files only: a directory named x.log is no log, and a FIFO or /dev/zero would never end
    for p in sorted(directory.rglob("*.jsonl")):
        if not skipped(p) and p.is_file():
            rows += _read_jsonl(p, p.stat().st_mtime)
    for p in sorted(list(directory.rglob("*.log")) + list(directory.rglob("*.out"))):
        if not skipped(p) and p.is_file():
            rows += _read_console(p, p.stat().st_mtime)
    frame = pd.DataFrame(rows, columns=["step", "order", "tag", "value"])
    if frame.empty:
        return frame[["step", "tag", "value"]]
    frame = frame.sort_values("order").drop_duplicates(["step", "tag"], keep="last")
    return frame[["step", "tag", "value"]].sort_values(["step", "tag"]).reset_index(drop=True)


def _validation(frame):
    """(data_source, var, n) -> Series(step -> value in %), highest N per (data_source, var)."""
    best: dict[tuple[str, str], tuple[int, object]] = {}
    for tag, group in frame.groupby("tag"):
        match = VAL_RE.match(tag)
        if not match:
            continue
        key, n = (match.group("ds"), match.group("var")), int(match.group("n"))
        if key not in best or n > best[key][0]:
            best[key] = (n, group.set_index("step")["value"] * 100.0)
    return best


def read_run(path: str | Path, step: int | None = None) -> RunResult:
    """Validation results of one run directory (see the module docstring)."""
    import pandas as pd

    path = Path(path).expanduser().resolve()
    if not path.is_dir():
        raise ResultsError(f"{path} is not a directory")
    eval_dir = path / "eval"  # scripts/train.sh <run> --eval (DGPO's final evaluation) wins over training's validation
    training = load_scalars(path, exclude=eval_dir if eval_dir.is_dir() else None)
    evaluation = load_scalars(eval_dir) if eval_dir.is_dir() else training.iloc[0:0]
    train_val = _validation(training)
    eval_val = _validation(evaluation)
    chosen, source = (eval_val, "eval") if eval_val else (train_val, "training validation")
    if not chosen:
        raise ResultsError(
            f"{path}: no verl validation metrics (val-core/<data_source>/acc/mean@N) in its tensorboard event "
            "files, *.jsonl or console logs. Is it a run directory, did validation run (trainer.test_freq), and "
            "did the run log to tensorboard/file (trainer.logger)?"
        )
    accuracy = {ds: series for (ds, var), (n, series) in chosen.items() if var == "acc"}
    samples = {ds: n for (ds, var), (n, _) in chosen.items() if var == "acc"}
    if not accuracy:  # a reward function without "acc": fall back to the mean reward
        accuracy = {ds: series for (ds, var), (n, series) in chosen.items() if var == "reward"}
        samples = {ds: n for (ds, var), (n, _) in chosen.items() if var == "reward"}
    steps = sorted(set().union(*(s.index for s in accuracy.values())))
    if step is None:
        report_step = steps[-1]
    else:
        eligible = [s for s in steps if s <= step]
        if not eligible:
            raise ResultsError(f"{path}: no validation at or before step {step} (validated at steps {steps})")
        report_step = eligible[-1]
    final = {ds: float(s.loc[report_step]) for ds, s in accuracy.items() if report_step in s.index}
    levels = {}
    for (ds, var), (_, series) in chosen.items():
        if ds == "math500" and var in LEVEL_COLUMNS and report_step in series.index:
            levels[var] = float(series.loc[report_step])
    curves_src = {ds: series for (ds, var), (_, series) in train_val.items() if var == "acc"} or accuracy
    curves = pd.DataFrame(curves_src).sort_index()
    return RunResult(path.name, path, report_step, final, levels, curves, source, samples)


# ---------------------------------------------------------------------------------------------- tables
def average(values: list[float | None]) -> float:
    if not values or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return float("nan")
    return sum(values) / len(values)


def experiment(run: str) -> str:
    return ALIASES.get(run, run)


def paper_tables(results: dict[str, RunResult]) -> list[tuple[Table, "object"]]:
    """For every catalogue table with at least one of ``results``: a DataFrame of ours / paper / delta rows."""
    import pandas as pd

    out = []
    for table in TABLES:
        columns = [BENCHMARK_NAMES[b] for b in BENCHMARKS[table.paper]]
        records = []
        for row in table.rows:
            result = results.get(experiment(row.run))
            if result is None:
                continue
            ours = [result.final.get(b) for b in BENCHMARKS[table.paper]]
            paper = list(row.paper) if row.paper else [None] * len(columns)
            paper_avg = row.paper_avg if row.paper_avg is not None else average(paper)
            ours_avg = average(ours)
            records.append({"run": row.label, "": "ours", **dict(zip(columns, ours)), "AVG": ours_avg})
            records.append({"run": "", "": "paper", **dict(zip(columns, paper)), "AVG": paper_avg})
            delta = [o - p if o is not None and p is not None else None for o, p in zip(ours, paper)]
            records.append({"run": "", "": "ours - paper", **dict(zip(columns, delta)),
                            "AVG": ours_avg - paper_avg if not math.isnan(paper_avg) else float("nan")})
        if records:
            out.append((table, pd.DataFrame.from_records(records, columns=["run", "", *columns, "AVG"])))
    return out


def other_runs_table(results: dict[str, RunResult]):
    """Runs that match no paper row: ours only, every benchmark they validated on."""
    import pandas as pd

    known = {experiment(r.run) for t in TABLES for r in t.rows}
    others = [r for name, r in results.items() if name not in known]
    if not others:
        return None
    order = [b for paper in BENCHMARKS.values() for b in paper]
    names = sorted({ds for r in others for ds in r.final}, key=lambda d: (order.index(d) if d in order else 99, d))
    records = []
    for r in others:
        values = [r.final.get(ds) for ds in names]
        records.append({"run": r.name, **{BENCHMARK_NAMES.get(d, d): v for d, v in zip(names, values)},
                        "AVG": average(values)})
    return pd.DataFrame.from_records(records)


def level_table(results: dict[str, RunResult]):
    """MATH500 accuracy by difficulty level (HA-DW §5.1 bands and levels 1-5) for runs that logged it."""
    import pandas as pd

    records = [{"run": r.name, **{LEVEL_NAMES[k]: r.levels.get(k, float("nan")) for k in LEVEL_COLUMNS}}
               for r in results.values() if r.levels]
    return pd.DataFrame.from_records(records) if records else None


def hard_gain(results: dict[str, RunResult]) -> str | None:
    base, treated, paper_gain = HADW_HARD_GAIN
    if base in results and treated in results:
        a, b = results[base].levels.get("acc_hard"), results[treated].levels.get("acc_hard")
        if a is not None and b is not None:
            return (f"MATH500 Hard (levels 4-5), GRPO+HA-DW - GRPO (Qwen3-4B-Base): ours {b - a:+.1f}, "
                    f"paper {paper_gain:+.1f} (Fig. 1(c))")
    return None


def _fmt(frame, digits: int) -> str:
    return frame.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.{digits}f}")


# ---------------------------------------------------------------------------------------------- render
def render(results: dict[str, RunResult]) -> str:
    lines = []
    for name, r in results.items():
        n = ", ".join(f"{BENCHMARK_NAMES.get(ds, ds)}@{k}" for ds, k in r.samples.items())
        lines.append(f"{name}: step {r.step} ({r.source}; samples per prompt: {n})")
    for table, frame in paper_tables(results):
        lines += ["", table.title, _fmt(frame, 1 if table.paper == "hadw" else 2)]
    others = other_runs_table(results)
    if others is not None:
        lines += ["", "Runs without a paper row", _fmt(others, 2)]
    levels = level_table(results)
    if levels is not None:
        lines += [
            "",
            "MATH500 by difficulty level (HA-DW §5.1; the paper prints no per-level numbers)",
            _fmt(levels, 1),
        ]
        gain = hard_gain(results)
        if gain:
            lines.append(gain)
    return "\n".join(lines)

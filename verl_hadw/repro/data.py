"""``verl-hadw data``: MATH train and the evaluation sets -> verl parquet files, offline-first (docs/reproduce.md).

Each dataset comes from ``--source NAME=PATH`` (a local file or directory) if given, else from the Hugging Face Hub
(``datasets.load_dataset``; honours ``HF_HUB_OFFLINE=1`` and the cache), else the command says what to do. Writes
``<out>/<paper>/math_train.parquet`` and one ``<benchmark>.<tag>.parquet`` per evaluation setting, in verl's format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from verl_hadw.repro.catalogue import DATASETS, PAPERS, EvalSetting, eval_files, paper_datasets
from verl_hadw.repro.data_fields import extract_fields
from verl_hadw.repro.data_sources import DataSourceError, check_rows, load_records

__all__ = [
    "TEMPLATES",
    "DataSourceError",
    "load_records",
    "build_rows",
    "prepare",
]


HADW_SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."
DGPO_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def _hadw_prompt(question: str) -> list[dict[str, str]]:
    # HA-DW App. G: "{question} Let's think step by step and output the final answer within \boxed{}." as the
    # user turn (the authors' README row: question and instruction joined by a space, verl's math preprocessing).
    return [{"role": "user", "content": f"{question} {HADW_SUFFIX}"}]


def _dgpo_prompt(question: str) -> list[dict[str, str]]:
    # DGPO §4.1 and the recipe's system_prompt; the question alone as the user turn (lighteval: empty template).
    return [{"role": "system", "content": DGPO_SYSTEM}, {"role": "user", "content": question}]


TEMPLATES = {"hadw": _hadw_prompt, "dgpo": _dgpo_prompt}


# ------------------------------------------------------------------------------------------------ building
def build_rows(name: str, records: list[dict], paper: str, setting: EvalSetting | None = None) -> list[dict]:
    """verl rows for one dataset and paper; evaluation rows also get ``setting``'s sample count and agent loop."""
    ds = DATASETS[name]
    template = TEMPLATES[paper]
    if (setting is None) != (ds.split == "train"):
        raise ValueError(f"{name}: an evaluation set needs an EvalSetting and a training set must not get one")
    rows = []
    for position, record in enumerate(records):
        fields = extract_fields(name, record, position)
        row = {
            "data_source": name,
            "prompt": template(fields["question"]),
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": fields["answer"]},
            "extra_info": {
                "split": ds.split,
                "index": position,
                "id": fields["id"],
                "level": fields["level"],
                "subject": None if fields["subject"] is None else str(fields["subject"]),
                "question": fields["question"],
            },
        }
        if setting is not None:  # never on training rows: verl would prefer them to the training settings
            row["__rollout_n__"] = setting.samples
            row["agent_name"] = setting.agent
        rows.append(row)
    return rows


def _schema(evaluation: bool):
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    fields = [
        ("data_source", pa.string()),
        ("prompt", pa.list_(message)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("id", pa.string()),
                    ("level", pa.int64()),
                    ("subject", pa.string()),
                    ("question", pa.string()),
                ]
            ),
        ),
    ]
    if evaluation:
        fields += [("__rollout_n__", pa.int64()), ("agent_name", pa.string())]
    return pa.schema(fields)


def write_parquet(rows: list[dict], path: Path) -> None:
    """One explicit schema for every file, so verl can concatenate the evaluation files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=_schema(bool(rows) and "__rollout_n__" in rows[0]))
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def prepare(
    out: str | Path,
    papers: Iterable[str] = ("hadw", "dgpo"),
    sources: dict[str, str] | None = None,
    only: Iterable[str] | None = None,
    cache_dir: str | None = None,
    log=print,
    allow_row_mismatch: bool = False,
) -> dict[str, Path]:
    """Write the parquet files of ``papers`` under ``out``; returns ``{"<paper>/<file stem>": path}``.

    Every needed dataset is loaded once (local source first, then the Hub). If any cannot be loaded, nothing is
    written and :class:`DataSourceError` lists all of them with what to do. So does a set of the wrong size from
    the Hub or a folder (:func:`check_rows`), unless ``allow_row_mismatch``; a single local file only warns.
    """
    papers = list(papers)
    for paper in papers:
        if paper not in PAPERS:
            raise DataSourceError(f"unknown paper {paper!r}; choose from {', '.join(PAPERS)}")
    sources = dict(sources or {})
    unknown = sorted(set(sources) - set(DATASETS))
    if unknown:
        raise DataSourceError(f"--source for unknown dataset(s) {unknown}; known: {', '.join(DATASETS)}")
    wanted = [n for n in DATASETS if any(n in paper_datasets(p) for p in papers)]
    if only:
        only = list(only)
        bad = sorted(set(only) - set(DATASETS))
        if bad:
            raise DataSourceError(f"--only: unknown dataset(s) {bad}; known: {', '.join(DATASETS)}")
        wanted = [n for n in wanted if n in only]
    loaded, errors = {}, []
    for name in wanted:
        try:
            records, origin, kind = load_records(name, sources.get(name), cache_dir)
            warning = check_rows(name, len(records), origin, kind, allow_row_mismatch)
            if warning:
                log(f"[data] {warning}")
            loaded[name] = records, origin
        except DataSourceError as exc:
            errors.append(str(exc))
    if errors:
        raise DataSourceError(f"{len(errors)} dataset(s) could not be loaded:\n  - " + "\n  - ".join(errors))
    written = {}
    for paper in papers:
        for name in paper_datasets(paper):
            if name not in loaded:
                continue
            records, origin = loaded[name]
            variants = {name: None} if DATASETS[name].split == "train" else {
                f: s for f, s in eval_files(paper).items() if f.split(".", 1)[0] == name}
            for stem, setting in variants.items():
                rows = build_rows(name, records, paper, setting)
                path = Path(out) / paper / f"{stem}.parquet"
                write_parquet(rows, path)
                written[f"{paper}/{stem}"] = path
                log(f"[data] {path}: {len(rows)} rows from {origin}")
    return written

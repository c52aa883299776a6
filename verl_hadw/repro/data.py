"""``verl-hadw data``: MATH train and the evaluation sets -> verl parquet files, offline-first.

For each dataset the source is, in this order: a local file or directory given with ``--source NAME=PATH``
(parquet, jsonl, json, csv, a ``datasets.save_to_disk`` directory, or a directory of such files); otherwise the
Hugging Face dataset (``datasets.load_dataset``; honours ``HF_HUB_OFFLINE=1`` and the cache); otherwise the
command stops with one message per missing dataset that says what to do.

Output, per paper (the configs read ``${paths.data}/<paper>/<name>.parquet``)::

    <out>/<paper>/math_train.parquet
    <out>/<paper>/<benchmark>.<tag>.parquet     one per setting of the paper's evaluation protocols:
        hadw: math500.{greedy,avg4} aime25.avg16 amc23.{avg16,greedy} minerva.{greedy,avg4} olympiadbench.avg4
        dgpo: aime24.avg32 aime25.avg32 amc23.avg32 math500.avg4 minerva.avg4 olympiadbench.avg4

Rows follow verl's RL dataset format: ``data_source`` (the benchmark id: reward checker, metric names),
``prompt`` (chat messages with the paper's template), ``ability``, ``reward_model: {style: rule, ground_truth}``,
``extra_info`` (split, index, id, level, subject, question) and, in evaluation files only, two per-prompt columns
verl 0.9.1 reads in validation: ``__rollout_n__`` (1 for ``greedy``, k for ``avg<k>``) and ``agent_name`` (verl's
``single_turn_agent`` at ``rollout.val_kwargs``, or ``greedy_single_turn_agent`` at temperature 0), so greedy and
sampled benchmarks share one pass. Training files carry neither (verl would prefer them to the training settings).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any, Iterable

from verl_hadw.repro.catalogue import DATASETS, PAPERS, Dataset, EvalSetting, eval_files, paper_datasets

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

PROBLEM_KEYS = ("problem", "question", "Problem", "Question")
ANSWER_KEYS = ("answer", "final_answer", "Answer", "expected_answer")
SOLUTION_KEYS = ("solution", "Solution")
ID_KEYS = ("unique_id", "id", "ID", "idx")


class DataSourceError(RuntimeError):
    """A dataset could be loaded neither from a local file nor from the Hugging Face Hub (or is malformed)."""


# ------------------------------------------------------------------------------------------ answer parsing
def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces balanced; None if absent."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : i]
    return None


def normalize_answer(value: Any) -> str | None:
    """A gold answer as one string: lists joined by ', ', surrounding ``$`` removed; None if empty."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            parsed = None
        if isinstance(parsed, list):
            value = parsed
    if isinstance(value, (list, tuple)):
        parts = [normalize_answer(v) for v in value]
        parts = [p for p in parts if p]
        return ", ".join(parts) if parts else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    while len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text[1:-1].strip()
    return text or None


def parse_level(value: Any) -> int | None:
    """MATH level: 3, "3" or "Level 3" -> 3; "Level ?" or missing -> None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if 1 <= int(value) <= 5 else None
    match = re.search(r"([1-5])", str(value))
    return int(match.group(1)) if match else None


def _first(record: dict, keys: Iterable[str]) -> Any:
    for key in keys:
        value = record.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def extract_fields(name: str, record: dict, position: int) -> dict:
    """question, answer, level, subject, id of one source record; raises DataSourceError naming the fields."""
    question = _first(record, PROBLEM_KEYS)
    answer = normalize_answer(_first(record, ANSWER_KEYS))
    if answer is None:
        solution = _first(record, SOLUTION_KEYS)
        if solution is not None:
            # MATH train has no answer column (its gold answer is the solution's last \boxed{}); some Minerva
            # copies keep the bare final answer in "solution".
            text = str(solution)
            answer = normalize_answer(last_boxed(text) if "\\boxed" in text or "\\fbox" in text else text)
    if question is None or answer is None:
        raise DataSourceError(
            f"{name}: record {position} has no {'question' if question is None else 'answer'}: looked for "
            f"{PROBLEM_KEYS if question is None else ANSWER_KEYS + SOLUTION_KEYS}; record keys: {sorted(record)}"
        )
    identifier = _first(record, ID_KEYS)
    return {
        "question": str(question).strip(),
        "answer": answer,
        "level": parse_level(record.get("level", record.get("Level"))),
        "subject": _first(record, ("subject", "type", "Subject")),
        "id": str(identifier) if identifier is not None else f"{name}-{position}",
    }


# ------------------------------------------------------------------------------------------------ loading
def _read_file(path: Path) -> list[dict]:
    import pandas as pd

    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix == ".parquet":
        frame = pd.read_parquet(path)
    elif suffix in (".jsonl", ".jsonl.gz"):
        frame = pd.read_json(path, lines=True, dtype=False)
    elif suffix == ".json":
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
        if isinstance(payload, dict):  # {"data": [...]} or {"train": [...]}: the single list inside
            lists = [v for v in payload.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise DataSourceError(f"{path}: a JSON object must hold exactly one list of records")
            payload = lists[0]
        frame = pd.DataFrame(payload)
    elif suffix == ".csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        raise DataSourceError(f"{path}: unsupported file type {suffix!r}; use .parquet, .jsonl, .json or .csv")
    return frame.to_dict(orient="records")


def _read_local(name: str, path: Path, split: str) -> list[dict]:
    if not path.exists():
        raise DataSourceError(f"{name}: --source path {path} does not exist")
    if path.is_file():
        return _read_file(path)
    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
        import datasets

        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DataSourceError(f"{name}: {path} has splits {list(loaded)}, not {split!r}")
            loaded = loaded[split]
        return loaded.to_list()
    files = sorted(p for p in path.rglob("*") if p.suffix in (".parquet", ".jsonl", ".json", ".csv"))
    split_files = [p for p in files if split in p.name] or files
    if not split_files:
        raise DataSourceError(f"{name}: {path} holds no .parquet/.jsonl/.json/.csv file")
    return [record for p in split_files for record in _read_file(p)]


def _read_hub(ds: Dataset, cache_dir: str | None) -> list[dict]:
    import datasets

    args = (ds.hf_repo, ds.hf_config) if ds.hf_config else (ds.hf_repo,)
    return datasets.load_dataset(*args, split=ds.hf_split, cache_dir=cache_dir).to_list()


def load_records(name: str, source: str | Path | None = None, cache_dir: str | None = None) -> tuple[list[dict], str]:
    """(records, where they came from) for one dataset: the local ``source`` if given, else the Hub."""
    ds = DATASETS[name]
    if source is not None:
        path = Path(source).expanduser()
        return _read_local(name, path, ds.hf_split), str(path)
    try:
        return _read_hub(ds, cache_dir), f"hf://{ds.hf_repo} ({ds.hf_split})"
    except Exception as exc:  # any Hub/network/cache failure: reported together with the remedy below
        raise DataSourceError(
            f"{name}: the Hugging Face dataset {ds.hf_repo} (split {ds.hf_split}) is not reachable and no local "
            f"copy was given ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}).\n"
            f"    Either make it reachable (network, or a filled cache: HF_HOME / --hf-cache; "
            f"`huggingface-cli download --repo-type dataset {ds.hf_repo}` on a machine with internet), or pass "
            f"--source {name}=/path/to/file.parquet|.jsonl|.json|.csv|<save_to_disk dir>"
        ) from exc


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
        if setting is not None:
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
) -> dict[str, Path]:
    """Write the parquet files of ``papers`` under ``out``; returns ``{"<paper>/<file stem>": path}``.

    Every needed dataset is loaded once (local source first, then the Hub). If any cannot be loaded, nothing is
    written and :class:`DataSourceError` lists all of them with what to do.
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
            loaded[name] = load_records(name, sources.get(name), cache_dir)
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
                expected = DATASETS[name].expected_rows
                note = "" if expected in (None, len(rows)) else f"  (the full dataset has {expected} rows)"
                log(f"[data] {path}: {len(rows)} rows from {origin}{note}")
    return written

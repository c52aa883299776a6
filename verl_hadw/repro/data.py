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
import math
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
BOXED_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` (braces balanced), or of the brace-less
    ``\\boxed 2`` form (up to the closing ``$``, as verl's ``last_boxed_only_string``); None if absent or unclosed.

    At least as tolerant as verl's ``last_boxed_only_string`` + ``remove_boxed`` (MATH train writes ``$\\boxed 2$``
    in ``algebra/24014.json`` and ``25040.json``), and it also takes ``\\fbox{...}``, where ``remove_boxed`` asserts.
    """
    matches = list(BOXED_RE.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():]
    stripped = rest.lstrip()
    if not stripped.startswith("{"):  # \boxed 2$ : the argument runs to the closing $ (or the line's end)
        answer = re.split(r"[$\n]", stripped, maxsplit=1)[0].strip()
        return answer or None
    depth = 0
    for i, char in enumerate(stripped):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return stripped[1:i]
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


# AIME answers are integers 0-999 by the contest's rules; copies store them as "025", 25 or 25.0. The string
# checker (backend auto -> verl_math) compares strings, so the gold is written one way: "25".
INTEGER_ANSWER_SETS = frozenset({"aime24", "aime25"})


def normalize_gold(name: str, answer: str) -> str:
    """The gold as the checker should see it: integer answers of ``INTEGER_ANSWER_SETS`` without leading zeros."""
    if name in INTEGER_ANSWER_SETS and re.fullmatch(r"[+-]?\d+", answer):
        return str(int(answer))
    return answer


def parse_level(value: Any) -> int | None:
    """MATH level: 3, "3" or "Level 3" -> 3; "Level ?", NaN or missing -> None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (int, float)):
        return int(value) if 1 <= int(value) <= 5 else None
    match = re.search(r"([1-5])", str(value))
    return int(match.group(1)) if match else None


def _first(record: dict, keys: Iterable[str]) -> Any:
    for key in keys:
        value = record.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):  # pandas stores gaps as NaN
            continue
        if not (isinstance(value, str) and not value.strip()):
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
            answer = normalize_answer(last_boxed(text) if BOXED_RE.search(text) else text)
    if question is None or answer is None:
        raise DataSourceError(
            f"{name}: record {position} has no {'question' if question is None else 'answer'}: looked for "
            f"{PROBLEM_KEYS if question is None else ANSWER_KEYS + SOLUTION_KEYS}; record keys: {sorted(record)}"
        )
    identifier = _first(record, ID_KEYS)
    return {
        "question": str(question).strip(),
        "answer": normalize_gold(name, answer),
        "level": parse_level(record.get("level", record.get("Level"))),
        "subject": _first(record, ("subject", "type", "Subject")),
        "id": str(identifier) if identifier is not None else f"{name}-{position}",
    }


# ------------------------------------------------------------------------------------------------ loading
FILE_KINDS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "json", ".csv": "csv"}


def _file_kind(path: Path) -> str | None:
    """parquet / jsonl / json / csv for a data file (also gzip-compressed: ``.jsonl.gz``), else None."""
    suffixes = path.suffixes[-2:] if path.suffix == ".gz" else path.suffixes[-1:]
    return FILE_KINDS.get(suffixes[0]) if suffixes and (len(suffixes) == 1 or suffixes[1] == ".gz") else None


def _json_records(path: Path, split: str | None) -> list[dict]:
    """A ``.json`` file: a list of records, an object holding one list ({"data": [...]}) or one list per split
    ({"train": [...], "test": [...]}: the ``split`` one), or JSON Lines under a .json name."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        if "Extra data" not in exc.msg:
            raise DataSourceError(f"{path}: not valid JSON ({exc})") from exc
        try:  # several JSON values: JSON Lines, whatever the file is called
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as lines_exc:
            raise DataSourceError(f"{path}: neither JSON nor JSON Lines ({lines_exc})") from lines_exc
    if isinstance(payload, dict):
        lists = {k: v for k, v in payload.items() if isinstance(v, list)}
        if split in lists:
            payload = lists[split]
        elif len(lists) == 1:
            payload = next(iter(lists.values()))
        else:
            raise DataSourceError(f"{path}: a JSON object must hold one list of records or one per split; it holds "
                                  f"lists under {sorted(lists)} and none is the split {split!r}")
    if not isinstance(payload, list) or not all(isinstance(r, dict) for r in payload):
        raise DataSourceError(f"{path}: expected a list of records (JSON objects)")
    return payload


def _read_file(path: Path, split: str | None = None) -> list[dict]:
    import pandas as pd

    kind = _file_kind(path)
    if kind == "parquet":
        frame = pd.read_parquet(path)
    elif kind == "jsonl":
        try:
            frame = pd.read_json(path, lines=True, dtype=False)
        except ValueError as exc:
            raise DataSourceError(f"{path}: not JSON Lines ({exc})") from exc
    elif kind == "json":
        return _json_records(path, split)
    elif kind == "csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        raise DataSourceError(f"{path}: unsupported file type {''.join(path.suffixes)!r}; use .parquet, .jsonl, "
                              ".json or .csv (each also .gz)")
    return frame.to_dict(orient="records")


def _card_files(folder: Path, config: str, split: str) -> list[Path] | None:
    """The files ``datasets`` loads for ``config`` / ``split`` from a downloaded Hub folder: the ``configs:`` list of
    its README.md (the dataset card's YAML header); None without such a list."""
    import yaml

    card = folder / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return None
    header = yaml.safe_load(text.split("---", 2)[1]) or {}
    configs = {c.get("config_name", "default"): c for c in header.get("configs") or [] if isinstance(c, dict)}
    if not configs:
        return None
    if config not in configs:
        raise DataSourceError(f"{folder}: its README.md declares the configs {sorted(configs)}, not {config!r}")
    data_files = configs[config].get("data_files")
    entries = data_files if isinstance(data_files, list) else [{"split": "train", "path": data_files}]
    patterns = [p for e in entries if isinstance(e, dict) and e.get("split") == split
                for p in ([e["path"]] if isinstance(e.get("path"), str) else e.get("path") or [])]
    if not patterns:
        raise DataSourceError(f"{folder}: config {config!r} of its README.md has no split {split!r}")
    files = sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    if not files:
        raise DataSourceError(f"{folder}: no file matches {patterns} (config {config!r}, split {split!r} of its "
                              "README.md): an incomplete download?")
    return files


def _split_files(folder: Path, split: str) -> list[Path]:
    """Without a dataset card: the data files of ``split`` (named ``<split>-*`` / ``<split>.*`` or under a
    ``<split>/`` directory; all data files when none is), which must all sit in one directory."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and _file_kind(p) and not p.name.startswith("."))
    if not files:
        raise DataSourceError(f"{folder} holds no .parquet/.jsonl/.json/.csv file (also .gz)")
    named = [p for p in files if re.match(rf"{re.escape(split)}([-_.]|$)", p.name)
             or split in p.relative_to(folder).parts[:-1]]
    chosen = named or files
    dirs = sorted({str(p.parent.relative_to(folder)) for p in chosen})
    if len(dirs) > 1:
        raise DataSourceError(
            f"{folder}: the {split!r} data is ambiguous, files in {len(dirs)} directories ({', '.join(dirs)}): "
            "reading them all could count rows twice (a Hub folder holds the whole set and per-subject subsets). "
            "Pass the directory or file you mean, e.g. --source NAME=" + str(chosen[0].parent))
    return chosen


def _read_local(name: str, path: Path, split: str, config: str | None = None) -> tuple[list[dict], str]:
    """(records, kind) of a local source; kind is ``file`` (one file, maybe a deliberate subset) or ``folder``."""
    if not path.exists():
        raise DataSourceError(f"{name}: --source path {path} does not exist")
    if path.is_file():
        return _read_file(path, split), "file"
    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
        import datasets

        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DataSourceError(f"{name}: {path} has splits {list(loaded)}, not {split!r}")
            loaded = loaded[split]
        return loaded.to_list(), "folder"
    files = _card_files(path, config or "default", split) or _split_files(path, split)
    return [record for p in files for record in _read_file(p, split)], "folder"


def _read_hub(ds: Dataset, cache_dir: str | None) -> list[dict]:
    import datasets

    args = (ds.hf_repo, ds.hf_config) if ds.hf_config else (ds.hf_repo,)
    return datasets.load_dataset(*args, split=ds.hf_split, cache_dir=cache_dir).to_list()


def offline_help(ds: Dataset) -> str:
    """What to do without access to the Hub (both ways are tested on a folder / cache of the Hub's layout)."""
    config = f" {ds.hf_config}" if ds.hf_config else ""
    return (
        f"Either (a) on a machine with internet: `hf download --repo-type dataset {ds.hf_repo} --local-dir DIR` "
        f"(or huggingface-cli download), copy DIR here and pass --source {ds.name}=DIR (the files its README.md "
        f"names for{config or ' the default config'} / {ds.hf_split} are read); or (b) copy that machine's "
        "Hugging Face cache after `verl-hadw data` ran there (HF_HOME, or HF_DATASETS_CACHE / --hf-cache) and run "
        f"with HF_HUB_OFFLINE=1 and the same cache; or (c) --source {ds.name}=/path/to/file.parquet|.jsonl|.json|"
        ".csv|<save_to_disk dir>"
    )


def load_records(name: str, source: str | Path | None = None,
                 cache_dir: str | None = None) -> tuple[list[dict], str, str]:
    """(records, where they came from, kind) for one dataset: the local ``source`` if given, else the Hub.
    kind: ``hub``, ``folder`` (a directory) or ``file`` (a single local file)."""
    ds = DATASETS[name]
    if source is not None:
        path = Path(source).expanduser()
        records, kind = _read_local(name, path, ds.hf_split, ds.hf_config)
        return records, str(path), kind
    try:
        return _read_hub(ds, cache_dir), f"hf://{ds.hf_repo} ({ds.hf_split})", "hub"
    except Exception as exc:  # any Hub/network/cache failure: reported together with the remedy below
        raise DataSourceError(
            f"{name}: the Hugging Face dataset {ds.hf_repo} (split {ds.hf_split}) is not reachable and no local "
            f"copy was given ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}).\n"
            f"    {offline_help(ds)}"
        ) from exc


def check_rows(name: str, count: int, origin: str, kind: str, allow_mismatch: bool = False) -> str | None:
    """The row-count check of one loaded set: None when it has the full set's size; a warning (a single local
    file, often a deliberate subset, or ``allow_mismatch``); else DataSourceError naming both counts."""
    expected = DATASETS[name].expected_rows
    if expected is None or count == expected:
        return None
    message = f"{name}: {count} rows from {origin}, but the full set has {expected}"
    if kind == "file" or allow_mismatch:
        return f"warning: {message}"
    raise DataSourceError(f"{message} (a partial download, or the same rows read twice?). To use it anyway, pass "
                          "--allow-row-mismatch")


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

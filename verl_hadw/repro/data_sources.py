"""Where a dataset's records come from, offline-first: a local file or folder, else the Hugging Face Hub.

A local source (``--source NAME=PATH``) is a parquet, jsonl, json or csv file (each also ``.gz``), a ``save_to_disk``
directory, a downloaded Hub folder or a directory of such files. Else ``datasets.load_dataset`` (honours
``HF_HUB_OFFLINE=1`` and the cache); failing that, an error that says what to do (:func:`offline_help`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from verl_hadw.repro.catalogue import DATASETS, Dataset

__all__ = ["DataSourceError", "FILE_KINDS", "file_kind", "read_file", "load_records", "check_rows", "offline_help"]


class DataSourceError(RuntimeError):
    """A dataset could be loaded neither from a local file nor from the Hugging Face Hub (or is malformed)."""


FILE_KINDS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "json", ".csv": "csv"}


def file_kind(path: Path) -> str | None:
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


def read_file(path: Path, split: str | None = None) -> list[dict]:
    import pandas as pd

    kind = file_kind(path)
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
    files = sorted(p for p in folder.rglob("*") if p.is_file() and file_kind(p) and not p.name.startswith("."))
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
        return read_file(path, split), "file"
    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
        import datasets

        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DataSourceError(f"{name}: {path} has splits {list(loaded)}, not {split!r}")
            loaded = loaded[split]
        return loaded.to_list(), "folder"
    files = _card_files(path, config or "default", split) or _split_files(path, split)
    return [record for p in files for record in read_file(p, split)], "folder"


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

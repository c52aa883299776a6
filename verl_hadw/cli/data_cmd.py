"""``verl-hadw data``: MATH train and the evaluation sets -> verl parquet files (see ``verl_hadw.repro.data``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verl_hadw.cli.arguments import Choice, InputPath, OutputDir
from verl_hadw.repro import data as _data
from verl_hadw.repro.catalogue import DATASETS, PAPERS, paper_datasets
from verl_hadw.repro.data import DataSourceError, prepare
from verl_hadw.repro.data_sources import FILE_KINDS, file_kind


class Source(InputPath):
    """``--source NAME=PATH``: NAME a dataset of the catalogue, PATH an existing file or directory."""

    __name__ = "NAME=PATH"
    kinds = ("input_path", "choice")
    suffixes = (*FILE_KINDS, *(f"{s}.gz" for s in FILE_KINDS))  # a file's; a directory is read as a dataset

    def __init__(self):
        super().__init__()
        self.kinds = Source.kinds

    def __call__(self, text: str) -> str:
        name, sep, path = text.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise argparse.ArgumentTypeError(f"expects NAME=PATH, got {text!r} (NAME one of: {', '.join(DATASETS)})")
        return text

    def check(self, value: str) -> str | None:
        name = value.partition("=")[0].strip()
        if name not in DATASETS:
            return f"{name!r} is no dataset; NAME is one of {', '.join(DATASETS)}"
        path = Path(self.path_of(value)).expanduser()
        if path.is_file() and file_kind(path) is None:
            return (f"{path}: unsupported file type {''.join(path.suffixes)!r}; use {', '.join(self.suffixes)} or "
                    "a directory")
        return super().check(self.path_of(value))

    def wrap(self, value: str) -> str:
        return f"{next(iter(DATASETS))}={value}"

    def path_of(self, value: str) -> str:
        return value.partition("=")[2].strip()


def _parse_sources(items: list[str]) -> dict[str, str]:
    return {item.partition("=")[0].strip(): item.partition("=")[2].strip() for item in items}


def data_main(args: argparse.Namespace) -> int:
    if args.list:
        for ds in DATASETS.values():
            used = [p for p in PAPERS if ds.name in paper_datasets(p)]
            print(f"{ds.name:14s} hf://{ds.hf_repo} [{ds.hf_split}]  papers: {', '.join(used)}")
        return 0
    try:
        papers = list(PAPERS) if args.paper == "all" else [args.paper]
        written = prepare(args.out, papers, _parse_sources(args.source), args.only, args.hf_cache,
                          allow_row_mismatch=args.allow_row_mismatch)
    except DataSourceError as exc:
        print(f"verl-hadw data: error: {exc}", file=sys.stderr)  # every dataset that failed, with what to do
        return 2
    print(f"[data] {len(written)} files under {Path(args.out).resolve()}; point the configs at it with "
          f"VERL_HADW_DATA={Path(args.out).resolve()} (or paths.data=...)")
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser(
        "data",
        help="prepare MATH train and the evaluation sets as verl parquet (local files or Hugging Face)",
        description=_data.__doc__.split("\n\n")[1],
    )
    p.add_argument("--out", default="data", type=OutputDir(), help="output directory (default: ./data)")
    p.add_argument("--paper", default="all", choices=["all", *PAPERS], help="which paper's files (default: all)")
    p.add_argument("--source", action="append", default=[], metavar="NAME=PATH", type=Source(),
                   help="local copy of a dataset: a parquet/jsonl/json/csv file (also .gz), a save_to_disk "
                   "directory or a downloaded Hub folder (read as its README.md's configs say); repeatable")
    p.add_argument("--only", nargs="+", metavar="NAME", type=Choice(lambda: list(DATASETS), at_parse_time=False),
                   help="prepare only these datasets")
    p.add_argument("--hf-cache", type=OutputDir(), help="Hugging Face datasets cache directory")
    p.add_argument("--allow-row-mismatch", action="store_true",
                   help="use a Hub set or a folder whose row count differs from the full set's (default: stop)")
    p.add_argument("--list", action="store_true", help="list the datasets and their Hugging Face sources")
    p.set_defaults(func=data_main)

"""Local sources of `verl-hadw data` in the shapes users have them: a downloaded Hub folder (read once, by its
dataset card), the Hub's cache offline, and the file corners (JSON Lines named .json, .gz, one list per split)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from data_fixtures import SUBJECTS, block_hub, math_lighteval_folder, read_rows

from verl_hadw import cli
from verl_hadw.repro import data


@pytest.fixture
def no_hub(monkeypatch):
    return block_hub(monkeypatch)


def test_a_downloaded_math_lighteval_folder_is_read_once(tmp_path, no_hub):
    """The folder holds every problem twice (data/ and the subject directories): the card's default/train files
    are read, 7,500 rows, no duplicate. Without a card the layout is ambiguous and refused, naming the
    directories; a partial download stops with both counts unless --allow-row-mismatch."""
    folder = math_lighteval_folder(tmp_path / "MATH-lighteval")
    out = tmp_path / "out"
    assert cli.main(["data", "--out", str(out), "--paper", "dgpo", "--only", "math_train",
                     "--source", f"math_train={folder}"]) == 0
    rows = read_rows(out / "dgpo" / "math_train.parquet")
    questions = [r["extra_info"]["question"] for r in rows]
    assert len(rows) == 7500 and len(set(questions)) == 7500 and all(q.startswith("train ") for q in questions)
    assert {r["extra_info"]["subject"] for r in rows} == {s.replace("_", " ").title() for s in SUBJECTS}

    bare = math_lighteval_folder(tmp_path / "no-card", card=False)
    with pytest.raises(data.DataSourceError, match=r"ambiguous, files in 8 directories \(algebra, .*data.*\)"):
        data.prepare(out, ["dgpo"], {"math_train": str(bare)}, only=["math_train"], log=lambda *_: None)
    # pointing at the one directory meant works
    data.prepare(out, ["dgpo"], {"math_train": str(bare / "data")}, only=["math_train"], log=lambda *_: None)
    assert len(read_rows(out / "dgpo" / "math_train.parquet")) == 7500

    partial = math_lighteval_folder(tmp_path / "partial", drop=100)
    with pytest.raises(data.DataSourceError, match=r"math_train: 7400 rows from .*partial, but the full set has "
                                                   r"7500.*--allow-row-mismatch"):
        data.prepare(out, ["dgpo"], {"math_train": str(partial)}, only=["math_train"], log=lambda *_: None)
    logged = []
    data.prepare(out, ["dgpo"], {"math_train": str(partial)}, only=["math_train"], log=logged.append,
                 allow_row_mismatch=True)
    assert any("warning: math_train: 7400 rows" in line for line in logged)


@pytest.mark.slow  # two fresh interpreters importing datasets
def test_offline_hub_cache_is_read_with_hf_hub_offline(tmp_path):
    """Way (b) of the offline help: the `datasets` cache of a machine where the Hub load ran, used elsewhere with
    HF_HUB_OFFLINE=1 (`verl-hadw data --hf-cache`, in a fresh process as a user runs it). The cache is made by
    `datasets` itself from a folder of the Hub's layout (no network) and filed under the repository's name, where a
    Hub load of DigitalLearningGmbH/MATH-lighteval leaves it."""
    import datasets

    folder = math_lighteval_folder(tmp_path / "MATH-lighteval")
    cache = tmp_path / "hf-cache"
    assert len(datasets.load_dataset(str(folder), "default", split="train", cache_dir=str(cache))) == 7500
    (built,) = [p for p in cache.iterdir() if p.is_dir() and (p / "default").is_dir()]
    built.rename(cache / "DigitalLearningGmbH___math-lighteval")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    cmd = [sys.executable, "-m", "verl_hadw.cli", "data", "--out", str(tmp_path / "out"), "--paper", "hadw",
           "--only", "math_train", "--hf-cache", str(cache)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7500 rows from hf://DigitalLearningGmbH/MATH-lighteval (train)" in proc.stdout
    assert len(read_rows(tmp_path / "out" / "hadw" / "math_train.parquet")) == 7500
    # the same offline run without that cache fails with the offline help, not a traceback
    proc = subprocess.run(cmd[:-1] + [str(tmp_path / "empty-cache")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "HF_HUB_OFFLINE=1" in proc.stderr and "Traceback" not in proc.stderr


def test_local_file_corners(tmp_path, no_hub):
    """JSON Lines under a .json name, .jsonl.gz inside a directory, {"train": [...], "test": [...]}, a NaN level
    (pandas' gap) each work; a JSON object with several lists but none for the split, or broken JSON, is a clear
    error."""
    import gzip

    import pandas as pd

    rows = [{"problem": "1+1?", "answer": "2", "level": "Level 1"}, {"problem": "2+2?", "answer": "4"}]
    jsonl_named_json = tmp_path / "aime.json"
    jsonl_named_json.write_text("".join(json.dumps(r) + "\n" for r in rows))
    gz_dir = tmp_path / "gz"
    gz_dir.mkdir()
    with gzip.open(gz_dir / "test.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    splits = tmp_path / "splits.json"
    splits.write_text(json.dumps({"train": rows, "test": [{"problem": "x?", "answer": "9"}]}))
    nan_level = tmp_path / "nan.parquet"
    pd.DataFrame({"problem": ["a?", "b?"], "answer": ["1", "2"], "level": [3.0, float("nan")]}).to_parquet(nan_level)
    for path, name, answers in ((jsonl_named_json, "aime24", ["2", "4"]), (gz_dir, "math500", ["2", "4"]),
                                (splits, "aime25", ["2", "4"]),  # yentinglin/aime_2025's Hub split is "train"
                                (nan_level, "amc23", ["1", "2"])):
        records, origin, kind = data.load_records(name, str(path))
        assert [data.extract_fields(name, r, i)["answer"] for i, r in enumerate(records)] == answers, name
    assert [data.extract_fields("amc23", r, i)["level"] for i, r in enumerate(data.load_records("amc23", str(
        nan_level))[0])] == [3, None]
    assert data.load_records("math500", str(splits))[0] == [{"problem": "x?", "answer": "9"}]  # split "test"
    several = tmp_path / "several.json"
    several.write_text(json.dumps({"dev": rows, "other": rows}))
    with pytest.raises(data.DataSourceError, match=r"lists under \['dev', 'other'\] and none is the split 'train'"):
        data.load_records("aime24", str(several))
    broken = tmp_path / "broken.json"
    broken.write_text('{"problem": ')
    with pytest.raises(data.DataSourceError, match="not valid JSON"):
        data.load_records("aime24", str(broken))
    with pytest.raises(data.DataSourceError, match=r"unsupported file type '.txt'"):
        data.load_records("aime24", str(tmp_path / "x.txt")) if (tmp_path / "x.txt").write_text("x") else None


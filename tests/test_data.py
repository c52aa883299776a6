"""`verl-hadw data` (local files, Hugging Face, neither) and the reward (verl's MATH checker, math-verify) on
small fixture files shipped in tests/fixtures/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from verl_hadw import cli, reward
from verl_hadw.repro import catalogue as K
from verl_hadw.repro import data

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCAL = {
    "math_train": "math_train.jsonl",
    "math500": "math500.jsonl",
    "aime24": "aime24.json",
    "aime25": "aime25.csv",
    "amc23": "amc23.jsonl",
    "minerva": "minerva.jsonl",
    "olympiadbench": "olympiadbench.jsonl",
}
SOURCES = [f"{name}={FIXTURES / 'data' / file}" for name, file in LOCAL.items()]
EXPECTED_GT = {
    "math_train": ["5", "\\frac{1}{2}", "11", "3"],  # the solution's last \boxed{}, nested braces kept
    "math500": ["2\\sqrt{2}", "2", "1.2 \\times 10^{-3}"],
    "aime24": ["24", "9"],  # "024": AIME answers are integers, written without leading zeros
    "aime25": ["70", "21"],
    "amc23": ["42", "0.75"],  # 42.0 -> "42"
    "minerva": ["100", "1.2 \\times 10^{-6}"],  # boxed in a solution, or the bare answer
    "olympiadbench": ["\\frac{1}{4}", "0, 1"],  # ["$\\frac{1}{4}$"] -> "\\frac{1}{4}"; two answers joined
}


class InlineExecutor:
    """Stands in for verl's math-verify process pool: runs the same function in this process (the pool only
    adds a timeout; spawning it costs ~20 s of imports on this machine)."""

    def submit(self, fn, *args, **kwargs):
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@pytest.fixture
def inline_math_verify(monkeypatch):
    from verl.utils.reward_score import math_verify as verl_math_verify

    monkeypatch.setattr(verl_math_verify, "_get_pool", lambda: InlineExecutor())


@pytest.fixture
def no_hub(monkeypatch):
    """Any Hugging Face access fails, as on an offline machine."""
    calls = []

    def offline(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("offline (test)")

    import datasets

    monkeypatch.setattr(datasets, "load_dataset", offline)
    return calls


def _rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


# ----------------------------------------------------------------------------------------------- data
def test_prepare_from_local_files(tmp_path, no_hub, capsys):
    assert cli.main(["data", "--out", str(tmp_path), *sum((["--source", s] for s in SOURCES), [])]) == 0
    assert no_hub == []  # local copies given: the Hub is never asked
    for paper in K.PAPERS:
        stems = ["math_train", *K.eval_files(paper)]
        assert sorted(p.stem for p in (tmp_path / paper).glob("*.parquet")) == sorted(stems)
        for stem in stems:
            name = stem.split(".")[0]
            rows = _rows(tmp_path / paper / f"{stem}.parquet")
            assert [r["reward_model"]["ground_truth"] for r in rows] == EXPECTED_GT[name]
            assert {r["data_source"] for r in rows} == {name} and all(r["ability"] == "math" for r in rows)
            assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
            if name == "math_train":
                # the training file carries neither per-prompt column (verl would use them instead of rollout.n
                # and the training sampling)
                assert "__rollout_n__" not in rows[0] and "agent_name" not in rows[0]
                assert rows[0]["extra_info"]["split"] == "train"
            else:  # the file name says the setting; every row carries it
                setting = K.eval_files(paper)[stem]
                assert {(r["__rollout_n__"], r["agent_name"]) for r in rows} == {(setting.samples, setting.agent)}
    hadw = _rows(tmp_path / "hadw" / "math_train.parquet")
    assert hadw[0]["prompt"] == [{"role": "user", "content": "What is $2+3$? Let's think step by step and output "
                                                                "the final answer within \\boxed{}."}]
    dgpo = _rows(tmp_path / "dgpo" / "math_train.parquet")
    assert dgpo[0]["prompt"] == [
        {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
        {"role": "user", "content": "What is $2+3$?"},
    ]
    # MATH levels kept for the hard-prompt analysis ("Level ?" -> null), subjects too
    assert [r["extra_info"]["level"] for r in hadw] == [1, 2, None, 5]
    assert [r["extra_info"]["level"] for r in _rows(tmp_path / "dgpo" / "math500.avg4.parquet")] == [2, 1, 4]
    assert _rows(tmp_path / "dgpo" / "math500.avg4.parquet")[0]["extra_info"]["id"] == "test/algebra/1.json"
    # the files the protocols need: HA-DW greedy + avg4 MATH500 / Minerva, avg16 + greedy AMC23, avg16 AIME25,
    # avg4 OlympiadBench; DGPO avg32 on AIME24/AIME25/AMC23, avg4 on the others
    assert sorted(K.eval_files("hadw")) == sorted([
        "math500.greedy", "math500.avg4", "aime25.avg16", "aime25.greedy", "amc23.avg16", "amc23.greedy",
        "minerva.greedy", "minerva.avg4", "olympiadbench.avg4", "olympiadbench.greedy"])
    assert {f: s.tag for f, s in K.eval_files("dgpo").items()} == {
        "aime24.avg32": "avg32", "aime25.avg32": "avg32", "amc23.avg32": "avg32", "math500.avg4": "avg4",
        "minerva.avg4": "avg4", "olympiadbench.avg4": "avg4"}
    out = capsys.readouterr().out
    assert "18 files" in out
    # single local files (often deliberate subsets) pass with a warning naming both counts
    assert "warning: math_train: 4 rows from" in out and "but the full set has 7500" in out


def test_verl_reads_the_evaluation_files_as_one_dataset(tmp_path, monkeypatch):
    """verl's own RLHFDataset concatenates a paper's evaluation files (one schema) and passes our columns on:
    the per-prompt sample count and agent loop that verl's validation reads."""
    import datasets
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from verl_hadw.repro.compose import compose_run

    data.prepare(tmp_path, ["dgpo", "hadw"], dict(s.split("=", 1) for s in SOURCES), log=lambda *_: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    cfg = OmegaConf.create({"filter_overlong_prompts": False, "prompt_key": "prompt"})
    # the files the configs name: DGPO's final evaluation, a HA-DW DAPO run's validation (paper protocol)
    dgpo_files = list(compose_run("dgpo_t1_dgpo", ["eval=dgpo", f"paths.data={tmp_path}"]).data.val_files)
    dataset = RLHFDataset(dgpo_files, tokenizer=None, config=cfg)
    assert len(dataset) == 2 + 2 + 2 + 3 + 2 + 2
    first = dataset[0]
    assert first["data_source"] == "aime24" and first["__rollout_n__"] == 32 and first["agent_name"] == K.SAMPLED_AGENT
    assert first["raw_prompt"][0]["role"] == "system" and first["reward_model"]["ground_truth"] == "24"
    math500 = dataset[6]
    assert math500["data_source"] == "math500" and math500["__rollout_n__"] == 4
    assert math500["extra_info"]["level"] == 2
    hadw_files = list(compose_run("hadw_t1_qwen3_4b_dapo", [f"paths.data={tmp_path}"]).data.val_files)
    hadw = RLHFDataset(hadw_files, tokenizer=None, config=cfg)
    got = {(hadw[i]["data_source"], hadw[i]["__rollout_n__"], hadw[i]["agent_name"]) for i in range(len(hadw))}
    greedy, sampled = K.GREEDY_AGENT, K.SAMPLED_AGENT
    assert got == {("math500", 1, greedy), ("aime25", 16, sampled), ("amc23", 1, greedy), ("minerva", 1, greedy),
                   ("olympiadbench", 4, sampled)}


def test_prepare_from_hugging_face(tmp_path, monkeypatch):
    """Without local files the Hub is used: the right repositories and splits, the same rows."""
    import datasets

    asked = []

    def fake_load_dataset(*args, split=None, cache_dir=None):
        asked.append((args, split, cache_dir))
        name = next(n for n, d in K.DATASETS.items() if d.hf_repo == args[0])
        records = data._read_file(FIXTURES / "data" / LOCAL[name])
        return datasets.Dataset.from_list([{k: (str(v) if k == "answer" else v) for k, v in r.items()}
                                           for r in records])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    logged = []
    written = data.prepare(tmp_path, ["hadw"], cache_dir="/cache", log=logged.append, allow_row_mismatch=True)
    assert "[data] warning: math500: 3 rows from hf://HuggingFaceH4/MATH-500 (test), but the full set has 500" in logged
    assert sorted(written) == sorted(f"hadw/{n}" for n in ["math_train", *K.eval_files("hadw")])
    assert (("DigitalLearningGmbH/MATH-lighteval", "default"), "train", "/cache") in asked
    assert (("HuggingFaceH4/MATH-500",), "test", "/cache") in asked
    assert (("yentinglin/aime_2025",), "train", "/cache") in asked
    assert len(asked) == len(K.paper_datasets("hadw"))  # aime24 is DGPO-only
    aime25 = _rows(tmp_path / "hadw" / "aime25.avg16.parquet")
    assert [r["reward_model"]["ground_truth"] for r in aime25] == ["70", "21"]


def test_neither_hub_nor_local_copy_fails_clearly(tmp_path, no_hub, capsys):
    code = cli.main(["data", "--out", str(tmp_path), "--paper", "dgpo", "--source", SOURCES[0]])
    err = capsys.readouterr().err
    assert code == 2
    assert "6 dataset(s) could not be loaded" in err
    assert "aime24: the Hugging Face dataset HuggingFaceH4/aime_2024 (split train) is not reachable" in err
    assert "--source aime24=/path/to/file" in err and "ConnectionError" in err
    # offline ways that `datasets` really reads (both tested below): a downloaded folder, or a filled cache
    assert "hf download --repo-type dataset HuggingFaceH4/aime_2024 --local-dir DIR" in err
    assert "--source aime24=DIR" in err and "HF_HUB_OFFLINE=1" in err
    assert not (tmp_path / "dgpo").exists()  # nothing half-written


def test_bad_local_inputs_name_the_problem(tmp_path, no_hub):
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"text": "no question field"}) + "\n")
    with pytest.raises(data.DataSourceError, match=r"aime24: record 0 has no question.*record keys: \['text'\]"):
        data.prepare(tmp_path / "out", ["dgpo"], {"aime24": str(broken)}, only=["aime24"], log=lambda *_: None)
    with pytest.raises(data.DataSourceError, match="does not exist"):
        data.prepare(tmp_path / "out", ["hadw"], {"amc23": str(tmp_path / "missing.csv")}, only=["amc23"])
    with pytest.raises(data.DataSourceError, match="unknown dataset"):
        data.prepare(tmp_path / "out", ["hadw"], {"gsm8k": str(broken)})
    record = [{"problem": "1+1?", "answer": "2"}]
    with pytest.raises(ValueError, match="an evaluation set needs an EvalSetting"):
        data.build_rows("math500", record, "hadw")  # no sample count: verl would fall back to val_kwargs.n
    with pytest.raises(ValueError, match="a training set must not get one"):
        data.build_rows("math_train", record, "hadw", K.EvalSetting(4))


# ------------------------------------------------------------------------------ the real datasets' shapes
FORMS = [json.loads(line) for line in (FIXTURES / "data" / "math_boxed_forms.jsonl").read_text().splitlines()]


def _verl_boxed(text: str) -> str | None:
    from verl.utils.reward_score.math_reward import last_boxed_only_string, remove_boxed

    try:
        boxed = last_boxed_only_string(text)
        return None if boxed is None else remove_boxed(boxed)
    except AssertionError:  # remove_boxed asserts on \fbox{...}
        return None


@pytest.mark.parametrize("case", FORMS, ids=[c["problem"][:40] for c in FORMS])
def test_boxed_answers_in_the_forms_math_train_writes_them(case):
    """MATH train writes `$\\boxed 2$` (algebra/24014.json, 25040.json), nested braces and \\fbox: each gives
    its answer, wherever verl's last_boxed_only_string + remove_boxed gives one (and where it does not)."""
    assert data.last_boxed(case["solution"]) == case["want"]
    assert _verl_boxed(case["solution"]) == case["verl"]  # what verl's own extraction makes of it
    fields = data.extract_fields("math_train", case, 0)
    assert fields["answer"] == case["want"] and fields["level"] == int(case["level"][-1])


def test_math_train_with_the_real_forms_prepares(tmp_path, no_hub):
    written = data.prepare(tmp_path, ["hadw"], {"math_train": str(FIXTURES / "data" / "math_boxed_forms.jsonl")},
                           only=["math_train"], log=lambda *_: None)
    rows = _rows(written["hadw/math_train"])
    assert [r["reward_model"]["ground_truth"] for r in rows] == [c["want"] for c in FORMS]
    assert data.last_boxed("no box here") is None and data.last_boxed("\\boxed{unclosed") is None


# MATH-lighteval as `hf download --repo-type dataset DigitalLearningGmbH/MATH-lighteval` lays it out: the whole
# set under data/ (config "default") and one directory per subject (configs "algebra", ...), with the dataset
# card's YAML naming the files of each config and split. Train sizes from the card.
SUBJECTS = {"algebra": 1744, "counting_and_probability": 771, "geometry": 870, "intermediate_algebra": 1295,
            "number_theory": 869, "prealgebra": 1205, "precalculus": 746}


def _math_lighteval_folder(root: Path, card: bool = True, drop: int = 0) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def table(subject: str, count: int, split: str) -> pa.Table:
        kind = subject.replace("_", " ").title()
        return pa.table({
            "problem": [f"{split} {subject} problem {i}" for i in range(count)],
            "level": [f"Level {1 + i % 5}" for i in range(count)],
            "solution": [f"... so the answer is $\\boxed{{{i}}}$." for i in range(count)],
            "type": [kind] * count,
        })

    per_split = {"train": SUBJECTS, "test": {s: 3 for s in SUBJECTS}}
    for split, sizes in per_split.items():
        whole = pa.concat_tables([table(s, n, split) for s, n in sizes.items()])
        (root / "data").mkdir(parents=True, exist_ok=True)
        pq.write_table(whole.slice(0, len(whole) - drop), root / "data" / f"{split}-00000-of-00001.parquet")
        for subject, count in sizes.items():
            (root / subject).mkdir(exist_ok=True)
            pq.write_table(table(subject, count, split), root / subject / f"{split}-00000-of-00001.parquet")
    if card:
        configs = [{"config_name": name, "data_files": [{"split": split, "path": f"{folder}/{split}-*"}
                                                          for split in ("train", "test")]}
                   for name, folder in [("default", "data"), *((s, s) for s in SUBJECTS)]]
        import yaml

        (root / "README.md").write_text("---\n" + yaml.safe_dump({"configs": configs}) + "---\n# MATH\n")
    return root


def test_a_downloaded_math_lighteval_folder_is_read_once(tmp_path, no_hub):
    """The folder holds every problem twice (data/ and the subject directories): the card's default/train files
    are read, 7,500 rows, no duplicate. Without a card the layout is ambiguous and refused, naming the
    directories; a partial download stops with both counts unless --allow-row-mismatch."""
    folder = _math_lighteval_folder(tmp_path / "MATH-lighteval")
    out = tmp_path / "out"
    assert cli.main(["data", "--out", str(out), "--paper", "dgpo", "--only", "math_train",
                     "--source", f"math_train={folder}"]) == 0
    rows = _rows(out / "dgpo" / "math_train.parquet")
    questions = [r["extra_info"]["question"] for r in rows]
    assert len(rows) == 7500 and len(set(questions)) == 7500 and all(q.startswith("train ") for q in questions)
    assert {r["extra_info"]["subject"] for r in rows} == {s.replace("_", " ").title() for s in SUBJECTS}

    bare = _math_lighteval_folder(tmp_path / "no-card", card=False)
    with pytest.raises(data.DataSourceError, match=r"ambiguous, files in 8 directories \(algebra, .*data.*\)"):
        data.prepare(out, ["dgpo"], {"math_train": str(bare)}, only=["math_train"], log=lambda *_: None)
    # pointing at the one directory meant works
    data.prepare(out, ["dgpo"], {"math_train": str(bare / "data")}, only=["math_train"], log=lambda *_: None)
    assert len(_rows(out / "dgpo" / "math_train.parquet")) == 7500

    partial = _math_lighteval_folder(tmp_path / "partial", drop=100)
    with pytest.raises(data.DataSourceError, match=r"math_train: 7400 rows from .*partial, but the full set has "
                                                   r"7500.*--allow-row-mismatch"):
        data.prepare(out, ["dgpo"], {"math_train": str(partial)}, only=["math_train"], log=lambda *_: None)
    logged = []
    data.prepare(out, ["dgpo"], {"math_train": str(partial)}, only=["math_train"], log=logged.append,
                 allow_row_mismatch=True)
    assert any("warning: math_train: 7400 rows" in line for line in logged)


def test_row_counts_are_checked_for_every_set(tmp_path, monkeypatch):
    """Each set's full size (7,500 / 500 / 30 / 30 / 40 / 272 / 675): a Hub load of another size stops, naming the
    set and both counts, before anything is written."""
    import datasets

    assert {n: d.expected_rows for n, d in K.DATASETS.items()} == {
        "math_train": 7500, "math500": 500, "aime24": 30, "aime25": 30, "amc23": 40, "minerva": 272,
        "olympiadbench": 675}
    sizes = {d.hf_repo: d.expected_rows for d in K.DATASETS.values()}
    short = "knoveleng/Minerva-Math"
    sizes[short] = 271

    def fake_load_dataset(repo, *args, split=None, cache_dir=None):
        count = sizes[repo]
        return datasets.Dataset.from_list([{"problem": f"q{i}", "answer": str(i)} for i in range(count)])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    with pytest.raises(data.DataSourceError, match=r"1 dataset\(s\) could not be loaded:\n  - minerva: 271 rows from "
                                                   r"hf://knoveleng/Minerva-Math \(train\), but the full set has 272"):
        data.prepare(tmp_path, ["hadw"], log=lambda *_: None)
    assert not (tmp_path / "hadw").exists()
    sizes[short] = 272
    written = data.prepare(tmp_path, ["hadw", "dgpo"], log=lambda *_: None)
    assert len(_rows(written["dgpo/olympiadbench.avg4"])) == 675 and len(_rows(written["hadw/math_train"])) == 7500


@pytest.mark.slow  # two fresh interpreters importing datasets
def test_offline_hub_cache_is_read_with_hf_hub_offline(tmp_path):
    """Way (b) of the offline help: the `datasets` cache of a machine where the Hub load ran, used elsewhere with
    HF_HUB_OFFLINE=1 (`verl-hadw data --hf-cache`, in a fresh process as a user runs it). The cache is made by
    `datasets` itself from a folder of the Hub's layout (no network) and filed under the repository's name, where a
    Hub load of DigitalLearningGmbH/MATH-lighteval leaves it."""
    import datasets

    folder = _math_lighteval_folder(tmp_path / "MATH-lighteval")
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
    assert len(_rows(tmp_path / "out" / "hadw" / "math_train.parquet")) == 7500
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


def test_aime_golds_are_one_string_whatever_the_storage(tmp_path, no_hub):
    """"025", 25 and 25.0 (string, integer and float columns) all become the gold "25" for the string checker."""
    import pandas as pd

    stored = {"str.csv": "025", "int.jsonl": 25, "float.parquet": 25.0}
    for file, value in stored.items():
        path = tmp_path / file
        frame = pd.DataFrame({"problem": ["q?"], "answer": [value]})
        {"csv": lambda: frame.to_csv(path, index=False), "jsonl": lambda: frame.to_json(path, orient="records",
         lines=True), "parquet": lambda: frame.to_parquet(path)}[file.split(".")[1]]()
        records, _, _ = data.load_records("aime25", str(path))
        assert data.extract_fields("aime25", records[0], 0)["answer"] == "25", file
    # other sets keep their digits as written (a MATH answer "007" may mean a digit string)
    assert data.normalize_gold("math500", "007") == "007" and data.normalize_gold("aime24", "-0") == "0"


# --------------------------------------------------------------------------------------------- reward
CASES = [json.loads(line) for line in (FIXTURES / "reward_cases.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("case", CASES, ids=[c["why"] for c in CASES])
def test_reward_backends_on_fixture_cases(case, inline_math_verify):
    for backend in ("verl_math", "math_verify"):
        result = reward.compute_score("x", case["response"], case["ground_truth"], backend=backend)
        assert result == {"score": float(case[backend]), "acc": float(case[backend])}, backend


def test_reward_per_dataset_through_verls_loader(tmp_path, no_hub, inline_math_verify):
    """verl loads the reward the way the configs name it (pkg://verl_hadw.reward + reward_kwargs); every
    prepared fixture row is right when the response boxes its answer and wrong otherwise."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from verl_hadw.repro.compose import compose_run

    data.prepare(tmp_path, ["hadw", "dgpo"], dict(s.split("=", 1) for s in SOURCES), log=lambda *_: None)
    for run, paper in (("hadw_t1_qwen3_4b_dapo", "hadw"), ("dgpo_t1_grpo", "dgpo")):
        score = get_custom_reward_fn(compose_run(run))
        for stem in ["math_train", *K.eval_files(paper)]:
            name = stem.split(".")[0]
            for row in _rows(tmp_path / paper / f"{stem}.parquet"):
                gt = row["reward_model"]["ground_truth"]
                right = score(data_source=name, solution_str=f"Reasoning... \\boxed{{{gt}}}", ground_truth=gt,
                              extra_info=row["extra_info"])
                wrong = score(data_source=name, solution_str="\\boxed{-12345}", ground_truth=gt,
                              extra_info=row["extra_info"])
                signed = paper == "hadw"  # the HA-DW DAPO run: +1/-1 rewards
                assert (right["score"], right["acc"]) == (1.0, 1.0), (run, name, gt)
                assert (wrong["score"], wrong["acc"]) == ((-1.0 if signed else 0.0), 0.0), (run, name, gt)
                level = row["extra_info"]["level"]
                if name == "math500":
                    band = reward.level_band(level)
                    assert right[f"acc_level{level}"] == 1.0 and right[f"acc_{band}"] == 1.0
                else:
                    assert set(right) == {"score", "acc"}


def test_reward_backend_choice_and_errors():
    assert reward.backend_for("math500") == "verl_math" and reward.backend_for("aime25") == "verl_math"
    assert reward.backend_for("minerva") == "math_verify" and reward.backend_for("olympiadbench") == "math_verify"
    assert reward.backend_for("math500", "math_verify") == "math_verify"
    with pytest.raises(ValueError, match="backend='sympy' is not valid"):
        reward.compute_score("math500", "\\boxed{1}", "1", backend="sympy")
    with pytest.raises(ValueError, match="empty reward_model.ground_truth"):
        reward.compute_score("math500", "\\boxed{1}", "  ")
    assert [reward.level_band(k) for k in range(1, 6)] == ["easy", "mid", "mid", "hard", "hard"]

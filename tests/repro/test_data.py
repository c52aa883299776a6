"""`verl-hadw data` end to end on small fixture files (tests/helpers/fixtures/data/): every paper's files from local
copies or the Hub (or a clear failure with neither), the rows verl's own dataset reads, the row-count check."""

from __future__ import annotations

import json

import pytest
from data_fixtures import EXPECTED_GT, FIXTURES, LOCAL, SOURCES, block_hub, read_rows

from verl_hadw import cli
from verl_hadw.repro import catalogue as K
from verl_hadw.repro import data
from verl_hadw.repro.data_sources import read_file


@pytest.fixture
def no_hub(monkeypatch):
    return block_hub(monkeypatch)


def test_prepare_from_local_files(tmp_path, no_hub, capsys):
    assert cli.main(["data", "--out", str(tmp_path), *sum((["--source", s] for s in SOURCES), [])]) == 0
    assert no_hub == []  # local copies given: the Hub is never asked
    for paper in K.PAPERS:
        stems = ["math_train", *K.eval_files(paper)]
        assert sorted(p.stem for p in (tmp_path / paper).glob("*.parquet")) == sorted(stems)
        for stem in stems:
            name = stem.split(".")[0]
            rows = read_rows(tmp_path / paper / f"{stem}.parquet")
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
    hadw = read_rows(tmp_path / "hadw" / "math_train.parquet")
    assert hadw[0]["prompt"] == [{"role": "user", "content": "What is $2+3$? Let's think step by step and output "
                                                                "the final answer within \\boxed{}."}]
    dgpo = read_rows(tmp_path / "dgpo" / "math_train.parquet")
    assert dgpo[0]["prompt"] == [
        {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
        {"role": "user", "content": "What is $2+3$?"},
    ]
    # MATH levels kept for the hard-prompt analysis ("Level ?" -> null), subjects too
    assert [r["extra_info"]["level"] for r in hadw] == [1, 2, None, 5]
    assert [r["extra_info"]["level"] for r in read_rows(tmp_path / "dgpo" / "math500.avg4.parquet")] == [2, 1, 4]
    assert read_rows(tmp_path / "dgpo" / "math500.avg4.parquet")[0]["extra_info"]["id"] == "test/algebra/1.json"
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
        records = read_file(FIXTURES / "data" / LOCAL[name])
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
    aime25 = read_rows(tmp_path / "hadw" / "aime25.avg16.parquet")
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
    assert len(read_rows(written["dgpo/olympiadbench.avg4"])) == 675
    assert len(read_rows(written["hadw/math_train"])) == 7500


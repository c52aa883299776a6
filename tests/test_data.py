"""`verl-hadw data` (local files, Hugging Face, neither) and the reward (verl's MATH checker, math-verify) on
small fixture files shipped in tests/fixtures/."""

from __future__ import annotations

import json
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
    "aime24": ["024", "9"],
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
        "math500.greedy", "math500.avg4", "aime25.avg16", "amc23.avg16", "amc23.greedy", "minerva.greedy",
        "minerva.avg4", "olympiadbench.avg4"])
    assert {f: s.tag for f, s in K.eval_files("dgpo").items()} == {
        "aime24.avg32": "avg32", "aime25.avg32": "avg32", "amc23.avg32": "avg32", "math500.avg4": "avg4",
        "minerva.avg4": "avg4", "olympiadbench.avg4": "avg4"}
    assert "16 files" in capsys.readouterr().out


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
    dgpo_files = list(compose_run("dgpo_t1_dgpo", ["+eval=dgpo", f"paths.data={tmp_path}"]).data.val_files)
    dataset = RLHFDataset(dgpo_files, tokenizer=None, config=cfg)
    assert len(dataset) == 2 + 2 + 2 + 3 + 2 + 2
    first = dataset[0]
    assert first["data_source"] == "aime24" and first["__rollout_n__"] == 32 and first["agent_name"] == K.SAMPLED_AGENT
    assert first["raw_prompt"][0]["role"] == "system" and first["reward_model"]["ground_truth"] == "024"
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
    written = data.prepare(tmp_path, ["hadw"], cache_dir="/cache", log=lambda *_: None)
    assert sorted(written) == sorted(f"hadw/{n}" for n in ["math_train", *K.eval_files("hadw")])
    assert (("DigitalLearningGmbH/MATH-lighteval", "default"), "train", "/cache") in asked
    assert (("HuggingFaceH4/MATH-500",), "test", "/cache") in asked
    assert (("yentinglin/aime_2025",), "train", "/cache") in asked
    assert len(asked) == len(K.paper_datasets("hadw"))  # aime24 is DGPO-only
    assert [r["reward_model"]["ground_truth"] for r in _rows(tmp_path / "hadw" / "aime25.avg16.parquet")] == [
        "70",
        "21",
    ]


def test_neither_hub_nor_local_copy_fails_clearly(tmp_path, no_hub, capsys):
    code = cli.main(["data", "--out", str(tmp_path), "--paper", "dgpo", "--source", SOURCES[0]])
    err = capsys.readouterr().err
    assert code == 2
    assert "6 dataset(s) could not be loaded" in err
    assert "aime24: the Hugging Face dataset HuggingFaceH4/aime_2024 (split train) is not reachable" in err
    assert "--source aime24=/path/to/file" in err and "ConnectionError" in err
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

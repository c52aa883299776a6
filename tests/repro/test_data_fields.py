"""What one source record gives `verl-hadw data`: the gold answer from the forms MATH train writes its \\boxed{}
in (against verl's own extraction), and AIME golds as one string however they are stored."""

from __future__ import annotations

import json

import pytest
from data_fixtures import FIXTURES, block_hub, read_rows

from verl_hadw.repro import data
from verl_hadw.repro.data_fields import last_boxed, normalize_gold


@pytest.fixture
def no_hub(monkeypatch):
    return block_hub(monkeypatch)


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
    assert last_boxed(case["solution"]) == case["want"]
    assert _verl_boxed(case["solution"]) == case["verl"]  # what verl's own extraction makes of it
    fields = data.extract_fields("math_train", case, 0)
    assert fields["answer"] == case["want"] and fields["level"] == int(case["level"][-1])


def test_math_train_with_the_real_forms_prepares(tmp_path, no_hub):
    written = data.prepare(tmp_path, ["hadw"], {"math_train": str(FIXTURES / "data" / "math_boxed_forms.jsonl")},
                           only=["math_train"], log=lambda *_: None)
    rows = read_rows(written["hadw/math_train"])
    assert [r["reward_model"]["ground_truth"] for r in rows] == [c["want"] for c in FORMS]
    assert last_boxed("no box here") is None and last_boxed("\\boxed{unclosed") is None


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
    assert normalize_gold("math500", "007") == "007" and normalize_gold("aime24", "-0") == "0"


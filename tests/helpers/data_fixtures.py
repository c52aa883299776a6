"""The data fixtures shared by the `verl-hadw data` and reward tests: local copies of every dataset in
tests/helpers/fixtures/data/, the golds they give, and an offline Hub (tests/ has no __init__.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from repo_paths import FIXTURES

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


def read_rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def block_hub(monkeypatch) -> list:
    """Any Hugging Face access fails, as on an offline machine; returns the list of attempted loads."""
    calls = []

    def offline(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("offline (test)")

    import datasets

    monkeypatch.setattr(datasets, "load_dataset", offline)
    return calls


# MATH-lighteval as `hf download --repo-type dataset DigitalLearningGmbH/MATH-lighteval` lays it out: the whole
# set under data/ (config "default") and one directory per subject (configs "algebra", ...), with the dataset
# card's YAML naming the files of each config and split. Train sizes from the card.
SUBJECTS = {"algebra": 1744, "counting_and_probability": 771, "geometry": 870, "intermediate_algebra": 1295,
            "number_theory": 869, "prealgebra": 1205, "precalculus": 746}


def math_lighteval_folder(root: Path, card: bool = True, drop: int = 0) -> Path:
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

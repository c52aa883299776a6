"""The reproduction catalogue: one place for the papers' tables and numbers, the benchmarks and datasets, and
the evaluation protocols and model sizes. ``verl-hadw configs/data/results`` and ``scripts/reproduce_*.sh`` read it.

Papers: HA-DW = arXiv 2601.08521 v2 (Tables 1, 2, 3, 7); DGPO/MathForge = arXiv 2601.20614 v1 (Tables 1, 3, 4).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

__all__ = [
    "PAPERS",
    "BENCHMARKS",
    "BENCHMARK_NAMES",
    "TRAIN_SET",
    "DATASETS",
    "EVAL_PROTOCOLS",
    "EvalSetting",
    "GREEDY_AGENT",
    "SAMPLED_AGENT",
    "MODEL_PARAMS",
    "eval_files",
    "TABLES",
    "ALIASES",
    "EVAL_ONLY",
    "HADW_HARD_GAIN",
    "Row",
    "Table",
    "Dataset",
    "paper_datasets",
    "paper_of",
    "run_names",
    "plan",
]

PAPERS = ("hadw", "dgpo")

# data_source ids written by `verl-hadw data`, in each paper's column order.
BENCHMARKS: dict[str, tuple[str, ...]] = {
    "hadw": ("math500", "aime25", "amc23", "minerva", "olympiadbench"),
    "dgpo": ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench"),
}
BENCHMARK_NAMES = {
    "math500": "MATH500",
    "aime24": "AIME24",
    "aime25": "AIME25",
    "amc23": "AMC23",
    "minerva": "Minerva",
    "olympiadbench": "OlympiadBench",
}


@dataclass(frozen=True)
class Row:
    """One row of a paper table: the paper's label, the run (config name) that reproduces it, its numbers."""

    label: str
    run: str
    paper: tuple[float | None, ...] = ()  # per benchmark, in BENCHMARKS[paper] order ("%"); () = not reported
    paper_avg: float | None = None  # the table's AVG column as printed (None: not reported)


@dataclass(frozen=True)
class Table:
    paper: str
    key: str
    title: str
    rows: tuple[Row, ...] = field(default_factory=tuple)


def _h(label, run, *values):
    *bench, avg = values
    return Row(label, run, tuple(bench), avg)


_T1 = "hadw_t1_"
TABLES: tuple[Table, ...] = (
    # ------------------------------------------------------------------------------------------ HA-DW
    Table("hadw", "hadw_t1",
          "HA-DW Table 1: main results (MATH500 / AIME25 avg@16 / AMC23 avg@16 / Minerva / OlympiadBench)", (
        _h("Qwen3-4B-Base GRPO", _T1 + "qwen3_4b_grpo", 75.4, 19.6, 60.3, 33.8, 43.5, 46.5),
        _h("Qwen3-4B-Base GRPO+HA-DW", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, 48.7),
        _h("Qwen3-4B-Base GSPO", _T1 + "qwen3_4b_gspo", 75.8, 20.0, 62.2, 35.3, 42.3, 47.1),
        _h("Qwen3-4B-Base GSPO+HA-DW", _T1 + "qwen3_4b_gspo_hadw", 77.6, 19.6, 68.6, 37.1, 43.2, 49.2),
        _h("Qwen3-4B-Base DAPO", _T1 + "qwen3_4b_dapo", 76.8, 18.3, 60.0, 35.7, 43.2, 46.8),
        _h("Qwen3-4B-Base DAPO+HA-DW", _T1 + "qwen3_4b_dapo_hadw", 78.6, 21.3, 65.0, 37.5, 45.3, 49.5),
        _h("Qwen3-8B-Base GRPO", _T1 + "qwen3_8b_grpo", 78.8, 20.4, 64.2, 38.2, 46.4, 49.6),
        _h("Qwen3-8B-Base GRPO+HA-DW", _T1 + "qwen3_8b_grpo_hadw", 80.0, 22.9, 72.8, 39.7, 47.1, 52.5),
        _h("Qwen3-8B-Base GSPO", _T1 + "qwen3_8b_gspo", 78.6, 21.7, 67.0, 37.9, 45.9, 50.2),
        _h("Qwen3-8B-Base GSPO+HA-DW", _T1 + "qwen3_8b_gspo_hadw", 80.2, 22.1, 66.5, 41.9, 47.6, 51.7),
        _h("Qwen3-8B-Base DAPO", _T1 + "qwen3_8b_dapo", 79.2, 20.4, 67.5, 39.3, 47.2, 50.7),
        _h("Qwen3-8B-Base DAPO+HA-DW", _T1 + "qwen3_8b_dapo_hadw", 82.8, 23.3, 70.0, 40.8, 50.0, 53.4),
        _h("LLaMA-3.2-3B-Instruct GRPO", _T1 + "llama3_3b_grpo", 51.4, 2.7, 31.7, 22.8, 19.9, 25.7),
        _h("LLaMA-3.2-3B-Instruct GRPO+HA-DW", _T1 + "llama3_3b_grpo_hadw", 53.2, 3.3, 35.0, 23.9, 20.1, 27.1),
        _h("LLaMA-3.2-3B-Instruct GSPO", _T1 + "llama3_3b_gspo", 48.6, 1.9, 30.9, 23.2, 19.8, 24.9),
        _h("LLaMA-3.2-3B-Instruct GSPO+HA-DW", _T1 + "llama3_3b_gspo_hadw", 50.4, 2.3, 32.7, 22.4, 21.0, 25.8),
        _h("LLaMA-3.2-3B-Instruct DAPO", _T1 + "llama3_3b_dapo", 52.4, 2.5, 35.0, 22.4, 20.2, 26.5),
        _h("LLaMA-3.2-3B-Instruct DAPO+HA-DW", _T1 + "llama3_3b_dapo_hadw", 53.2, 3.1, 37.5, 24.6, 22.3, 28.1),
    )),
    Table("hadw", "hadw_t2", "HA-DW Table 2: fixed vs dynamic anchor (Qwen3-4B-Base, GRPO+HA-DW)", (
        _h("Base (GRPO)", _T1 + "qwen3_4b_grpo", 75.4, 19.6, 60.3, 33.8, 43.5, 46.5),
        _h("fixed anchor 0.4", "hadw_t2_fixed_anchor_04", 77.0, 18.5, 63.1, 37.5, 44.3, 48.1),
        _h("fixed anchor 0.5", "hadw_t2_fixed_anchor_05", 76.6, 20.0, 62.7, 35.7, 44.0, 47.8),
        _h("fixed anchor 0.6", "hadw_t2_fixed_anchor_06", 76.8, 21.3, 61.1, 36.4, 44.3, 48.0),
        _h("C_t (dynamic)", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, 48.7),
    )),
    Table("hadw", "hadw_t3", "HA-DW Table 3: group size (Qwen3-4B-Base; the paper prints no AVG)", (
        _h("GRPO, G=8", _T1 + "qwen3_4b_grpo", 75.4, 19.6, 60.3, 33.8, 43.5, None),
        _h("GRPO, G=16", "hadw_t3_qwen3_4b_grpo_g16", 76.2, 19.2, 61.6, 34.2, 43.9, None),
        _h("GRPO+HA-DW, G=8", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, None),
    )),
    Table("hadw", "hadw_t7", "HA-DW Table 7: lambda_scale (Qwen3-4B-Base, GRPO+HA-DW)", (
        _h("lambda 0.5", "hadw_t7_lambda_05", 75.4, 18.1, 61.1, 34.2, 43.7, 46.5),
        _h("lambda 0.8", "hadw_t7_lambda_08", 76.8, 19.2, 61.3, 34.9, 43.7, 47.2),
        _h("lambda 1.0", "hadw_t7_lambda_10", 76.8, 18.5, 61.6, 36.0, 44.3, 47.4),
        # λ = 1.3 is the Table 1 run (identical row in the paper); hadw_t7_lambda_13 is an alias config of it.
        _h("lambda 1.3", _T1 + "qwen3_4b_grpo_hadw", 78.0, 20.4, 63.4, 36.8, 44.7, 48.7),
        _h("lambda 1.5", "hadw_t7_lambda_15", 77.8, 20.8, 63.1, 37.1, 44.0, 48.6),
        _h("lambda 1.7", "hadw_t7_lambda_17", 76.4, 20.0, 63.4, 36.4, 44.3, 48.1),
        _h("lambda 2.0", "hadw_t7_lambda_20", 76.8, 19.0, 61.9, 35.3, 43.5, 47.3),
    )),
    # ------------------------------------------------------------------------------------------- DGPO
    Table("dgpo", "dgpo_t1", "DGPO Table 1: Qwen2.5-Math-7B on MATH (AIME24/25, AMC23 avg@32; others avg@4)", (
        _h("Base", "dgpo_t1_base", 12.19, 4.79, 35.23, 48.60, 15.07, 16.33, 22.04),
        _h("GRPO", "dgpo_t1_grpo", 20.94, 8.44, 58.98, 72.20, 27.76, 37.33, 37.61),
        _h("DGPO", "dgpo_t1_dgpo", 23.85, 10.21, 61.02, 74.25, 31.07, 38.33, 39.79),
    )),
    Table("dgpo", "dgpo_t3", "DGPO Table 3: component ablation and DQW temperature (the paper prints only Avg)", (
        Row("GRPO", "dgpo_t1_grpo", (), 37.61),
        Row("valid-token averaging only", "dgpo_t3_vtn_only", (), 37.71),
        Row("+ DGAE (no DQW)", "dgpo_t3_vtn_dgae", (), 38.65),
        Row("full DGPO, T = 2.0", "dgpo_t1_dgpo", (), 39.79),
        Row("T = 1.0", "dgpo_t3_temp_1", (), 39.03),
        Row("T = 5.0", "dgpo_t3_temp_5", (), 39.53),
        Row("T = 10.0", "dgpo_t3_temp_10", (), 39.27),
    )),
    Table("dgpo", "dgpo_t4", "DGPO Table 4: DGPO combined with GPG, DAPO and GSPO (Qwen2.5-Math-7B)", (
        _h("GPG", "dgpo_t4_gpg", 21.98, 9.06, 59.61, 72.05, 27.21, 37.67, 37.93),
        _h("GPG+DGPO", "dgpo_t4_gpg_dgpo", 21.77, 10.00, 60.00, 73.45, 30.06, 38.26, 38.92),
        _h("DAPO", "dgpo_t4_dapo", 21.25, 8.75, 58.20, 72.70, 29.50, 37.22, 37.94),
        _h("DAPO+DGPO", "dgpo_t4_dapo_dgpo", 24.48, 9.79, 58.75, 74.90, 31.99, 39.56, 39.91),
        _h("GSPO", "dgpo_t4_gspo", 19.38, 8.33, 60.16, 73.00, 28.12, 37.26, 37.71),
        _h("GSPO+DGPO", "dgpo_t4_gspo_dgpo", 23.33, 10.00, 59.14, 74.15, 30.88, 38.41, 39.32),
    )),
)

# Config files that are another run under a second name (same trainer.experiment_name, so the same run dir).
ALIASES = {"hadw_t7_lambda_13": _T1 + "qwen3_4b_grpo_hadw"}
# Runs that are only evaluated (the untrained base model).
EVAL_ONLY = frozenset({"dgpo_t1_base"})
# HA-DW Fig. 1(c): GRPO+HA-DW beats GRPO by +3.4 points on MATH500 Hard (levels 4-5); no per-level numbers printed.
HADW_HARD_GAIN = ("hadw_t1_qwen3_4b_grpo", "hadw_t1_qwen3_4b_grpo_hadw", 3.4)


def paper_of(run: str) -> str:
    paper = run.split("_", 1)[0]
    if paper not in PAPERS:
        raise ValueError(f"run {run!r} belongs to no paper: run names start with 'hadw_' or 'dgpo_'")
    return paper


def run_names(paper: str | None = None) -> list[str]:
    """Distinct runs of the catalogue in table order (aliases excluded)."""
    seen: dict[str, None] = {}
    for table in TABLES:
        if paper is None or table.paper == paper:
            for row in table.rows:
                seen.setdefault(row.run, None)
    return list(seen)


def plan(paper: str, only: str | None = None) -> list[tuple[str, str]]:
    """The launch plan of a paper: ``(action, run)`` in table order, each run once.

    HA-DW reports verl's in-training validation (the paper's protocol runs at every ``test_freq``), so its plan
    only trains. DGPO's final evaluation (4096-token budget, all six benchmarks) is a separate ``val_only`` pass
    on the last checkpoint, so each DGPO run is trained and then evaluated; the base model is only evaluated.
    ``only``: a shell pattern on run names (``dgpo_t4_*``) to keep part of the plan.
    """
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; choose one of: {', '.join(PAPERS)}")
    steps: list[tuple[str, str]] = []
    for run in run_names(paper):
        if only and not fnmatch.fnmatchcase(run, only):
            continue
        if run not in EVAL_ONLY:
            steps.append(("train", run))
        if paper == "dgpo":
            steps.append(("eval", run))
    return steps


# ---------------------------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class Dataset:
    name: str
    hf_repo: str
    hf_split: str
    hf_config: str | None = None
    split: str = "test"  # train | test (what extra_info.split says)
    expected_rows: int | None = None  # the full set's size: `verl-hadw data` checks every load against it


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        # The papers' training set (HA-DW README, DGPO recipe): MATH, 7.5k questions with levels and subjects.
        Dataset("math_train", "DigitalLearningGmbH/MATH-lighteval", "train", "default", "train", 7500),
        # Evaluation sets: the DGPO authors' lighteval tasks (eval/custom_math_tasks.py) name these repos.
        Dataset("math500", "HuggingFaceH4/MATH-500", "test", None, "test", 500),
        Dataset("aime24", "HuggingFaceH4/aime_2024", "train", None, "test", 30),
        Dataset("aime25", "yentinglin/aime_2025", "train", None, "test", 30),
        Dataset("amc23", "knoveleng/AMC-23", "train", None, "test", 40),
        Dataset("minerva", "knoveleng/Minerva-Math", "train", None, "test", 272),
        Dataset("olympiadbench", "knoveleng/OlympiadBench", "train", None, "test", 675),
    )
}

# ------------------------------------------------------------------------------------- evaluation protocols
# How each benchmark is scored: k samples per prompt at the validation temperature (``avg<k>``), or one greedy
# sample (``greedy``). `verl-hadw data` writes one file per (benchmark, setting), ``<paper>/<bench>.<tag>.parquet``,
# whose rows carry verl's per-prompt sample count (``__rollout_n__``) and agent loop (``agent_name``); the
# configs pick the files of a protocol. Evidence and choices: docs/reproduce.md, "Evaluation protocol".
SAMPLED_AGENT = "single_turn_agent"  # verl's own loop: decodes with rollout.val_kwargs (temperature, top-p)
GREEDY_AGENT = "greedy_single_turn_agent"  # verl_hadw.repro.eval_agent: the same loop at temperature 0


@dataclass(frozen=True)
class EvalSetting:
    """Samples per prompt and decoding of one benchmark; greedy implies one sample (copies would be identical)."""

    samples: int
    greedy: bool = False

    def __post_init__(self):
        if self.samples < 1 or (self.greedy and self.samples != 1):
            raise ValueError(f"EvalSetting({self.samples}, greedy={self.greedy}): greedy decoding takes exactly one "
                             "sample per prompt (n > 1 at temperature 0 only repeats it); sampled takes >= 1")

    @property
    def tag(self) -> str:
        return "greedy" if self.greedy else f"avg{self.samples}"

    @property
    def agent(self) -> str:
        return GREEDY_AGENT if self.greedy else SAMPLED_AGENT

    @classmethod
    def from_tag(cls, tag: str) -> "EvalSetting":
        if tag == "greedy":
            return cls(1, True)
        if tag.startswith("avg") and tag[3:].isdigit():
            return cls(int(tag[3:]))
        raise ValueError(f"unknown evaluation setting {tag!r}: use 'greedy' or 'avg<k>' (avg4, avg16, ...)")


def _settings(**tags: str) -> dict[str, EvalSetting]:
    return {bench: EvalSetting.from_tag(tag) for bench, tag in tags.items()}


# paper -> protocol -> benchmark -> setting. HA-DW "paper": what the digits of Tables 1-3, 7 imply (one greedy
# sample on MATH500 and Minerva; avg@16 sampled on AIME25 and, for GRPO/GSPO, AMC23; OlympiadBench sampled with a
# count the digits cannot tell: CHOICE avg@4); DAPO runs score AMC23 greedily ("paper_dapo"). HA-DW "sampled":
# the previous default (avg@4 / avg@16 at temperature 0.6). HA-DW "released": the authors' scripts, all greedy.
# DGPO: §4.1 / App. F, avg@32 / avg@4 at 0.6.
EVAL_PROTOCOLS: dict[str, dict[str, dict[str, EvalSetting]]] = {
    "hadw": {
        "paper": _settings(math500="greedy", aime25="avg16", amc23="avg16", minerva="greedy", olympiadbench="avg4"),
        "paper_dapo": _settings(math500="greedy", aime25="avg16", amc23="greedy", minerva="greedy",
                                olympiadbench="avg4"),
        "sampled": _settings(math500="avg4", aime25="avg16", amc23="avg16", minerva="avg4", olympiadbench="avg4"),
        # the authors' released scripts: verl's greedy default, n = 1 (grpo/gspo_hadw.sh) or 16 identical greedy
        # copies (dapo_hadw.sh, val_kwargs.n=16): one greedy sample gives the same score
        "released": _settings(math500="greedy", aime25="greedy", amc23="greedy", minerva="greedy",
                              olympiadbench="greedy"),
    },
    "dgpo": {
        "paper": _settings(aime24="avg32", aime25="avg32", amc23="avg32", math500="avg4", minerva="avg4",
                           olympiadbench="avg4"),
    },
}


def eval_files(paper: str) -> dict[str, EvalSetting]:
    """Every evaluation file ``verl-hadw data`` writes for ``paper``: ``{"<bench>.<tag>": setting}``."""
    return {f"{bench}.{s.tag}": s for protocol in EVAL_PROTOCOLS[paper].values() for bench, s in protocol.items()}


# Parameter counts of the papers' models (their Hugging Face model cards / config.json), for the checkpoint-disk
# and GPU-time estimates of `verl-hadw configs --plan PAPER --costs`. Keyed by the model id's last component.
MODEL_PARAMS: dict[str, float] = {
    "Qwen3-4B-Base": 4.02e9,
    "Qwen3-8B-Base": 8.19e9,
    "Llama-3.2-3B-Instruct": 3.21e9,
    "Qwen2.5-Math-7B": 7.62e9,
}


TRAIN_SET = "math_train"  # both papers train on MATH (7.5k)


def paper_datasets(paper: str) -> tuple[str, ...]:
    """The datasets ``verl-hadw data`` writes for ``paper``: the training set, then its benchmarks."""
    return (TRAIN_SET, *BENCHMARKS[paper])


# ------------------------------------------------------------------------------------ released-code runs
# HA-DW as the authors' released code computes it (algorithm.hadw.difficulty_from=reward, moving-average anchor
# including the current batch, lambda 1.5), one per Table-1 model -> the paper's GRPO+HA-DW run it sits beside.
# Not paper rows (the paper reports no numbers for them): outside TABLES, so outside the launch plans.
RELEASED_CODE_RUNS = {f"hadw_released_{m}_grpo": f"{_T1}{m}_grpo_hadw" for m in ("qwen3_4b", "qwen3_8b", "llama3_3b")}
__all__ += ["RELEASED_CODE_RUNS"]

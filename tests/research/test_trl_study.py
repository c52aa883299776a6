"""``verl-hadw study --trainer trl``: the statistics on made-up scores (Holm, the paired tests, the
smallest difference the design resolves, checked by simulation), and the quick study end to end: every method runs
in a process of its own, paired by seed (the same initial weights and the same prompts in the same order), the four
tables have the rows the page reads, and a run rerun from its spec reproduces its files bit for bit."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest

from verl_hadw.research import trl_study, trl_study_stats
from verl_hadw.toy.task import TIERS


def test_holm_adjusts_step_down_and_keeps_the_order():
    # m = 4: the k-th smallest times (m - k + 1), then non-decreasing
    assert trl_study_stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert trl_study_stats.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert trl_study_stats.holm([]) == []


def test_paired_comparison_removes_the_seeds_level():
    first = {1: 0.30, 2: 0.52, 3: 0.71, 4: 0.15}  # seeds far apart; the first always ahead by about 0.02
    second = {1: 0.28, 2: 0.50, 3: 0.68, 4: 0.14, 5: 0.9}  # seed 5 has no pair: left out
    result = trl_study_stats.paired(first, second)
    assert result["seeds"] == 4 and result["ahead"] == 4 and result["behind"] == 0
    assert result["diff"] == pytest.approx(0.02)
    from scipy import stats

    unpaired = stats.ttest_ind([first[s] for s in range(1, 5)], [second[s] for s in range(1, 5)]).pvalue
    assert result["p_t"] < 0.05 < 0.9 < unpaired  # paired, the seeds' spread does not hide it; unpaired, it does
    assert trl_study_stats.paired({1: 0.5}, {1: 0.4}) is None
    same = trl_study_stats.paired({1: 0.5, 2: 0.6}, {1: 0.5, 2: 0.6})
    assert same["p_t"] == same["p_w"] == 1.0 and same["diff"] == 0


def test_the_smallest_difference_is_detected_with_the_stated_power():
    """Simulated: paired differences of that mean and spread over 48 seeds are significant at Holm's strictest level
    (α / 10) in about 80 % of studies."""
    from scipy import stats

    sd, seeds, tests = 0.08, 48, 10
    delta = trl_study_stats.smallest_difference(sd, seeds, tests)
    rng = np.random.default_rng(0)
    diffs = rng.normal(delta, sd, size=(4000, seeds))
    p = stats.ttest_1samp(diffs, 0.0, axis=1).pvalue
    assert np.mean(p < 0.05 / tests) == pytest.approx(0.8, abs=0.03)
    assert trl_study_stats.smallest_difference(sd, 4 * seeds, tests) < delta / 1.9  # about 1/√4


def made_up_rows(seeds=range(1, 9), lrs=(1e-2, 2e-3)):
    """Validation rows of every method: hadw ahead of grpo by 0.05 at the last step, the rest equal to grpo."""
    rows = []
    for lr in lrs:
        for method in trl_study.METHODS:
            for seed in seeds:
                for step in (0, 5, 10):
                    for tier in (*TIERS, trl_study.ALL):
                        value = 0.2 + 0.01 * seed + 0.02 * step + (0.05 if method == "hadw" and step == 10 else 0)
                        value += 0.001 * ((seed * 7 + step) % 3) if method == "hadw" else 0  # some spread
                        rows.append(dict(method=method, seed=seed, lr=lr, step=step, tier=tier, value=value))
    return rows


def test_the_comparison_families_and_the_summary():
    table = trl_study_stats.comparisons_table(made_up_rows())
    primary = [r for r in table if r["family"] == "primary"]
    assert len(primary) == 2 * len(trl_study_stats.COMPARISONS)  # every comparison at both learning rates
    hadw = next(r for r in primary if (r["first"], r["second"], r["lr"]) == ("hadw", "grpo", 1e-2))
    assert hadw["diff"] == pytest.approx(0.05, abs=0.002) and hadw["p_holm"] < 0.05 and hadw["ahead"] == 8
    assert hadw["p_holm"] >= hadw["p_t"] and not math.isnan(hadw["resolves"])
    assert {r["family"] for r in table} == set(trl_study_stats.FAMILIES)
    text = trl_study_stats.summary_markdown(made_up_rows(), [])
    assert "| primary | 0.01 | hadw − grpo | final | all | +0.05" in text


@pytest.mark.slow
@pytest.mark.beside  # five runs, each a process importing torch and TRL: about a minute
def test_the_quick_study_runs_every_method_paired_by_seed_and_a_run_reproduces_bit_for_bit(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.run([sys.executable, "-m", "verl_hadw.cli", "study", "--trainer", "trl", "--quick", "--out",
                           str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plan = trl_study.quick_plan(out)
    steps = {m: [json.loads(line) for line in (plan.run_dir(m, 1, 1e-2) / "steps.jsonl").read_text().splitlines()]
             for m in trl_study.METHODS}
    val = {m: [json.loads(line) for line in (plan.run_dir(m, 1, 1e-2) / "val.jsonl").read_text().splitlines()]
           for m in trl_study.METHODS}
    # paired by seed: the same prompts in the same order, the same initial weights (step 0's validation)
    assert len({json.dumps([s["prompts"] for s in steps[m]]) for m in trl_study.METHODS}) == 1
    assert len({json.dumps(val[m][0]) for m in trl_study.METHODS}) == 1
    assert [v["step"] for v in val["hadw"]] == [0, 2, 4]
    assert all("phi_mean" in s for s in steps["hadw"]) and not any("phi_mean" in s for s in steps["grpo"])
    spec = json.loads((plan.run_dir("grpo_lr_phi", 1, 1e-2) / "spec.json").read_text())
    phi = np.mean([s["phi_mean"] for s in steps["hadw"]])
    assert spec["phi"] == pytest.approx(phi) and spec["lr"] == pytest.approx(1e-2 * phi)
    for name, file in trl_study.TABLE_FILES.items():
        rows = trl_study.read_csv(out / file)
        assert rows and set(rows[0]) == {"method", "seed", "lr", "step", "tier", "value"}
    share = trl_study.read_csv(out / "advantage_share.csv.gz")
    for method in trl_study.METHODS:  # each step's shares over the four tiers sum to 1
        for step in range(1, 5):
            total = sum(r["value"] for r in share if r["method"] == method and r["step"] == step)
            assert total == pytest.approx(1.0) or total == 0.0
    assert (out / "curves.png").stat().st_size > 0 and (out / "advantage_share.png").stat().st_size > 0
    # one run again from its spec: the same files, bit for bit
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(plan.run_dir("hadw", 1, 1e-2) / "spec.json", again / "spec.json")
    subprocess.run([sys.executable, "-m", "verl_hadw.research.trl_study_run", str(again / "spec.json")], check=True,
                   capture_output=True, timeout=600)
    for name in ("steps.jsonl", "val.jsonl"):
        assert (again / name).read_bytes() == (plan.run_dir("hadw", 1, 1e-2) / name).read_bytes(), name

"""``verl-hadw study --trainer trl``: the statistics on made-up scores (Holm, the paired tests, the
smallest difference the design resolves, checked by simulation), and the quick arithmetic study end to end: every
method runs in a process of its own, paired by seed (the same initial weights and the same prompts in the same order),
the tables have the rows the page reads, and a run rerun from its spec reproduces its files bit for bit; a toy run."""

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
        for method in trl_study_stats.TOY_METHODS:
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
    toy = [c for c in trl_study_stats.COMPARISONS if set(c) <= set(trl_study_stats.TOY_METHODS)]
    assert len(primary) == 2 * len(toy) == 10  # every comparison of the runs' methods at both learning rates
    hadw = next(r for r in primary if (r["first"], r["second"], r["lr"]) == ("hadw", "grpo", 1e-2))
    assert hadw["diff"] == pytest.approx(0.05, abs=0.002) and hadw["p_holm"] < 0.05 and hadw["ahead"] == 8
    assert hadw["p_holm"] >= hadw["p_t"] and not math.isnan(hadw["resolves"])
    assert {r["family"] for r in table} == set(trl_study_stats.FAMILIES)
    text = trl_study_stats.summary_markdown(made_up_rows(), [])
    assert "| primary | 0.01 | hadw − grpo | final | all | +0.05" in text


def test_the_arith_study_has_two_primary_outcomes_holm_corrected_together():
    """All tiers and the two hardest: one family of comparisons, so each p is adjusted over both outcomes."""
    rows = [dict(r, method={"hadw_dgpo": "hadw_authors"}.get(r["method"], r["method"])) for r in made_up_rows()]
    rows += [dict(r, tier=trl_study_stats.TWO_HARDEST) for r in rows if r["tier"] == trl_study.ALL]
    primary = [r for r in trl_study_stats.comparisons_table(rows, trl_study_stats.ARITH_FAMILIES)
               if r["family"] == "primary"]
    arith = [c for c in trl_study_stats.COMPARISONS if set(c) <= set(trl_study_stats.ARITH_METHODS)]
    assert len(primary) == 2 * 2 * len(arith) == 20  # two outcomes, both learning rates
    assert {r["tier"] for r in primary} == {trl_study.ALL, trl_study_stats.TWO_HARDEST}
    alone = [r for r in trl_study_stats.comparisons_table(rows) if r["family"] == "primary"]
    one = next(r for r in alone if (r["first"], r["second"], r["lr"]) == ("hadw", "grpo", 1e-2))
    both = next(r for r in primary if (r["first"], r["second"], r["lr"], r["tier"]) == ("hadw", "grpo", 1e-2,
                                                                                          trl_study.ALL))
    assert both["p_t"] == one["p_t"] and both["p_holm"] > one["p_holm"]  # adjusted over twice the tests


@pytest.mark.slow  # five runs, each a process importing torch and TRL: about a minute
def test_the_quick_arith_study_runs_every_method_paired_by_seed_and_a_run_reproduces_bit_for_bit(tmp_path):
    """``--task arith --quick``: a stand-in model pretrained for a few steps, then every method of the arithmetic
    study; the tables the page reads, the two hardest tiers' accuracy, GRPO's within-group balance of exactly 1, the
    anchor beside the batch accuracy; and one run rerun from its spec, bit for bit."""
    out = tmp_path / "study"
    proc = subprocess.run([sys.executable, "-m", "verl_hadw.cli", "study", "--trainer", "trl", "--task", "arith",
                           "--quick", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plan = trl_study.quick_plan(out, "arith", str(out / "model"))
    lr, methods = plan.lrs[0], trl_study_stats.ARITH_METHODS
    steps = {m: [json.loads(line) for line in (plan.run_dir(m, 1, lr) / "steps.jsonl").read_text().splitlines()]
             for m in methods}
    val = {m: [json.loads(line) for line in (plan.run_dir(m, 1, lr) / "val.jsonl").read_text().splitlines()]
           for m in methods}
    # paired by seed: the same prompts in the same order, the same starting weights (step 0's validation)
    assert len({json.dumps([s["prompts"] for s in steps[m]]) for m in methods}) == 1
    assert len({json.dumps(val[m][0]) for m in methods}) == 1
    assert [v["step"] for v in val["hadw"]] == [0, 2, 4]
    for method in ("hadw", "hadw_authors"):
        assert all("phi_mean" in s and "anchor" in s and "batch_acc" in s for s in steps[method])
    assert not any("phi_mean" in s for s in steps["grpo"])
    spec = json.loads((plan.run_dir("grpo_lr_phi", 1, lr) / "spec.json").read_text())
    phi = np.mean([s["phi_mean"] for s in steps["hadw"]])
    assert spec["phi"] == pytest.approx(phi) and spec["lr"] == pytest.approx(lr * phi)
    tables = {name: trl_study.read_csv(out / file) for name, file in trl_study.ARITH_TABLE_FILES.items()}
    for name, rows in tables.items():
        assert rows and set(rows[0]) == {"method", "seed", "lr", "step", "tier", "value"}, name
    assert {r["tier"] for r in tables["val_accuracy"]} == {*TIERS, trl_study.ALL, trl_study_stats.TWO_HARDEST}
    balance = {m: [r["value"] for r in tables["balance"] if r["method"] == m] for m in methods}
    assert balance["grpo"] and balance["grpo"] == pytest.approx([1.0] * len(balance["grpo"]), rel=1e-5)
    assert {r["tier"] for r in tables["anchor"]} == {"anchor", "batch_acc"}
    assert {r["method"] for r in tables["anchor"]} == {"hadw", "hadw_authors"}
    for method in methods:  # each step's shares over the four tiers sum to 1
        for step in range(1, 5):
            total = sum(r["value"] for r in tables["advantage_share"] if r["method"] == method and r["step"] == step)
            assert total == pytest.approx(1.0) or total == 0.0
    assert (out / "curves.png").stat().st_size > 0 and (out / "advantage_share.png").stat().st_size > 0
    # one run again from its spec: the same files, bit for bit
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(plan.run_dir("hadw_authors", 1, lr) / "spec.json", again / "spec.json")
    subprocess.run([sys.executable, "-m", "verl_hadw.research.trl_study_run", str(again / "spec.json")], check=True,
                   capture_output=True, timeout=600)
    for name in ("steps.jsonl", "val.jsonl"):
        assert (again / name).read_bytes() == (plan.run_dir("hadw_authors", 1, lr) / name).read_bytes(), name


def test_a_toy_run_trains_from_its_spec(tmp_path):
    """The toy task's run (the first study's): two steps of TRL's GRPO in this process, its files written."""
    from verl_hadw.research import trl_study_run

    plan = trl_study.quick_plan(tmp_path)
    spec = dict(plan.spec("grpo", 1, 1e-2), steps=2, val_every=2)
    trl_study_run.train(spec, tmp_path)
    val = [json.loads(line) for line in (tmp_path / "val.jsonl").read_text().splitlines()]
    assert [v["step"] for v in val] == [0, 2] and set(val[0]) == {"step", *TIERS}
    assert (tmp_path / "DONE").exists() and len((tmp_path / "steps.jsonl").read_text().splitlines()) == 2

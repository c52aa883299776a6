"""``docs/does-it-help.md``: its tables are generated from the studies' CSVs and locked to them; every block of
either study reads the right rows (on made-up runs with a known effect); the gzipped CSVs read back as written."""

from __future__ import annotations

import gzip
import re
import time
import warnings
from pathlib import Path

import pytest

from verl_hadw.research import does_it_help, trl_study, trl_study_stats
from verl_hadw.toy.task import TIERS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "does-it-help.md"
LRS = (3e-3, 1e-3)
SEEDS = range(1, 13)


def made_up_tables() -> dict[str, list[dict]]:
    """Every method over 12 seeds and both learning rates: ``hadw`` 0.05 ahead of ``grpo`` at the last validation and,
    from step 21 on, 0.1 more of the advantage mass on the hard tiers; the other methods equal to ``grpo``."""
    val, share, phi = [], [], []
    for lr in LRS:
        for method in trl_study_stats.TOY_METHODS:
            for seed in SEEDS:
                key = dict(method=method, seed=seed, lr=lr)
                for step in (0, 10, 20):
                    value = 0.3 + 0.01 * seed + 0.01 * step + 0.001 * ((seed * 7 + step) % 5)
                    value += 0.05 if method == "hadw" and step == 20 else 0.0
                    val += [dict(key, step=step, tier=t, value=value) for t in (*TIERS, trl_study.ALL)]
                for step in range(1, 31):
                    jitter = 0.005 * ((seed + step) % 4)
                    later = method == "hadw" and step > does_it_help.EARLY
                    parts = (0.3 - jitter, 0.3, 0.25 + jitter, 0.15) if later else (0.4, 0.3, 0.2, 0.1)
                    if step == 7:  # a step whose groups all agree: no advantage mass, left out of the means
                        parts = (0.0, 0.0, 0.0, 0.0)
                    share += [dict(key, step=step, tier=t, value=v) for t, v in zip(TIERS, parts)]
                    if method in ("hadw", "hadw_dgpo"):
                        phi.append(dict(key, step=step, tier=trl_study.ALL, value=1.2))
    return {"val_accuracy": val, "train_reward": [], "phi": phi, "advantage_share": share}


def made_up_arith_tables() -> dict[str, list[dict]]:
    """The arithmetic study's methods over 12 seeds at lr 3e-4: ``hadw`` 0.042 ahead of ``grpo`` on the two hardest
    tiers at the last validation (0.021 over all), its balance 0.7 on the easy tiers and 1.5 on the hard ones, its
    anchor 0.02 below the batch accuracy; ``grpo``'s balance 1."""
    val, balance, anchor = [], [], []
    hard, tiers = trl_study_stats.TWO_HARDEST, (*TIERS, trl_study.ALL)
    for method in trl_study_stats.ARITH_METHODS:
        for seed in SEEDS:
            key = dict(method=method, seed=seed, lr=3e-4)
            for step in (0, 10, 20):
                value = 0.4 + 0.01 * seed + 0.001 * ((seed * 3 + step) % 5)
                gain = 0.04 + 0.002 * (seed % 3) if method == "hadw" and step == 20 else 0.0
                val += [dict(key, step=step, tier=t, value=value + gain * (t in does_it_help.HARD_TIERS))
                        for t in TIERS]
                val += [dict(key, step=step, tier=trl_study.ALL, value=value + gain / 2),
                        dict(key, step=step, tier=hard, value=value + gain)]
            for step in range(1, 31):
                weighted = method in ("hadw", "hadw_authors")
                parts = (0.7, 0.7, 1.5, 1.5 + 0.01 * (seed % 3)) if weighted else (1.0,) * 4
                balance += [dict(key, step=step, tier=t, value=v) for t, v in zip(TIERS, parts)]
                if weighted:
                    y = 0.5 + 0.004 * step
                    anchor += [dict(key, step=step, tier="batch_acc", value=y),
                               dict(key, step=step, tier="anchor", value=y - 0.02)]
    assert set(tiers) < {r["tier"] for r in val}
    # three verl seeds of grpo and hadw at steps 0 and 30, the third seed's final accuracy outside the TRL range
    verl = [dict(method=method, seed=seed, step=step, tier=t, value=0.4 if step == 0 else (0.45, 0.46, 0.6)[seed - 1])
            for method in ("grpo", "hadw") for seed in (1, 2, 3) for step in (0, 30) for t in tiers]
    return {"val_accuracy": val, "train_reward": [], "phi": [], "advantage_share": [], "balance": balance,
            "anchor": anchor, "verl_val_accuracy": verl}



def page_with_every_block() -> str:
    return "\n".join(f"<!-- generated: {s}.{name} -->\nstale\n<!-- end: {s}.{name} -->"
                     for s, study in does_it_help.STUDIES.items() for name in study.blocks
                     if not (s == "arith" and name in ("mechanism", "phi"))) + "\n"  # the toy's test those


def studies(toy=None) -> dict:
    return {"toy": made_up_tables() if toy is None else toy, "arith": made_up_arith_tables()}


def block(page: str, name: str) -> str:
    return page.split(f"<!-- generated: {name} -->")[1].split(f"<!-- end: {name} -->")[0]


def test_every_block_reads_the_right_rows_of_made_up_runs():
    page = does_it_help.fill(page_with_every_block(), studies())
    assert "stale" not in page
    assert "| 0.003 | 12 | 12 | 12 | 12 | 12 | 60 |" in page and "120 runs, each to step 20." in page
    primary = block(page, "toy.primary")
    hadw = next(line for line in primary.splitlines() if line.startswith("| 0.003 | `hadw` − `grpo` |"))
    assert "+0.050 ±" in hadw and "★" in hadw and "| 12/12 |" in hadw
    dgpo = next(line for line in primary.splitlines() if line.startswith("| 0.003 | `dgpo` − `grpo` |"))
    assert "+0.000 ± 0.000" in dgpo and "★" not in dgpo
    assert "10 comparisons in the family" in primary  # 5 comparisons at each of the 2 learning rates
    assert "each family's 40 comparisons" in page  # and at each of the 4 tiers
    mechanism = block(page, "toy.mechanism")
    hard = next(line for line in mechanism.splitlines() if line.startswith("| steps 1-30 | 0.003 | `hadw` − `grpo`"))
    assert "| +0.037 ± " in hard and "★" in hard  # +0.1 (+ the jitter) on 10 of the 29 steps with advantage mass
    early = next(line for line in mechanism.splitlines() if line.startswith("| steps 1-20 | 0.003 | `hadw` − `grpo`"))
    assert "| +0.000 ± 0.000 |" in early
    assert "| 0.003 | `grpo` | 0.400 ± 0.000 | 0.300 ± 0.000 | 0.200 ± 0.000 | 0.100 ± 0.000 |" in mechanism
    assert "| 0.003 | `hadw` | 1.2000 | 12 |" in page
    assert does_it_help.fill(page, studies()) == page  # filling is idempotent


def test_the_arithmetic_blocks_read_both_outcomes_the_balance_and_the_anchor_of_made_up_runs():
    page = does_it_help.fill(page_with_every_block(), studies())
    primary = block(page, "arith.primary")
    assert "| outcome |" in primary and "10 comparisons in the family" in primary  # 5 comparisons × 2 outcomes
    hard = next(line for line in primary.splitlines() if line.startswith("| 0.0003 | `hadw` − `grpo` | hard+hardest |"))
    assert "+0.042 ±" in hard and "★" in hard and "| 12/12 |" in hard
    whole = next(line for line in primary.splitlines() if line.startswith("| 0.0003 | `hadw` − `grpo` | all |"))
    assert "+0.021 ±" in whole
    accuracy = block(page, "arith.accuracy")
    assert "| **all** (primary) | **hard+hardest** (primary) | AUC, all |" in accuracy
    assert "| outcome |" not in block(page, "toy.primary")  # one outcome: no column for it
    balance = block(page, "arith.balance")
    assert "| 1-30 | 0.0003 | `hadw` | 0.700 ± 0.000 | 0.700 ± 0.000 | 1.500 ± 0.000 | 1.510 ± 0.005 |" in balance
    assert "| 1-20 | 0.0003 | `grpo` | 1.000 ± 0.000 |" in balance
    anchor = block(page, "arith.anchor")
    assert "| 0.0003 | `hadw` | 1-10 | 0.502 ± 0.000 | 0.522 ± 0.000 | -0.020 ± 0.000 |" in anchor
    assert "| 0.0003 | `hadw_authors` | 21-30 | 0.582 ± 0.000 | 0.602 ± 0.000 | -0.020 ± 0.000 |" in anchor
    assert "`grpo`" not in anchor
    beside = block(page, "arith.verl")
    assert "| `grpo` | hard+hardest | 0.467 ± 0.023 | 0.413-0.521 | 0.450, 0.460, 0.600 | 0.503 | 2/3 |" in beside
    assert "| `hadw` | hard+hardest | 0.509 ± 0.023 | 0.455-0.561 | 0.450, 0.460, 0.600 | 0.503 | 1/3 |" in beside


def test_a_study_cut_short_fills_every_block_with_the_runs_it_has():
    tables = {name: [r for r in rows if not (r["method"] == "dgpo" and r["lr"] == 1e-3)]
              for name, rows in made_up_tables().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no mean of nothing
        page = does_it_help.fill(page_with_every_block(), studies(tables))
    assert "| 0.001 | 12 | 12 | 0 | 12 | 12 | 48 |" in page and "| 0.001 | `dgpo` |" not in page
    assert "| 0.003 | `dgpo` | 12 |" in page


@pytest.mark.parametrize("name", ["toy.verdict", "arith.design", "trl.primary"])
def test_a_block_not_of_its_study_is_refused_naming_the_known_ones(name):
    with pytest.raises(ValueError, match=rf"unknown generated block\(s\) \['{name}'\]; known: .*'arith.balance'"):
        does_it_help.fill(f"<!-- generated: {name} -->\n<!-- end: {name} -->\n", studies())


@pytest.mark.slow  # the whole studies' tables: seconds
def test_the_committed_page_is_what_its_csvs_give():
    page = PAGE.read_text()
    assert "<!-- generated: toy.design -->" in page and "<!-- generated: arith.primary -->" in page
    tables = does_it_help.read_tables(ROOT)
    assert does_it_help.fill(page, tables) == page
    edited = page.replace("| seeds per method and learning rate | 48", "| seeds per method and learning rate | 47")
    assert edited != page and does_it_help.fill(edited, tables) == page


def test_every_interval_the_page_quotes_in_its_prose_is_one_of_its_generated_tables():
    page = PAGE.read_text()
    generated = "".join(m.group(4) for m in does_it_help.BLOCK.finditer(page))
    prose = does_it_help.BLOCK.sub("", page).replace("−", "-")  # the prose writes a minus sign, the tables a hyphen
    quoted = re.findall(r"[+-]?\d\.\d{3} ± \d\.\d{3}", prose)
    assert len(quoted) >= 5  # "In short" quotes the primary table
    missing = [q for q in quoted if q not in generated]
    assert missing == [], f"the prose quotes intervals that no generated table holds (stale?): {missing}"


def test_a_gzipped_table_reads_back_as_written_and_the_same_rows_give_the_same_bytes(tmp_path):
    rows = made_up_tables()["advantage_share"][:50]
    trl_study.write_csv(tmp_path / "plain.csv", rows)
    trl_study.write_csv(tmp_path / "packed.csv.gz", rows)
    assert gzip.decompress((tmp_path / "packed.csv.gz").read_bytes()) == (tmp_path / "plain.csv").read_bytes()
    keys = ("method", "seed", "step", "tier", "value")
    assert [{k: r[k] for k in keys} for r in rows] == [
        {k: r[k] for k in keys} for r in trl_study.read_csv(tmp_path / "packed.csv.gz")]
    first = (tmp_path / "packed.csv.gz").read_bytes()
    time.sleep(1.1)  # a time stamp in the gzip header would differ now
    trl_study.write_csv(tmp_path / "packed.csv.gz", rows)
    assert (tmp_path / "packed.csv.gz").read_bytes() == first

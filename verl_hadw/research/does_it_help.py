"""The generated tables of ``docs/does-it-help.md``, from the TRL studies' committed CSVs (``STUDIES``).

``fill(page, studies)`` rewrites each block between ``<!-- generated: STUDY.NAME -->`` and ``<!-- end: STUDY.NAME -->``
(a study of ``STUDIES`` and one of its blocks); ``python -m verl_hadw.research.does_it_help`` does it in place, and
``tests/research/test_does_it_help.py`` fails when the committed page is not what its CSVs give.
"""

from __future__ import annotations

import re
import sys
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verl_hadw.research.arith_blocks import anchor, balance, read_verl_csv, verl
from verl_hadw.research.study_stats import ci_text
from verl_hadw.research.trl_study import ALL, ARITH_TABLE_FILES, TABLE_FILES, TrlStudyPlan, read_csv
from verl_hadw.research.trl_study_stats import (
    ALPHA,
    ARITH_FAMILIES,
    EARLY,
    FAMILIES,
    HARD_TIERS,
    comparisons_table,
    holm,
    holm_mark,
    lrs_in,
    methods_in,
    paired,
    run_scores,
)
from verl_hadw.toy.task import TIERS

__all__ = ["Study", "STUDIES", "BLOCKS", "HARD_TIERS", "StudyTables", "read_tables", "fill", "main"]

BLOCK = re.compile(r"(<!-- generated: (\w+)\.(\w+) -->\n)(.*?)(<!-- end: \2\.\3 -->)", re.S)


@dataclass(frozen=True)
class Study:
    """One study on the page: its committed CSVs, their files (``trl_study.TABLE_FILES``), its families of
    comparisons and the blocks it fills."""

    folder: Path
    files: Mapping[str, str]
    families: Mapping[str, tuple]
    blocks: tuple[str, ...]


class StudyTables(Mapping):
    """A study's tables in ``folder`` (``files``: name -> file), each read when a block first asks for it (the
    advantage-mass tables are large)."""

    def __init__(self, folder: Path, files: Mapping[str, str] = TABLE_FILES):
        self.folder, self.files, self._read = Path(folder), files, {}

    def __getitem__(self, name: str) -> list[dict]:
        if name not in self.files:
            raise KeyError(name)
        if name not in self._read:
            path = self.folder / self.files[name]
            self._read[name] = read_verl_csv(path) if name == "verl_val_accuracy" else read_csv(path)
        return self._read[name]

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def read_tables(root: Path = Path(".")) -> dict[str, StudyTables]:
    """Every study's tables, from its folder under ``root`` (the repository), read as the blocks ask for them."""
    return {name: StudyTables(Path(root) / study.folder, study.files) for name, study in STUDIES.items()}


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def design(tables) -> str:
    plan = TrlStudyPlan()
    families = "; ".join(f"{name}: {score} score, tier{'s ' + ', '.join(tiers) if len(tiers) > 1 else ' ' + tiers[0]}"
                         for name, (score, tiers) in FAMILIES.items())
    lines = ["| setting | value |", "|---|---|",
             f"| methods | {', '.join(f'`{m}`' for m in plan.methods)} |",
             f"| seeds per method and learning rate | {len(plan.seeds)} ({plan.seeds[0]}-{plan.seeds[-1]}) |",
             f"| learning rates | {' and '.join(f'{lr:g}' for lr in plan.lrs)} (GRPO learns fast / slowly) |",
             f"| steps | {plan.steps}, each {plan.prompts} prompts × {plan.group} completions of "
             f"{plan.max_completion_length} tokens |",
             f"| held-out validation | every {plan.val_every} steps and before step 1: {plan.val_prompts} prompts "
             f"({plan.val_prompts // len(TIERS)} per tier) × {plan.val_n} answers at temperature 1 |",
             "| primary outcome | held-out accuracy over all tiers at the last step |",
             "| secondary outcomes | per tier; the area under the validation curve (the mean of the validations "
             "after step 0) |",
             "| tests | paired by seed: t-test and Wilcoxon signed-rank (normal approximation, ties corrected), "
             "two-sided; Holm's correction within each family |",
             f"| families (Holm within each) | {families} |"]
    return "\n".join(lines)


def runs(tables) -> str:
    rows = tables["val_accuracy"]
    last, methods = max(r["step"] for r in rows), methods_in(rows)
    lines = ["| lr | " + " | ".join(f"`{m}`" for m in methods) + " | all |", "|---|" + "---|" * (len(methods) + 1)]
    total = 0
    for lr in lrs_in(rows):
        counts = [len({r["seed"] for r in rows if r["lr"] == lr and r["method"] == m and r["step"] == last
                       and r["tier"] == ALL}) for m in methods]
        total += sum(counts)
        lines.append(f"| {lr:g} | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    return "\n".join(lines) + f"\n\n{total} runs, each to step {last}."


def accuracy(tables) -> str:
    rows, outcomes = tables["val_accuracy"], tables["outcomes"]
    lines = ["| lr | method | seeds | " + " | ".join(TIERS) + "".join(f" | **{o}** (primary)" for o in outcomes)
             + " | AUC, all |", "|---|---|---|" + "---|" * (len(TIERS) + len(outcomes) + 1)]
    for lr in lrs_in(rows):
        for method in methods_in(rows):
            per_tier = {t: run_scores(rows, method, lr, t) for t in (*TIERS, *outcomes)}
            if not per_tier[ALL]:  # no finished run of this method at this learning rate
                continue
            columns = [ci_text([v["final"] for v in per_tier[t].values()]) for t in TIERS]
            columns += [f"**{ci_text([v['final'] for v in per_tier[o].values()])}**" for o in outcomes]
            aucs = [v["auc"] for v in per_tier[ALL].values()]
            lines.append(f"| {lr:g} | `{method}` | {len(per_tier[ALL])} | " + " | ".join(columns)
                         + f" | {ci_text(aucs)} |")
    start = {r["seed"]: r["value"] for r in rows if r["step"] == 0 and r["tier"] == ALL}  # the same for every method
    return "\n".join(lines) + (f"\n\nAt step 0 (each seed's initial model, shared by every method and learning rate; "
                               f"{len(start)} seeds): {ci_text(list(start.values()))}.")


def _comparison_rows(tables, family: str) -> list[dict]:
    return [r for r in tables["comparisons"] if r["family"] == family]


def _row(r: dict, resolves: bool, outcome: bool) -> str:
    columns = [f"{r['lr']:g}", f"`{r['first']}` − `{r['second']}`", *([r["tier"]] if outcome else []),
               f"{r['diff']:+.3f} ± {r['ci']:.3f}", _p(r["p_t"]), _p(r["p_w"]),
               _p(r["p_holm"]) + holm_mark(r["p_holm"]), f"{r['ahead']}/{r['seeds']}"]
    if resolves:
        columns.append(f"{r['resolves']:.3f}")
    return "| " + " | ".join(columns) + " |"


def _comparisons(tables, family: str, resolves: bool) -> str:
    outcome = len(tables["outcomes"]) > 1  # a family of two outcomes names each row's
    head = "| lr | comparison |" + (" outcome |" if outcome else "") + (" difference (95 % CI) | p (t) | p (Wilcoxon) "
                                                                       "| p (Holm) | seeds ahead |")
    lines = [head + (" resolves |" if resolves else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if outcome else "") + ("---|" if resolves else "")]
    members = _comparison_rows(tables, family)
    lines += [_row(r, resolves, outcome) for r in members]
    return "\n".join(lines) + f"\n\n{len(members)} comparisons in the family; ★: Holm-corrected p < {ALPHA}."


def primary(tables) -> str:
    return _comparisons(tables, "primary", resolves=True)


def auc(tables) -> str:
    return _comparisons(tables, "auc", resolves=False)


def per_tier(tables) -> str:
    final = {(r["lr"], r["first"], r["second"], r["tier"]): r for r in _comparison_rows(tables, "final per tier")}
    area = {(r["lr"], r["first"], r["second"], r["tier"]): r for r in _comparison_rows(tables, "auc per tier")}
    lines = ["| lr | comparison | tier | final: difference (95 % CI) | p (Holm) | ahead | AUC: difference (95 % CI) "
             "| p (Holm) | ahead |", "|---|---|---|---|---|---|---|---|---|"]
    for key, f in final.items():
        a = area[key]
        columns = [f"{f['lr']:g}", f"`{f['first']}` − `{f['second']}`", f["tier"]]
        for r in (f, a):
            columns += [f"{r['diff']:+.3f} ± {r['ci']:.3f}", _p(r["p_holm"]) + holm_mark(r["p_holm"]),
                      f"{r['ahead']}/{r['seeds']}"]
        lines.append("| " + " | ".join(columns) + " |")
    return "\n".join(lines) + (f"\n\nHolm's correction runs over each family's {len(final)} comparisons (final per "
                               f"tier; AUC per tier); ★: corrected p < {ALPHA}.")


def _run_shares(rows, last_step: int) -> dict[tuple, dict[str, float]]:
    """(lr, method, seed) -> each tier's mean share of Σ|A| over steps 1..last_step (steps where it is defined)."""
    sums: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        if r["step"] <= last_step:
            sums.setdefault((r["lr"], r["method"], r["seed"]), {}).setdefault(r["tier"], []).append(r["value"])
    out = {}
    for key, by_tier in sums.items():
        steps_with_mass = np.array([by_tier[t] for t in TIERS]).sum(axis=0) > 0  # a step of all-equal groups has none
        out[key] = {t: float(np.mean(np.array(by_tier[t])[steps_with_mass])) for t in TIERS}
    return out


def _hard_share(shares, lr: float, method: str) -> dict[int, float]:
    """seed -> the hard tiers' share together, of ``method``'s runs at ``lr``."""
    return {s: sum(v[t] for t in HARD_TIERS) for (l_, m, s), v in shares.items() if l_ == lr and m == method}


def mechanism(tables) -> str:
    rows = tables["advantage_share"]
    last = max(r["step"] for r in rows)
    whole, early = _run_shares(rows, last), _run_shares(rows, EARLY)
    lines = [f"Each tier's share of the advantage mass Σ|A| (mean over steps 1-{last} of each run, then over seeds, "
             "± 95 %):", "", "| lr | method | " + " | ".join(TIERS) + " |", "|---|---|" + "---|" * len(TIERS)]
    for lr in lrs_in(rows):
        for method in methods_in(rows):
            runs_ = [v for (l_, m, _), v in whole.items() if l_ == lr and m == method]
            if not runs_:
                continue
            lines.append(f"| {lr:g} | `{method}` | " + " | ".join(ci_text([v[t] for v in runs_]) for t in TIERS) + " |")
    tests = []
    for window, shares in ((f"steps 1-{EARLY}", early), (f"steps 1-{last}", whole)):
        for lr in lrs_in(rows):
            for method in methods_in(rows):
                if method == "grpo":
                    continue
                result = paired(_hard_share(shares, lr, method), _hard_share(shares, lr, "grpo"))
                if result is not None:
                    tests.append(dict(window=window, lr=lr, method=method, **result))
    for test, adjusted in zip(tests, holm([t["p_t"] for t in tests])):
        test["p_holm"] = adjusted
    lines += ["", f"The {' and '.join(HARD_TIERS)} tiers' share together, each method against `grpo` (paired by "
              "seed; Holm over this table):", "",
              "| window | lr | comparison | difference (95 % CI) | p (t) | p (Holm) | seeds ahead |",
              "|---|---|---|---|---|---|---|"]
    for t in tests:
        lines.append(f"| {t['window']} | {t['lr']:g} | `{t['method']}` − `grpo` | {t['diff']:+.3f} ± {t['ci']:.3f} "
                     f"| {_p(t['p_t'])} | {_p(t['p_holm'])}{holm_mark(t['p_holm'])} | {t['ahead']}/{t['seeds']} |")
    return "\n".join(lines)


def phi(tables) -> str:
    rows = tables["phi"]
    lines = ["| lr | method | mean Φ over every step of every run | runs |", "|---|---|---|---|"]
    for lr in lrs_in(rows):
        for method in methods_in(rows):
            mine = [r for r in rows if r["lr"] == lr and r["method"] == method]
            lines.append(f"| {lr:g} | `{method}` | {float(np.mean([r['value'] for r in mine])):.4f} | "
                         f"{len({r['seed'] for r in mine})} |")
    return "\n".join(lines)


COMPARED = {"primary", "auc", "per_tier"}  # the blocks that read the comparisons
# design: TrlStudyPlan's defaults (fixed before the runs); runs: the finished runs per lr and method; accuracy: held-out
# accuracy at the last step per tier, and AUC, mean over seeds ± 95 %; primary, auc, per_tier: the comparisons paired
# by seed with raw and Holm-corrected p, one table per family; mechanism: each tier's share of the advantage mass Σ|A|,
# and the hard tiers' share against GRPO's; phi: the mean Φ of the hadw runs (grpo_lr_phi's learning-rate factor);
# balance: Σ A⁺ / Σ |A⁻| per tier; anchor: HA-DW's anchor beside the batch accuracy; verl: the verl runs' final
# accuracy beside the TRL study's spread
BLOCKS = {"design": design, "runs": runs, "accuracy": accuracy, "primary": primary, "auc": auc,
          "per_tier": per_tier, "mechanism": mechanism, "balance": balance, "anchor": anchor, "phi": phi,
          "verl": verl}
STUDIES = {
    "toy": Study(Path("docs/study/trl"), TABLE_FILES, FAMILIES,
                 ("design", "runs", "accuracy", "primary", "auc", "per_tier", "mechanism", "phi")),
    # the arithmetic study through TRL, and a few seeds through verl beside it (research.study.arith_plan)
    "arith": Study(Path("docs/study/arith"),
                   {**ARITH_TABLE_FILES, "verl_val_accuracy": "../arith_verl/val_accuracy.csv"}, ARITH_FAMILIES,
                   ("runs", "accuracy", "primary", "auc", "per_tier", "mechanism", "balance", "anchor", "phi", "verl")),
}


def fill(page: str, studies: Mapping[str, Mapping[str, list[dict]]]) -> str:
    """``page`` with every generated block rewritten from its study's tables (``studies``: a study's name -> its
    tables); a block that is not one of its study's is an error."""
    found = [(m.group(2), m.group(3)) for m in BLOCK.finditer(page)]
    unknown = sorted({f"{s}.{b}" for s, b in found if s not in STUDIES or b not in STUDIES[s].blocks})
    if unknown:
        known = sorted(f"{s}.{b}" for s, study in STUDIES.items() for b in study.blocks)
        raise ValueError(f"unknown generated block(s) {unknown}; known: {known}")
    tables = {}
    for name in dict.fromkeys(s for s, _ in found):
        families = STUDIES[name].families
        derived = {"outcomes": families["primary"][1]}
        if any(b in COMPARED for s, b in found if s == name):  # computed once, and only for a page that shows them
            derived["comparisons"] = comparisons_table(studies[name]["val_accuracy"], families)
        tables[name] = ChainMap(derived, studies[name])
    return BLOCK.sub(lambda m: f"{m.group(1)}{BLOCKS[m.group(3)](tables[m.group(2)])}\n{m.group(5)}", page)


def main(argv: list[str] | None = None) -> int:
    """``python -m verl_hadw.research.does_it_help [PAGE]``: rewrite the page's generated blocks from the studies'
    committed CSVs (``STUDIES``; run from the repository's root)."""
    argv = sys.argv[1:] if argv is None else argv
    page = Path(argv[0]) if argv else Path("docs/does-it-help.md")
    page.write_text(fill(page.read_text(), read_tables()))
    print(f"wrote {page} from {', '.join(str(study.folder) for study in STUDIES.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every equation tag in ``verl_hadw/`` ("Eq. 13", "Eqs. 13-16", "Theorem 2", "App. F", ...) names an entry of
the equation sheet ``docs/equations.md``, and every module path the sheet names exists."""

import importlib
import re

from repo_paths import ROOT

SHEET = ROOT / "docs" / "equations.md"
PAPERS = ("HA-DW", "DGPO")

# One tag: optional paper prefix, kind, first number (or appendix letter), then ranges/lists ("13-16", ", 29").
TAG = re.compile(
    r"(?:\b(?P<paper>HA-DW|DGPO|MathForge)\s+)?"
    r"\b(?P<kind>Eqs?|Theorems?|Lemmas?|Corollar(?:y|ies)|Defs?|Tables?|App)\.?\s+"
    r"(?:\((?P<pnum>\d+)\)|(?P<num>\d+)\b|(?P<letter>[A-Z])\b)"
    r"(?P<rest>(?:\s*[-–]\s*\d+|,\s*\d+\b(?!\.\d))*)"
)
KINDS = {"Eq": "Eq", "Eqs": "Eq", "Theorem": "Theorem", "Theorems": "Theorem", "Lemma": "Lemma", "Lemmas": "Lemma",
         "Corollary": "Corollary", "Corollaries": "Corollary", "Def": "Def", "Defs": "Def", "Table": "Table",
         "Tables": "Table", "App": "App"}


def parse_tags(text: str) -> list[tuple[str | None, str, str]]:
    """(paper or None, kind, number/letter) for every tag in ``text``, ranges and lists expanded."""
    tags = []
    for m in TAG.finditer(text):
        kind = KINDS[m["kind"]]
        if kind == "App":
            if not m["letter"]:
                continue
            ids = [m["letter"]]
        else:
            first = m["pnum"] or m["num"]
            if first is None:
                continue
            ids, last = [int(first)], int(first)
            # a plural kind may list numbers ("Eqs. 25, 29, 31"); any kind may give a range ("Eq. 9-10")
            for sep, n in re.findall(r"\s*([-–,])\s*(\d+)", m["rest"] or ""):
                if sep == "," and not m["kind"].endswith(("s", "ies")):
                    break
                n = int(n)
                ids += list(range(last + 1, n + 1)) if sep in "-–" else [n]
                last = n
            ids = [str(i) for i in ids]
        paper = {"MathForge": "DGPO"}.get(m["paper"], m["paper"])
        tags += [(paper, kind, i) for i in ids]
    return tags


def sheet_entries() -> dict[tuple[str, str, str], str]:
    """(paper, kind, id) -> entry heading, from the sheet's ``####`` headings under ``## HA-DW`` / ``## DGPO``."""
    entries, paper = {}, None
    for line in SHEET.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            paper = next((p for p in PAPERS if line[3:].startswith(p)), None)
        elif line.startswith("#### "):
            assert paper is not None, f"{SHEET}: entry {line!r} is not under a '## HA-DW' or '## DGPO' section"
            label = line[5:].split(" — ")[0]
            for _, kind, ident in parse_tags(label):
                key = (paper, kind, ident)
                assert key not in entries, (
                    f"{SHEET}: {kind} {ident} of {paper} has two entries: {entries[key]!r}, {line!r}"
                )
                entries[key] = line
    return entries


def code_tags() -> list[tuple[str, str | None, str, str]]:
    """(where: "file:line: text", paper, kind, id) of every tag in verl_hadw/**/*.py."""
    found = []
    for path in sorted((ROOT / "verl_hadw").rglob("*.py")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{lineno}: {line.strip()[:90]}"
            found += [(where, *tag) for tag in parse_tags(line)]
    return found


def test_tag_parser_expands_ranges_lists_and_prefixes():
    assert parse_tags("# Eq. (13)") == [(None, "Eq", "13")]
    assert parse_tags("Φ of Eqs. 13-16 and Lemma 2") == [(None, "Eq", "13"), (None, "Eq", "14"), (None, "Eq", "15"),
                                                      (None, "Eq", "16"), (None, "Lemma", "2")]
    assert parse_tags("App. B, Eqs. 25, 29, 31") == [(None, "App", "B"), (None, "Eq", "25"), (None, "Eq", "29"),
                                                    (None, "Eq", "31")]
    assert parse_tags("DGPO Theorems 1-2; Corollaries 1–3") == [("DGPO", "Theorem", "1"), ("DGPO", "Theorem", "2"),
                                                              (None, "Corollary", "1"), (None, "Corollary", "2"),
                                                              (None, "Corollary", "3")]
    # a singular tag does not swallow a following number; a struct named Table( is not a tag
    assert parse_tags("Eq. 7, 2 calls; Table(\"hadw\"); HA-DW §5.1") == [(None, "Eq", "7")]


def test_sheet_has_the_core_entries():
    entries = sheet_entries()
    hadw = {(k, i) for p, k, i in entries if p == "HA-DW"}
    dgpo = {(k, i) for p, k, i in entries if p == "DGPO"}
    assert {("Eq", str(n)) for n in range(7, 18)} <= hadw  # the algorithm, Eqs. 7-17
    assert {("Eq", "2"), ("Eq", "3"), ("Eq", "6"), ("Eq", "32"), ("App", "F"), ("Def", "3")} <= hadw
    assert {("Theorem", str(n)) for n in range(1, 5)} | {("Lemma", "1"), ("Lemma", "2")} <= hadw
    assert {("Corollary", str(n)) for n in range(1, 4)} | {("Table", str(n)) for n in range(4, 7)} <= hadw
    assert {("Eq", str(n)) for n in range(3, 7)} | {("Theorem", "1"), ("Theorem", "2")} <= dgpo


def test_every_code_tag_has_a_sheet_entry():
    entries = sheet_entries()
    tags = code_tags()
    assert len(tags) > 100, f"only {len(tags)} tags found in verl_hadw/: the tag pattern no longer matches the code"
    missing = []
    for where, paper, kind, ident in tags:
        papers = [paper] if paper else list(PAPERS)
        if not any((p, kind, ident) in entries for p in papers):
            missing.append(f"{paper or 'any paper'} {kind} {ident} <- {where}")
    assert not missing, (
        f"tags with no entry in {SHEET.relative_to(ROOT)} (add a '#### {{Eq. n}} — ...' heading under the paper's "
        "'## ' section, or fix the tag):\n" + "\n".join(missing)
    )


def test_code_and_files_named_by_the_sheet_exist():
    text = SHEET.read_text(encoding="utf-8")
    modules = ("core", "verl", "trl", "research", "repro")
    names = set(re.findall(r"`((?:%s)\.[A-Za-z_][\w.]*)`" % "|".join(modules), text))
    assert len(names) > 20
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # longest importable module prefix, then attributes
            try:
                obj = importlib.import_module("verl_hadw." + ".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"{SHEET.name} names `{name}`, but {obj!r} has no attribute {attr!r}"
                obj = getattr(obj, attr)
            break
        else:
            raise AssertionError(f"{SHEET.name} names `{name}`, but no module verl_hadw.{parts[0]} exists")
    paths = set(re.findall(r"`((?:configs|benchmarks|tests)/[\w./]*)`", text))
    assert paths
    for rel in sorted(paths):
        assert (ROOT / rel).exists(), f"{SHEET.name} names `{rel}`, which does not exist"

"""Every command the docs show is checked, cheaply and for real, without running it.

Commands come from ```bash / ```sh / ```console blocks (every line is a command) and from inline code spans that
start like one (`bash scripts/...`, `verl-hadw ...`, `python ...`, `pip install ...`) in README.md, CONTRIBUTING.md
and docs/**/*.md. Usage notation is read as such: `[optional]` parts are kept, `a|b` is checked for each
alternative, `...` is dropped, UPPER-CASE or <angle> words are placeholders. Each command then goes to the check of
its program (tests/project/test_docs_checks.py); a program no check knows fails, so a new kind of command cannot go
unchecked.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from repo_paths import ROOT
from test_docs_checks import CONFIG_DIR, ENV, TOOLS, check

SHELL_FENCES = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")
PROGRAMS = {"bash", "sh", "python", "python3", "pip", "verl-hadw", "verl-hadw-swift", "swift", "pytest", "sbatch",
            "export", *TOOLS}


def doc_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def without_fences(text: str) -> str:
    """The text with every fenced block blanked (its lines kept, so positions stay meaningful)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def commands_of(text: str) -> list[str]:
    """Every command of one Markdown text: the lines of shell blocks (continuations joined) and command spans."""
    found = []
    for m in FENCE.finditer(text):
        if m["info"].strip().split(" ")[0] not in SHELL_FENCES:
            continue
        body = "\n".join(line[len(m["indent"]):] for line in m["body"].splitlines())
        for line in body.replace("\\\n", " ").splitlines():
            if m["info"].strip() == "console":
                line = line[2:] if line.startswith("$ ") else ""
            if line.strip() and not line.lstrip().startswith("#"):
                found.append(line.strip())
    for span in SPAN.findall(without_fences(text)):
        span = " ".join(span.split())
        words = [w for w in span.split(" ") if not ENV.match(w)]
        first = words[0].removeprefix(".venv/bin/") if words else ""
        script = re.fullmatch(r"(\./)?scripts/\S+\.(sh|py|sbatch)", first)
        if (first in PROGRAMS and len(words) > 1) or (script and len(words) > 1):
            found.append(span)
    return found


def all_commands() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), c) for p in doc_files() for c in commands_of(p.read_text(encoding="utf-8"))]


def names_a_subcommand(command: str) -> bool:
    """Prose names a subcommand with a bare `verl-hadw study`: then the subcommand must exist, nothing more."""
    from verl_hadw import cli

    m = re.fullmatch(r"(?:\.venv/bin/)?verl-hadw ([\w-]+)", command)
    return bool(m) and m[1] in cli.SUBCOMMANDS


def variants(command: str) -> list[list[list[str]]]:
    """The command as token lists, one per alternative of `a|b` words; each split into `|`/`&&`/`;` pieces."""
    text = command.replace("$(verl-hadw configs)", CONFIG_DIR)  # one word for shlex
    while (new := re.sub(r"(?<!\S)\[([^\[\]]*)\]", r"\1", text)) != text:  # [optional] parts, nested too
        text = new
    tokens = [t for t in shlex.split(text, comments=True) if t not in ("...", "…")]
    alternatives = [i for i, t in enumerate(tokens) if "|" in t.strip("|") and "://" not in t and not ENV.match(t)]
    base = [t.split("|")[0] if i in alternatives else t for i, t in enumerate(tokens)]
    out = [base] + [base[:i] + [alt] + base[i + 1:] for i in alternatives for alt in tokens[i].split("|")[1:]]
    joined = ["\x00".join(toks) for toks in out]  # then cut at the shell's own separators
    return [[p.strip("\x00").split("\x00") for p in re.split(r"(?:^|\x00)(?:\||&&|;|\|\|)(?:\x00|$)", j) if p]
            for j in joined]


# ------------------------------------------------------------------------------------------------ the tests
COMMANDS = all_commands()


def test_the_docs_show_commands_from_every_kind_of_source():
    """The extraction itself: fenced blocks and spans of README, CONTRIBUTING and docs pages are all read."""
    sources = {source for source, _ in COMMANDS}
    assert {"README.md", "CONTRIBUTING.md", "docs/reproduce.md", "docs/demo.md"} <= sources
    commands = {c for _, c in COMMANDS}
    assert "bash scripts/demo_cpu.sh" in commands and "bash scripts/test_cpu.sh" in commands
    assert any(c.startswith("python -m verl.trainer.main_ppo --config-path=") for c in commands)


@pytest.mark.slow  # every documented command against the real program: CI, not the quick loop
@pytest.mark.parametrize("source, command", COMMANDS, ids=[f"{s}: {c[:60]}" for s, c in COMMANDS])
def test_command_is_real(source, command, monkeypatch):
    monkeypatch.setenv("VERL_HADW_ASSETS", "/assets")  # the demo's config reads it (scripts/demo_cpu.sh sets it)
    if names_a_subcommand(command):
        return
    for pieces in variants(command):
        for tokens in pieces:
            check(list(tokens))

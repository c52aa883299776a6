"""verl_hadw.cli: one module per subcommand, and a clear message when a subcommand's extra is missing."""

import importlib.util

import pytest

from verl_hadw import cli


def test_every_subcommand_is_registered_and_has_help(capsys):
    for name in cli.SUBCOMMANDS:
        with pytest.raises(SystemExit) as exc:
            cli.main([name, "--help"])
        assert exc.value.code == 0
        assert f"usage: verl-hadw {name}" in capsys.readouterr().out


@pytest.mark.parametrize("command, extra, missing", [
    (["theory", "--no-plots"], "research", "scipy"),
    (["results", "runs/x"], "repro", "math_verify"),
])
def test_missing_extra_names_what_to_install(monkeypatch, command, extra, missing):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    with pytest.raises(SystemExit) as exc:
        cli.main(command)
    assert f"pip install 'verl-hadw[{extra}]'" in str(exc.value.code) and missing in str(exc.value.code)


def test_options_prints_the_declared_defaults(capsys):
    assert cli.main(["options"]) == 0
    out = capsys.readouterr().out
    assert "lambda_scale: 1.3" in out and "temperature: 2.0" in out


def test_docs_layout_lists_every_module():
    from pathlib import Path

    root = Path(cli.__file__).resolve().parents[2]
    layout = (root / "docs" / "layout.md").read_text(encoding="utf-8")  # "Layout and modules", one line a module
    listed = {line.split()[0] for line in layout.splitlines() if line.startswith("verl_hadw/")}
    modules = {str(p.relative_to(root)) for p in (root / "verl_hadw").rglob("*.py") if "__pycache__" not in p.parts}
    assert modules == listed, f"missing: {sorted(modules - listed)}; stale: {sorted(listed - modules)}"

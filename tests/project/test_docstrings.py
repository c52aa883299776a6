"""Every module of the package says in at most five docstring lines what it is for."""

import ast

from repo_paths import ROOT

PACKAGE = ROOT / "verl_hadw"
MAX_LINES = 5


def docstring_lines(source: str) -> int:
    """The lines of a module's docstring (0 without one), blank lines inside it counted."""
    doc = ast.get_docstring(ast.parse(source), clean=False)
    return 0 if doc is None else len(doc.strip("\n").splitlines())


def test_the_count_reads_the_docstring_as_written():
    assert docstring_lines('"""One line."""\n') == 1
    assert docstring_lines('"""Title.\n\nBody,\nmore.\n"""\nx = 1\n') == 4
    assert docstring_lines("x = 1\n") == 0


def test_every_module_docstring_is_at_most_five_lines():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = docstring_lines(path.read_text(encoding="utf-8"))
        if lines > MAX_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not too_long, (f"module docstrings longer than {MAX_LINES} lines (say what the module is for; move the "
                          "rest to comments at the code or to docs/):\n" + "\n".join(too_long))

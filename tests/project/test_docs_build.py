"""The documentation site (mkdocs.yml, docs/): `mkdocs build --strict` passes on the real pages and fails, naming
the cause, on a broken link, a broken anchor, a link out of docs/, a page left out of the nav or a nav entry whose
page is missing. Also: docs/options.md shows the options block the declarations generate."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT


def build(root: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the site at ``root`` (a copy), into ``root/site``."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)


@pytest.fixture
def site(tmp_path) -> Path:
    """A copy of mkdocs.yml and docs/ to break."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


def test_the_real_docs_build_strictly(site):
    result = build(site)
    assert result.returncode == 0, result.stderr
    pages = sorted(p.relative_to(site / "docs").with_suffix("") for p in (site / "docs").rglob("*.md"))
    for page in pages:  # every page became HTML (use_directory_urls: index.md -> index.html, x.md -> x/index.html)
        html = site / "site" / (page.parent if page.name == "index" else page) / "index.html"
        assert html.is_file(), f"{page}.md was not built"


BROKEN_LINKS = {  # planted link -> what mkdocs --strict says of it
    "[the missing page](no-such-page.md)": "contains a link 'no-such-page.md', but the target is not found",
    "[a missing section](demo.md#no-such-section)": "contains a link 'demo.md#no-such-section', but the doc "
                                                    "'demo.md' does not contain an anchor '#no-such-section'",
    "[the README](../README.md)": "contains a link '../README.md', but the target is not found",
    "[an absolute link](/docs/demo.md)": "contains an absolute link '/docs/demo.md'",
}


@pytest.mark.slow  # one mkdocs build with every planted fault: strict mode reports each warning, then fails
def test_every_planted_fault_fails_the_build_naming_it(site):
    """Broken links (a missing page, a missing anchor, a link out of docs/, an absolute link), a page left out of the
    nav and a nav entry whose page is missing: the build fails and names each one."""
    page = site / "docs" / "options.md"
    page.write_text(page.read_text(encoding="utf-8") + "".join(f"\nSee {link}.\n" for link in BROKEN_LINKS),
                    encoding="utf-8")
    (site / "docs" / "orphan.md").write_text("# A page nobody can reach\n", encoding="utf-8")
    (site / "docs" / "performance.md").unlink()
    result = build(site)
    assert result.returncode != 0
    said = {link: "Doc file 'options.md' " + says in result.stderr for link, says in BROKEN_LINKS.items()}
    assert all(said.values()), (said, result.stderr)
    assert 'not included in the "nav" configuration' in result.stderr and "orphan.md" in result.stderr, result.stderr
    assert "'performance.md' is included in the 'nav' configuration, which is not found" in result.stderr


@pytest.mark.parametrize("page", ["README.md", "docs/options.md"])
def test_the_options_block_is_what_verl_hadw_options_prints(page):
    from verl_hadw.core.options import options_yaml

    text = (ROOT / page).read_text(encoding="utf-8")
    block = text.split("<!-- options:begin -->\n```yaml\n", 1)[1].split("```\n<!-- options:end -->", 1)[0]
    assert block.rstrip("\n") == options_yaml(), f"{page} is stale: paste the output of `verl-hadw options`"

"""The documentation: the configuration reference is the generated one, the README stays a short page with the two
commands CI and newcomers run, and every relative link in the README and docs/ leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

from pyhudi import config_doc

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
# [text](target) and ![alt](target), not inside inline code
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return _LINK.findall(text)


def test_configuration_reference_is_generated() -> None:
    doc = ROOT / config_doc.DOC_PATH
    assert doc.read_text() == config_doc.render(), "docs/configuration.md is out of date: run 'make docs'"


def test_every_option_is_in_the_reference() -> None:
    from pyhudi import config as C

    text = config_doc.render()
    for key in C.OPTIONS:
        assert f"`{key}`" in text, key
    for key in config_doc.EFFECT_NOTES:
        assert key in C.OPTIONS, key


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) < 150


def test_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text


def test_ci_runs_make_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\s*make test\s*$", ci, re.M), ci


def test_relative_links_lead_to_files() -> None:
    broken = []
    for page in [README, *DOCS]:
        for target in _links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor of the same page
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_docs_pages_exist() -> None:
    names = {p.name for p in DOCS}
    assert {"configuration.md", "concurrency.md", "architecture.md"} <= names, names

"""Issue 34 item 12, contract 15 "Docs site": a README a newcomer reads in five minutes, and the
reference as a MkDocs site under docs/ that CI builds with ``mkdocs build --strict``.

The promises checked here: the README is short and leads with the two commands; it says how to
see the demo in the browser; every guide it names is there; every section the README used to
hold is a heading of some docs page (nothing lost in the move); the site's nav lists every page,
the operator's and the 1C administrator's pages Russian first; the runbook opens with the
workbench; CI installs the ``docs`` extra and builds the site strictly."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# The sections the 1,354-line README held before the move (issue 34 item 12): each is now a
# heading of a docs page, under the same words.
FORMER_README_SECTIONS = [
    "1C over HTTP: `exchange serve`",
    "Brokers: RabbitMQ and Redis Streams as ways in, RabbitMQ as a target",
    "The operators' workbench: `exchange serve` at `/`",
    "How 1C writes the staging table",
    "Message identity",
    "Kinds, order and coalescing",
    "States",
    "The site API (what the site team implements)",
    "Batch API",
    "Commands",
    "Bulk actions",
    "Retention",
    "The operators' report",
    "Configuration: how it is read and checked",
    "Monitoring",
    "Notifications to the operators (e-mail, Telegram)",
    "Metrics and health",
    "Logs",
    "Production: PostgreSQL and several workers",
    "What the service guarantees, and what it cannot",
    "Code layout",
]


def _headings(text: str) -> list[str]:
    """Markdown headings outside fenced code (a shell comment in a fence is no heading)."""
    found: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1).strip())
    return found


def _nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names, in order (each nav line ends in ``: page.md``)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r":\s*([\w./-]+\.md)\s*$", nav, flags=re.MULTILINE)


def test_the_readme_is_read_in_five_minutes_and_starts_with_the_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; the reference lives in docs/"
    first_section = next(n for n, line in enumerate(lines) if line.startswith("## "))
    assert lines[first_section] == "## Two commands"
    block = "\n".join(lines[first_section : first_section + 12])
    assert "make demo" in block and "make test" in block


def test_the_readme_says_how_to_see_the_demo_in_the_browser() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## See the demo in the browser") :]
    section = section[: section.index("\n## ", 1)]
    # The three lines: the demo's database, a person to sign in as, serve.
    assert "EXCHANGE_DATABASE_URL=sqlite:///exchange-demo/demo.db" in section
    assert "exchange operator add" in section
    assert "exchange serve" in section and "http://127.0.0.1:8080/" in section


def test_every_guide_the_readme_names_is_there() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    assert links, "the README names no guide"
    for link in links:
        assert (ROOT / link).is_file(), f"README.md links {link}, which is not there"
    named = {link.removeprefix("docs/") for link in links}
    for page in ("runbook.ru.md", "1c.ru.md", "workbench.md", "serve.md", "targets.md"):
        assert page in named, f"the README does not say where {page} is"


def test_every_section_the_readme_held_is_a_docs_page_heading() -> None:
    headings = {
        heading
        for page in DOCS.rglob("*.md")
        for heading in _headings(page.read_text(encoding="utf-8"))
    }
    lost = [section for section in FORMER_README_SECTIONS if section not in headings]
    assert lost == [], f"sections of the former README found in no docs page: {lost}"


def test_the_site_lists_every_page_with_the_russian_pages_first() -> None:
    nav = _nav_pages()
    pages = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))
    assert sorted(nav) == pages, "mkdocs.yml's nav and the pages under docs/ differ"
    assert nav.index("runbook.ru.md") < nav.index("workbench.md")
    assert nav.index("1c.ru.md") < nav.index("serve.md")
    assert nav.index("targets.ru.md") < nav.index("targets.md")


# Issue 34 item 12, "Russian and English where its readers need both": each Russian guide and
# its English translation (the English page bears the plain name, as targets.md does).
TRANSLATED = [("runbook.ru.md", "runbook.md"), ("1c.ru.md", "1c.md")]


def _before_first_section(text: str) -> str:
    return text[: text.index("\n## ")]


def test_each_russian_guide_and_its_translation_link_each_other_at_the_top() -> None:
    nav = _nav_pages()
    for russian, english in TRANSLATED:
        ru_text = (DOCS / russian).read_text(encoding="utf-8")
        en_text = (DOCS / english).read_text(encoding="utf-8")
        assert f"]({english})" in _before_first_section(ru_text), f"{russian} lacks {english}"
        assert f"]({russian})" in _before_first_section(en_text), f"{english} lacks {russian}"
        assert nav.index(english) == nav.index(russian) + 1, f"{english} is not beside {russian}"


def _heading_levels(text: str) -> list[int]:
    """The level of each Markdown heading outside fenced code, in order."""
    levels: list[int] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{1,6}) ", line)):
            levels.append(len(match.group(1)))
    return levels


def _structure(text: str) -> dict[str, object]:
    """What a translation keeps: the heading levels in order, the code blocks and tables, and
    every setting, option and code the reader types or greps for."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return {
        "headings": _heading_levels(text),
        "fences": text.count("\n```"),
        "tables": text.count("\n|---"),
        "settings": set(re.findall(r"EXCHANGE_[A-Z0-9_]+", text)),
        "options": set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)),
        "codes": set(re.findall(r"`([a-z]+-[a-z0-9-]+)`", prose)),
    }


def test_each_translation_keeps_the_structure_settings_and_commands_of_its_original() -> None:
    for russian, english in TRANSLATED:
        original = _structure((DOCS / russian).read_text(encoding="utf-8"))
        translation = _structure((DOCS / english).read_text(encoding="utf-8"))
        for what, kept in original.items():
            assert translation[what] == kept, f"{english} differs from {russian} in its {what}"


def test_the_runbook_opens_with_the_workbench() -> None:
    runbook = (DOCS / "runbook.ru.md").read_text(encoding="utf-8")
    first = next(h for h in _headings(runbook) if not h.startswith("exchange:"))
    assert "рабочего места" in first, first


def test_ci_builds_the_site_strictly_from_the_docs_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert any(requirement.startswith("mkdocs") for requirement in extras["docs"])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "'.[docs]'" in ci and "mkdocs build --strict" in ci

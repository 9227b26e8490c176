"""A simulator's conformance table (docs/simulators/*.md) against its test module, written once
for the marketplace simulators: every row of a table with a research column and a test column
cites the research (a section ``§``, the contract, an issue, or says the research is silent) and
names tests that exist in the module; every test of the module is named in a row, but the guard
itself; every switch given is named (in backquotes) in a row.

A test module's guard::

    def test_the_conformance_table_names_a_test_for_every_row() -> None:
        assert [] == table_problems(DOC, globals(), test_the_conformance_table_..., SWITCHES)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

CITES = ("§", "contract", "issue", "silent")  # what a research cell says (the last: nothing)
TEST = re.compile(r"`(test_\w+)")  # a test's name, its parameters (``[a, b]``) left out


def cells(line: str) -> list[str]:
    """A Markdown table line's cells, stripped; a ``|`` inside backquotes or escaped belongs to
    its cell."""
    found, cell, quoted, escaped = [], "", False, False
    for char in line.strip().removeprefix("|").removesuffix("|"):
        if char == "|" and not quoted and not escaped:
            found.append(cell.strip())
            cell = ""
            continue
        quoted ^= char == "`"
        escaped = char == "\\"
        cell += char
    return [*found, cell.strip()]


def rows(text: str) -> list[tuple[str, dict[str, str]]]:
    """The data rows of every table whose header has a research and a test column: the line,
    and its cells by the header's lower-cased first word (``research``, ``test``, …); no cells
    when the row has not as many as the header."""
    found: list[tuple[str, dict[str, str]]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = [(c.split() or [""])[0].lower() for c in cells(line)]
            continue
        if set(line) <= set("|-: "):
            continue  # the separator
        if {"research", "test"} <= set(header):
            row = cells(line)
            if len(row) != len(header):  # a stray ``|``: said, never read askew
                row = []
            found.append((line, dict(zip(header, row, strict=False))))
    return found


def table_problems(
    doc: Path,
    namespace: Mapping[str, object],
    guard: Callable[[], object],
    switches: Iterable[str] = (),
) -> list[str]:
    """What is wrong between ``doc``'s tables and the tests of ``namespace`` (a module's
    ``globals()``) but ``guard``: one line a problem, none when they agree."""
    found = rows(doc.read_text(encoding="utf-8"))
    if not found:
        return [f"{doc.name}: no table with a research and a test column"]
    here = {n for n, v in namespace.items() if n.startswith("test_") and callable(v)}
    here.discard(guard.__name__)
    problems: list[str] = []
    named: set[str] = set()
    for line, row in found:
        if not row:
            problems.append(f"the row's cells are not the header's: {line}")
            continue
        if not any(word in row["research"] for word in CITES):
            problems.append(f"cites no research: {line}")
        tests = set(TEST.findall(row["test"]))
        if not tests:
            problems.append(f"names no test: {line}")
        problems += [f"names {t}, not a test of the module: {line}" for t in sorted(tests - here)]
        named |= tests
    problems += [f"{t} is in no row of {doc.name}" for t in sorted(here - named)]
    text = "\n".join(line for line, _ in found)
    problems += [f"switch {s} is in no row of {doc.name}" for s in switches if f"`{s}`" not in text]
    return problems

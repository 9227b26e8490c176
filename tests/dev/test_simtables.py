"""The conformance-table guard the marketplace simulators' tests share (tests/support/simtables.py)
says each way a table and its test module can disagree, and nothing when they agree."""

from __future__ import annotations

from pathlib import Path

from simtables import cells, table_problems

TABLE = """# A simulator

| method | what | research |
|---|---|---|
| `POST /x` | no test column: not a conformance table | §1 |

| Behaviour | Research | Switch | Test |
|---|---|---|---|
| Answers `a|b` | §2.1 | `window` | `test_one`, `test_two[x, y]` |
| Its command line | research silent | — | `test_three` |
"""


def guard() -> None: ...


def a_test() -> None: ...


# A test module's globals() as the guard sees them: its tests, and the guard itself.
MODULE = {"test_one": a_test, "test_two": a_test, "test_three": a_test, "guard": guard}


def problems(tmp_path: Path, text: str, **namespace: object) -> list[str]:
    doc = tmp_path / "sim.md"
    doc.write_text(text, encoding="utf-8")
    return table_problems(doc, {**MODULE, **namespace}, guard, ["window"])


def test_a_table_that_agrees_with_its_module_has_no_problem(tmp_path: Path) -> None:
    assert [] == problems(tmp_path, TABLE)


def test_a_pipe_inside_backquotes_stays_in_its_cell() -> None:
    assert ["Answers `a|b`", "§2.1"] == cells("| Answers `a|b` | §2.1 |")


def test_each_disagreement_is_one_line(tmp_path: Path) -> None:
    text = TABLE.replace("| §2.1 |", "| — |").replace("`test_three`", "`test_four`")
    found = problems(tmp_path, text.replace("`window`", "—"), test_five=a_test)
    assert 5 == len(found), found
    assert found[0].startswith("cites no research: | Answers")
    assert found[1].startswith("names test_four, not a test of the module")
    assert ["test_five is in no row of sim.md", "test_three is in no row of sim.md"] == found[2:4]
    assert "switch window is in no row of sim.md" == found[4]


def test_a_row_with_more_cells_than_its_header_is_said(tmp_path: Path) -> None:
    found = problems(tmp_path, TABLE.replace("| research silent |", "| research | silent |"))
    assert any(p.startswith("the row's cells are not the header's") for p in found), found


def test_a_document_without_a_conformance_table_is_said(tmp_path: Path) -> None:
    assert ["sim.md: no table with a research and a test column"] == problems(
        tmp_path, "# nothing\n"
    )

"""``exchange.cli.fit``: a table at the terminal's width with its words whole (issue 32,
mpminor item 2), rendered as the CLI renders it."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from exchange.cli.fit import fit, print_table


def _rendered(table: Table, width: int) -> list[str]:
    buffer = io.StringIO()
    print_table(Console(file=buffer, width=width, soft_wrap=True), table)
    return buffer.getvalue().splitlines()


def test_a_table_wider_than_the_terminal_keeps_every_word_whole() -> None:
    """Promise: where each column's longest word fits, no header or cell is cut mid-word and
    no line is wider than the terminal; the title wraps at the terminal's width."""
    table = Table(
        title="the channels of the installation and what each of them does just now, told"
    )
    for header in ("channel", "delivery", "backlog", "quarantined", "withheld", "live workers"):
        table.add_column(header)
    table.add_row("market (Yandex Market)", "live", "12 (about 3 min)", "0", "1", "1")
    lines = _rendered(table, 70)
    assert max(len(line) for line in lines) <= 70, "\n".join(lines)
    cells = {word for line in lines for cell in line.split("│") for word in cell.split()}
    for word in ("quarantined", "withheld", "workers", "market", "(Yandex", "Market)"):
        assert word in cells or any(word in line for line in lines), "\n".join(lines)
    assert lines[0].startswith("the channels of the installation"), lines[0]


def test_a_table_that_fits_is_left_as_it_is() -> None:
    table = Table()
    table.add_column("state")
    table.add_row("new")
    assert fit(table, 80).columns[0].width is None

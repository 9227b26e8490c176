"""A table made to fit the terminal's width with its words whole (issue 32, mpminor item 2).

rich narrows the widest columns first when a table is wider than the terminal, and cuts words
(a header «quarantin|ed», a worker «test-worker/ap|i») though each word would have fitted in a
narrower layout; a column with a minimum width wider than the terminal leaves (a withheld
price's id) makes the whole table overflow it. ``fit`` sets each column's width itself: at
least its longest word (header and cells), the room left shared in proportion to what each
column's longest line still wants. Where the words cannot all be whole, the widest words fold
first, evenly (an id folded onto the next line, its first line a beginning ``find`` finds it
by; never cut with "…"); only then rich's own narrowing decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

FLOOR = 6  # never narrower than this for a column's sake (a folded word: six cells a line)


def _lines(cell: object) -> list[str]:
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return text.splitlines() or [""]


def _needs(cells: Iterable[object]) -> tuple[int, int]:
    """A column's longest word and its longest line, in terminal cells."""
    word = line = 1
    for cell in cells:
        for text in _lines(cell):
            line = max(line, cell_len(text))
            word = max([word, *(cell_len(w) for w in text.split())])
    return word, line


def fit(table: Table, width: int) -> Table:
    """``table`` with its columns' widths set to fit ``width`` (the terminal's), each word
    whole where they can all be; as it is when it fits already. Returns ``table`` itself."""
    columns = table.columns
    if not columns:
        return table
    left, right = table.padding[3], table.padding[1]
    frame = (len(columns) + 1 if table.box is not None else 0) + len(columns) * (left + right)
    room = width - frame
    needs = [_needs([column.header, *column._cells]) for column in columns]
    words = [word for word, _line in needs]
    lines = [max(word, line) for word, line in needs]
    if sum(lines) <= room:
        return table  # rich lays it out on one line a cell
    while sum(words) > room:  # the widest word folds first: the widest ones end alike
        widest = max(range(len(words)), key=lambda i: words[i])
        if words[widest] <= FLOOR:
            break
        words[widest] -= 1
    if sum(words) > room:
        return table  # no layout keeps the words whole: rich's own narrowing
    spare = room - sum(words)
    wants = [line - word for word, line in zip(words, lines, strict=True)]
    wanted = sum(wants)
    widths = [
        word + (spare * want // wanted if wanted else 0)
        for word, want in zip(words, wants, strict=True)
    ]
    for column, shown in zip(columns, widths, strict=True):
        column.width = shown
        column.overflow = "fold"  # a word wider than its column: on the next line, never "…"
    return table


def print_table(console: Console, table: Table) -> None:
    """``table`` at ``console``'s width (``fit``), its title printed above it at the left and
    wrapped between words at that width (a title is otherwise wrapped at the table's own width,
    or, with the CLI's soft wrap, not at all)."""
    title, table.title = table.title, None
    if title:
        console.print(title, style="table.title", markup=False, highlight=False, soft_wrap=False)
    console.print(fit(table, console.width), soft_wrap=False)

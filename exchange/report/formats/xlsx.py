"""The report as an Excel workbook (openpyxl): a summary sheet, the detail sheet, the history.

Every text cell from the data is written as a string cell (``data_type = "s"``): openpyxl
would otherwise store ``=HYPERLINK(…)`` as a formula and ``#N/A`` as an error. Formula-like
text also gets Excel's quote prefix, so that it stays text when someone edits the cell.
Dates are real dates (naive UTC, the column says so) with a date format; characters that XML
cannot carry are dropped; values longer than a cell holds are cut with a note.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.cell.cell import Cell as XlCell
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.worksheet._write_only import WriteOnlyWorksheet

from exchange.report.model import Lang, Report
from exchange.report.words import (
    HISTORY_COLUMNS,
    Cell,
    detail_columns,
    detail_row,
    fit_cell,
    history_rows,
    label,
    looks_like_formula,
    summary_next_check,
    summary_rows,
)

# Dates as each language writes them (a Russian reader's 05.12.2026); the cell stays a real date.
DATETIME_FORMAT: dict[Lang, str] = {"ru": "dd.mm.yyyy hh:mm:ss", "en": "yyyy-mm-dd hh:mm:ss"}
DATE_FORMAT: dict[Lang, str] = {"ru": "dd.mm.yyyy", "en": "yyyy-mm-dd"}
HEADER_FONT = Font(bold=True)
HEADER_FILL = PatternFill("solid", fgColor="DDE4EE")
TITLE_FONT = Font(bold=True, size=14)
WRAPPED = Alignment(vertical="top", wrap_text=True)
# Widths in characters: wide enough for typical values, narrow enough to see a whole row.
MAX_WIDTH: dict[str, int] = {
    "message_id": 48,
    "last_result": 60,
    "next_check": 60,
    "source_ref": 40,
    "payload": 80,
    "detail": 70,
    "note": 40,
}
DEFAULT_MAX_WIDTH = 28
WRAP = {"next_check"}
SAMPLE_ROWS = 300  # enough rows to size a column by; the rest look alike


def _text(value: str, lang: Lang) -> str:
    return fit_cell(ILLEGAL_CHARACTERS_RE.sub("", value), lang)


def cell(
    ws: WriteOnlyWorksheet,
    value: Cell | date,
    lang: Lang,
    *,
    wrap: bool = False,
    zone: str = "UTC",
) -> XlCell:
    """One value: text as a string cell, times as dates, numbers as numbers.

    Styles are set only where they say something (dates, wrapping, formula-like text): each
    style assignment costs openpyxl a lookup, and a large quarantine has a million cells.
    """
    out = WriteOnlyCell(ws)
    if isinstance(value, str):
        text = _text(value, lang)
        out.value = text
        out.data_type = "s"
        if looks_like_formula(text):
            out.quotePrefix = True
    elif isinstance(value, datetime):
        # Excel has no time zones: the wall time in the report's zone, its label names it
        out.value = value.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        out.number_format = DATETIME_FORMAT[lang]
    elif isinstance(value, date):
        out.value = value
        out.number_format = DATE_FORMAT[lang]
    else:
        out.value = value
    if wrap:
        out.alignment = WRAPPED
    return out


def _heading(ws: WriteOnlyWorksheet, names: Sequence[str], lang: Lang) -> list[XlCell]:
    cells = []
    for name in names:
        c = cell(ws, name, lang)
        c.font, c.fill = HEADER_FONT, HEADER_FILL
        cells.append(c)
    return cells


def _layout(ws: WriteOnlyWorksheet) -> Any:
    """The sheet's columns and filter: openpyxl sets them up on streamed sheets too, but its
    type stubs list them only on ordinary ones."""
    return ws


def _width(value: object) -> int:
    if isinstance(value, datetime):
        return 19
    text = "" if value is None else str(value)
    return max((len(line) for line in text.splitlines()), default=0)


def column_widths(
    keys: Sequence[str], header: Sequence[str], rows: Sequence[Sequence[object]]
) -> list[int]:
    """Each column as wide as its header and its longest sampled value, within a cap."""
    widths = []
    for i, key in enumerate(keys):
        longest = max((_width(row[i]) for row in rows[:SAMPLE_ROWS]), default=0)
        cap = MAX_WIDTH.get(key, DEFAULT_MAX_WIDTH)
        widths.append(min(max(len(header[i]), longest, 6) + 2, cap))
    return widths


def _table(
    ws: WriteOnlyWorksheet,
    keys: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    lang: Lang,
    zone: str = "UTC",
) -> None:
    header = [label(key, lang, zone) for key in keys]
    # A streamed sheet writes its columns and panes before its rows: set them first.
    for c, width in enumerate(column_widths(keys, header, rows), start=1):
        _layout(ws).column_dimensions[get_column_letter(c)].width = width
    ws.freeze_panes = "A2"  # the header stays in view while scrolling
    _layout(ws).auto_filter.ref = f"A1:{get_column_letter(len(keys))}{len(rows) + 1}"
    ws.append(_heading(ws, header, lang))
    wrapped = [key in WRAP for key in keys]
    for values in rows:
        ws.append(
            [cell(ws, v, lang, wrap=w, zone=zone) for v, w in zip(values, wrapped, strict=True)]
        )


def _summary_sheet(ws: WriteOnlyWorksheet, report: Report, lang: Lang) -> None:
    for column, width in (("A", 44), ("B", 36), ("C", 80)):
        _layout(ws).column_dimensions[column].width = width
    title = cell(ws, label("title", lang), lang)
    title.font = TITLE_FONT
    ws.append([title])
    ws.append([])
    for name, value in summary_rows(report, lang):
        key = cell(ws, name, lang)
        key.font = HEADER_FONT
        ws.append([key, cell(ws, value, lang, zone=report.zone)])
    ws.append([])
    ws.append(_heading(ws, [label(k, lang) for k in ("reason", "count", "next_check")], lang))
    for reason, count in report.summary.by_reason.items():
        ws.append(
            [
                cell(ws, reason, lang),
                cell(ws, count, lang),
                cell(ws, summary_next_check(report, reason, lang), lang, wrap=True),
            ]
        )
    ws.append([])
    heading = cell(ws, label("activity", lang, report.zone), lang)
    heading.font = HEADER_FONT
    ws.append([heading])
    ws.append(
        _heading(ws, [label(k, lang, report.zone) for k in ("day", "delivered", "failed")], lang)
    )
    for day in report.activity:
        ws.append(
            [cell(ws, day.day, lang), cell(ws, day.delivered, lang), cell(ws, day.failed, lang)]
        )


def render_xlsx(report: Report, lang: Lang) -> bytes:
    # Write-only: rows stream to the file instead of living in memory as cell objects.
    workbook = Workbook(write_only=True)
    workbook.properties.creator = "exchange"
    workbook.properties.title = label("title", lang)
    workbook.properties.created = report.generated_at.astimezone(UTC).replace(tzinfo=None)
    _summary_sheet(workbook.create_sheet(label("summary_sheet", lang)), report, lang)
    detail = workbook.create_sheet(label("detail_sheet", lang))
    _table(
        detail,
        detail_columns(report),
        [detail_row(e, lang, report.steps, detail_columns(report)) for e in report.entries],
        lang,
        report.zone,
    )
    history = workbook.create_sheet(label("history_sheet", lang))
    _table(
        history,
        HISTORY_COLUMNS,
        [r for e in report.entries for r in history_rows(e, lang)],
        lang,
        report.zone,
    )
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()

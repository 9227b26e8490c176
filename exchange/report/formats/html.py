"""The report as one self-contained HTML page: readable on a laptop, printable, nothing fetched.

No script, no external font, stylesheet or image: the charts are inline SVG
(``report_svg``), the styles are inline, and a Content-Security-Policy forbids everything
else, so that even a mistake in escaping could not run anything. Every value from the data
goes through ``_e`` (``html.escape`` after dropping control characters), whatever its field.
Each message's history is folded under its row in ``<details>``: open without JavaScript.
"""

from __future__ import annotations

import re
from datetime import datetime
from html import escape

from exchange.i18n import day as day_words
from exchange.report.formats.svg import activity_chart, bar_chart
from exchange.report.model import Entry, HistoryEvent, Lang, Report
from exchange.report.words import (
    answer_said,
    clock_time,
    describe_filters,
    entry_next_check,
    history_words,
    human_age,
    kind_words,
    label,
    result_words,
    story_waits,
    summary_next_check,
    summary_target,
)
from exchange.words import error_words, name

# C0 controls other than tab, LF and CR are not allowed in HTML text (NUL turns into U+FFFD
# or is dropped, depending on the parser): drop them all, so every browser shows the same.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# The main row of each entry, with each column's share of the width. A fixed table layout:
# with an automatic one, a 10,000-character value would squeeze every other column.
MAIN_COLUMNS: dict[str, int] = {
    "message_id": 14,
    "kind": 8,
    "aggregate": 9,
    "version": 6,
    "reason": 9,
    "attempts": 7,
    "first_seen": 8,
    "last_attempt": 8,
    "quarantined_at": 8,
    "last_result": 12,
    "source_ref": 11,
}
# With more than one channel registered (contract 13): the channel after the message's id.
CHANNEL_COLUMNS: dict[str, int] = {
    "message_id": 12,
    "channel": 6,
    **{key: share for key, share in MAIN_COLUMNS.items() if key != "message_id"},
    "source_ref": 7,
}


def main_columns(report: Report) -> dict[str, int]:
    """The main row's columns and their shares of the width."""
    return CHANNEL_COLUMNS if report.several_channels else MAIN_COLUMNS


CSS = """
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d7dce1; --soft: #f3f5f8; --accent: #1f5fa8;
        --warn: #8a5300; --warn-bg: #fff3d6; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1500px; padding: 20px 24px 40px; color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; }
h3 { font-size: 14px; margin: 12px 0 6px; }
.meta { color: var(--muted); margin: 0 0 16px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 200px;
        background: var(--soft); }
.card .n { font-size: 24px; font-weight: 600; }
.card .l { color: var(--muted); font-size: 12px; }
.charts { margin-top: 20px; display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.charts figure { margin: 0; }
.charts figcaption { font-weight: 600; margin-bottom: 6px; }
svg.chart { max-width: 100%; height: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid var(--line); padding: 4px 6px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: var(--soft); font-weight: 600; }
table.entries { table-layout: fixed; }
table.entries td { overflow-wrap: anywhere; }
table.entries th { font-size: 13px; hyphens: auto; }
table.reasons th:nth-child(-n+2), table.reasons td:nth-child(-n+2) { white-space: nowrap; }
thead { display: table-header-group; }
td.num { text-align: right; white-space: nowrap; }
td.time { font-variant-numeric: tabular-nums; }
.mono, pre { font-family: ui-monospace, "Cascadia Mono", Consolas, "DejaVu Sans Mono",
             monospace; font-size: 12px; }
.v { max-height: 9em; overflow: auto; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 12em;
      overflow: auto; background: var(--soft); padding: 6px; border-radius: 4px; }
tbody.entry { break-inside: avoid; }
tbody.entry tr.main td { border-top: 2px solid #aab3bd; }
tr.more td { background: #fff; }
tbody.superseded tr.main td { background: var(--warn-bg); }
.badge { display: inline-block; margin-left: 4px; padding: 0 6px; border-radius: 8px;
         background: var(--warn-bg); color: var(--warn); border: 1px solid #e0b25c;
         font-size: 11px; white-space: nowrap; }
.next { margin: 2px 0 6px; }
details { margin-top: 6px; }
summary { cursor: pointer; color: var(--accent); }
table.history { margin-top: 6px; font-size: 12px; }
table.small { width: auto; }
.chart-empty, .empty { color: var(--muted); }
@page { size: A4 landscape; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 10px; }
  .card { background: none; }
  .v, pre { max-height: none; overflow: visible; }
  h2 { break-after: avoid; }
  summary { color: var(--fg); }
  details::details-content { content-visibility: visible; display: block; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""

# Even a mistake in escaping could not load or run anything: no scripts, no requests.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'"


def _e(value: object) -> str:
    """Any value as HTML text: nothing from the data ever becomes markup."""
    if value is None:
        return ""
    return escape(_CONTROL.sub("", str(value)), quote=True)


def _time(value: object, zone: str, lang: Lang) -> str:
    if not isinstance(value, datetime):
        return ""
    return f'<time datetime="{_e(value.isoformat())}">{_e(clock_time(value, zone, lang))}</time>'


def _cell(key: str, entry: Entry, lang: Lang, zone: str) -> str:
    match key:
        case "message_id":
            return f'<td class="mono"><div class="v">{_e(entry.message_id)}</div></td>'
        case "channel":
            return f'<td class="mono"><div class="v">{_e(entry.channel or "—")}</div></td>'
        case "version" | "attempts":
            return f'<td class="num">{_e(getattr(entry, key))}</td>'
        case "first_seen" | "last_attempt" | "quarantined_at":
            return f'<td class="time">{_time(getattr(entry, key), zone, lang)}</td>'
        case "reason":
            badge = (
                f' <span class="badge" title="{_e(label("superseded_after_quarantine", lang))}">'
                f"{_e(label('superseded_badge', lang))}</span>"
                if entry.superseded_after_quarantine
                else ""
            )
            # The reason in the workbench's words, its code beside («сайт отклонил (http-422)»).
            return f"<td>{_e(name('reason', entry.reason, lang, entry.target))}{badge}</td>"
        case "kind":
            return f'<td><div class="v">{_e(kind_words(entry.kind, lang))}</div></td>'
        case "last_result":
            return f'<td><div class="v">{_e(result_words(entry, lang))}</div></td>'
        case _:
            return f'<td><div class="v">{_e(getattr(entry, key))}</div></td>'


def _history(events: tuple[HistoryEvent, ...], lang: Lang, zone: str) -> str:
    head = "".join(
        f"<th>{_e(label(k, lang, zone))}</th>"
        for k in (
            "at",
            "event",
            "from",
            "to",
            "worker",
            "attempt",
            "leased_at",
            "lease_until",
            "http_or_error",
            "detail",
        )
    )
    rows = []
    for ev, waits in zip(events, story_waits(events), strict=True):
        detail = _e(error_words(ev.detail, lang) if ev.detail else ev.detail)
        if ev.operator or ev.note:
            detail += f" <b>[{_e(ev.operator)}: {_e(ev.note)}]</b>"
        answer = answer_said(ev.http_status, ev.error_class, lang)
        event, from_state, to_state = history_words(
            ev.event, ev.from_state, ev.to_state, lang, waits, ev.detail
        )
        rows.append(
            f'<tr><td class="time">{_time(ev.at, zone, lang)}</td><td>{_e(event)}</td>'
            f"<td>{_e(from_state)}</td><td>{_e(to_state)}</td><td>{_e(ev.worker)}</td>"
            f'<td class="num">{_e(ev.attempt)}</td>'
            f'<td class="time">{_time(ev.leased_at, zone, lang)}</td>'
            f'<td class="time">{_time(ev.lease_until, zone, lang)}</td>'
            f"<td>{_e(answer)}</td>"
            f'<td><div class="v">{detail}</div></td></tr>'
        )
    return (
        f'<table class="history"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _entry(
    entry: Entry,
    lang: Lang,
    zone: str,
    steps: dict[str, str] | None,
    columns: dict[str, int] = MAIN_COLUMNS,
) -> str:
    kind = "entry superseded" if entry.superseded_after_quarantine else "entry"
    cells = "".join(_cell(key, entry, lang, zone) for key in columns)
    # One message quarantined on two channels is two entries: each its own anchor.
    anchor = entry.message_id if "channel" not in columns else f"{entry.message_id}@{entry.channel}"
    marker = (
        f"<p><b>{_e(label('superseded_after_quarantine', lang))}:</b> {_e(label('yes', lang))}</p>"
        if entry.superseded_after_quarantine
        else ""
    )
    return (
        f'<tbody class="{kind}" id="m-{_e(anchor)}">'
        f'<tr class="main">{cells}</tr>'
        f'<tr class="more"><td colspan="{len(columns)}">'
        f'{marker}<p class="next"><b>{_e(label("next_check", lang))}:</b> '
        f"{_e(entry_next_check(entry, lang, steps))}</p>"
        f"<h3>{_e(label('payload', lang))}</h3><pre>{_e(entry.payload)}</pre>"
        f"<details><summary>{_e(label('history', lang))} ({len(entry.history)})</summary>"
        f"{_history(entry.history, lang, zone)}</details>"
        "</td></tr></tbody>"
    )


def _summary(report: Report, lang: Lang) -> str:
    s = report.summary
    cards = [
        (str(s.total), label("total", lang)),
        (
            human_age(s.oldest_age_s, lang),
            f"{label('oldest_age', lang)}"
            + (
                f" ({clock_time(s.oldest_quarantined_at, report.zone, lang)} {report.zone})"
                if s.oldest_quarantined_at
                else ""
            ),
        ),
        (str(s.superseded_after_quarantine), label("superseded_total", lang)),
        *([(str(report.withheld), label("withheld", lang))] if report.withheld else []),
    ]
    card_html = "".join(
        f'<div class="card"><div class="n">{_e(n)}</div><div class="l">{_e(lbl)}</div></div>'
        for n, lbl in cards
    )
    reasons = "".join(
        f"<tr><td>{_e(name('reason', reason, lang, summary_target(report, reason)))}</td>"
        f'<td class="num">{count}</td>'
        # one advice a line where the row's channels take different ones
        f"<td>{_e(summary_next_check(report, reason, lang)).replace(chr(10), '<br>')}</td></tr>"
        for reason, count in s.by_reason.items()
    )
    reason_table = (
        f'<table class="reasons"><thead><tr><th>{_e(label("reason", lang))}</th>'
        f"<th>{_e(label('count', lang))}</th><th>{_e(label('next_check', lang))}</th></tr>"
        f"</thead><tbody>{reasons}</tbody></table>"
        if s.by_reason
        else f'<p class="empty">{_e(label("empty", lang))}</p>'
    )
    return (
        f'<div class="cards">{card_html}</div><h2>{_e(label("by_reason", lang))}</h2>{reason_table}'
    )


def _charts(report: Report, lang: Lang) -> str:
    by_reason = bar_chart(
        # Each reason in the words the reasons' table and the entries use, its code beside.
        [
            (name("reason", reason, lang, summary_target(report, reason)), count)
            for reason, count in report.summary.by_reason.items()
        ],
        title=label("by_reason", lang),
        empty=label("empty", lang),
    )
    activity = activity_chart(
        report.activity,
        title=label("activity", lang, report.zone),
        delivered=label("delivered", lang),
        failed=label("failed", lang),
        day_format="%d.%m" if lang == "ru" else "%m-%d",
        lang=lang,
    )
    numbers = "".join(
        f'<tr><td class="time">{_e(day_words(d.day, lang))}</td><td class="num">{d.delivered}</td>'
        f'<td class="num">{d.failed}</td></tr>'
        for d in report.activity
    )
    return (
        '<div class="charts">'
        f"<figure><figcaption>{_e(label('by_reason', lang))}</figcaption>{by_reason}</figure>"
        f"<figure><figcaption>{_e(label('activity', lang, report.zone))}</figcaption>{activity}"
        f"<details><summary>{_e(label('numbers', lang))}</summary>"
        f'<table class="small"><thead><tr><th>{_e(label("day", lang, report.zone))}</th>'
        f"<th>{_e(label('delivered', lang))}</th><th>{_e(label('failed', lang))}</th></tr>"
        f"</thead><tbody>{numbers}</tbody></table></details></figure>"
        "</div>"
    )


def _entries(report: Report, lang: Lang) -> str:
    if not report.entries:
        return f'<p class="empty">{_e(label("empty", lang))}</p>'
    columns = main_columns(report)
    cols = "".join(f'<col style="width:{share}%">' for share in columns.values())
    head = "".join(f"<th>{_e(label(key, lang, report.zone))}</th>" for key in columns)
    body = "".join(
        _entry(entry, lang, report.zone, report.steps, columns) for entry in report.entries
    )
    return (
        f'<table class="entries"><colgroup>{cols}</colgroup>'
        f"<thead><tr>{head}</tr></thead>{body}</table>"
    )


def render_html(report: Report, lang: Lang) -> bytes:
    title = label("title", lang)
    meta = (
        f"{_e(label('generated_at', lang, report.zone))}: "
        f"{_time(report.generated_at, report.zone, lang)} · "
        f"{_e(label('filters', lang))}: {_e(describe_filters(report, lang))}"
    )
    page = (
        "<!DOCTYPE html>\n"
        f'<html lang="{_e(lang)}"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="exchange">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><p class="meta">{meta}</p></header>'
        f"<main><section>{_summary(report, lang)}</section>"
        f"<section>{_charts(report, lang)}</section>"
        f"<section><h2>{_e(label('entries', lang))} ({len(report.entries)})</h2>"
        f"{_entries(report, lang)}</section></main></body></html>\n"
    )
    return page.encode("utf-8")

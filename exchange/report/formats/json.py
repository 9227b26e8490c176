"""The report as JSON, for machines. The field names are stable (docs/report.md, "The operators'
report"): each entry keeps every field of ``exchange quarantine list --json`` and adds its own.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from exchange.report.model import Entry, HistoryEvent, Lang, Report
from exchange.report.words import entry_next_check


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def history_json(event: HistoryEvent) -> dict[str, Any]:
    """The same fields as ``exchange history --json``."""
    return {
        "at": event.at.isoformat(),
        "event": event.event,
        "from": event.from_state,
        "to": event.to_state,
        "worker": event.worker,
        "attempt": event.attempt,
        "leased_at": _iso(event.leased_at),
        "lease_until": _iso(event.lease_until),
        "http_status": event.http_status,
        "error_class": event.error_class,
        "delay_s": event.delay_s,
        "detail": event.detail,
        "operator": event.operator,
        "note": event.note,
    }


def entry_json(entry: Entry, lang: Lang, steps: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        # the fields of `exchange quarantine list --json`
        "message_id": entry.message_id,
        "channel": entry.channel,  # contract 13; None for intake's rejected record
        "kind": entry.kind,
        "aggregate": entry.aggregate,
        "version": entry.version,
        "reason": entry.reason,
        "attempts": entry.attempts,
        "last_status": entry.last_status,
        "last_error": entry.last_error,
        "source_ref": entry.source_ref,
        "first_seen": entry.first_seen.isoformat(),
        "quarantined_at": entry.quarantined_at.isoformat(),
        "rejected_row": entry.rejected_row,
        "staging_id": entry.staging_id,
        # the report's own
        "last_attempt": _iso(entry.last_attempt),
        "superseded_after_quarantine": entry.superseded_after_quarantine,
        # `quarantine list --json`'s too: 1C has sent a newer version since
        "newer_version_sent": entry.newer_version_sent,
        "newer_version_held": entry.newer_version_held,
        "newer_version_withheld": entry.newer_version_withheld,
        "next_check": entry_next_check(entry, lang, steps),
        "payload": entry.payload,
        "history": [history_json(event) for event in entry.history],
    }


def report_json(report: Report, lang: Lang) -> dict[str, Any]:
    s = report.summary
    f = report.filters
    return {
        "generated_at": report.generated_at.isoformat(),
        "lang": lang,
        "filters": {
            "kind": f.kind,
            "aggregate": f.aggregate,
            "search": f.search,
            "reason": f.reason,
            "since": _iso(f.since),
            "until": _iso(f.until),
            "superseded_after_quarantine": f.superseded_after_quarantine,
        },
        "summary": {
            "total": s.total,
            "by_reason": s.by_reason,
            "oldest_age_s": s.oldest_age_s,
            "oldest_quarantined_at": _iso(s.oldest_quarantined_at),
            "superseded_after_quarantine": s.superseded_after_quarantine,
            "withheld": report.withheld,
        },
        "activity": [
            {"day": d.day.isoformat(), "delivered": d.delivered, "failed": d.failed}
            for d in report.activity
        ],
        "entries": [entry_json(entry, lang, report.steps) for entry in report.entries],
    }


def render_json(report: Report, lang: Lang) -> bytes:
    text = json.dumps(report_json(report, lang), ensure_ascii=False, indent=2)
    return (text + "\n").encode("utf-8")

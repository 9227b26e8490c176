"""The operators' report (contract 8): read the quarantine once, render it in any format.

    collect(connection, filters, now, …) -> Report        the queries; masking happens here
    render(report, fmt, lang) -> bytes                    pure: report_csv / _xlsx / _html / _json
    export(report, fmt, lang, path)                       written atomically

``report_schedule`` writes it on a schedule from ``exchange run``. Which messages are listed,
in which order and under which filters is ``quarantine.list_quarantined``'s decision; this
module adds what only the report shows: the payload (masked), the history, the time of the last
attempt, and deliveries and failures per day.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from secrets import token_hex
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, case, func, select

from exchange.db.on_channels import (
    Channel,
    channel_ids,
    channel_names,
    channel_targets,
    listed,
)
from exchange.db.schema import deliveries, history
from exchange.domain.states import Event, State
from exchange.ops.quarantine import Filters, list_quarantined
from exchange.report.formats.csv import render_csv
from exchange.report.formats.html import render_html
from exchange.report.formats.json import render_json
from exchange.report.mask import Redactor
from exchange.report.model import (
    FORMATS,
    LANGS,
    SUFFIXES,
    DayActivity,
    Entry,
    HistoryEvent,
    Lang,
    Report,
    ReportFormat,
)
from exchange.report.words import next_check
from exchange.settings import Settings

__all__ = [
    "FORMATS",
    "LANGS",
    "SUFFIXES",
    "Lang",
    "Report",
    "ReportFormat",
    "activity",
    "collect",
    "export",
    "export_json",
    "format_for",
    "known_secrets",
    "next_check",
    "render",
    "write_atomically",
]

ACTIVITY_DAYS = 14
DELIVERED_EVENTS = (Event.DELIVERED.value,)
# An attempt that did not deliver: retried later, quarantined, or lost with its lease.
FAILED_EVENTS = (Event.RETRY_SCHEDULED.value, Event.QUARANTINED.value, Event.LEASE_EXPIRED.value)
CHUNK = 500  # ids per IN (…): far below SQLite's and PostgreSQL's parameter limits


def render_xlsx(report: Report, lang: Lang) -> bytes:
    # openpyxl is imported when a workbook is asked for, not by every command that imports
    # the reports (it is the largest import of `exchange --help`).
    from exchange.report.formats.xlsx import render_xlsx as render

    return render(report, lang)


RENDERERS: dict[ReportFormat, Callable[[Report, Lang], bytes]] = {
    "csv": render_csv,
    "xlsx": render_xlsx,
    "html": render_html,
    "json": render_json,
}


def collect(
    connection: Connection,
    filters: Filters,
    now: datetime,
    *,
    mask_fields: Iterable[str] = (),
    secrets: Iterable[str | None] = (),
    activity_days: int = ACTIVITY_DAYS,
    zone: str = "UTC",
) -> Report:
    """Everything the report shows, masked, read in one transaction.

    ``secrets`` (the site token, the database password) are scrubbed from every text should
    they turn up in data; ``mask_fields`` are the payload fields shown as ``***``.
    """
    redactor = Redactor(mask_fields, secrets)
    rows = list_quarantined(connection, filters)
    extras = _extras(connection, [row["message_id"] for row in rows], filters.channel)
    targets = channel_targets(connection)
    names = channel_names(connection)
    several = len(names) > 1
    entries = tuple(
        _entry(
            row,
            extras[row["message_id"]],
            redactor,
            targets.get(row["channel"] or ""),
            names=names,
            several=several,
        )
        for row in rows
        # left quarantine between the two reads (PostgreSQL read committed): not listed
        if row["message_id"] in extras
    )
    return Report(
        generated_at=now,
        entries=entries,
        filters=filters,
        activity=activity(connection, now, activity_days, zone),
        zone=zone,
        withheld=withheld_count(connection),
        several_channels=several,
    )


def withheld_count(connection: Connection) -> int:
    """How many deliveries the channel withholds from buyers now (contract 13)."""
    counted = connection.execute(
        select(func.count())
        .select_from(deliveries)
        .where(deliveries.c.state == State.WITHHELD.value)
    ).scalar_one()
    return int(counted)


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _extras(
    connection: Connection, ids: Sequence[str], channel: Channel = None
) -> dict[str, dict[str, Any]]:
    """Payload and history of each listed message still quarantined on ``channel`` (every
    channel for None; a rejected record whatever the channel): two queries per chunk of
    ids."""
    found: dict[str, dict[str, Any]] = {}
    quarantined = listed(channel_ids(connection, channel), states=[State.QUARANTINED.value])
    for chunk in _chunks(ids):
        by_pk: dict[int, dict[str, Any]] = {}
        query = select(quarantined.c.id, quarantined.c.message_id, quarantined.c.payload).where(
            quarantined.c.message_id.in_(list(chunk)),
            quarantined.c.state == State.QUARANTINED.value,
        )
        for pk, message_id, payload in connection.execute(query):
            if pk in by_pk:  # quarantined on more than one channel: one message's extras
                continue
            extra = {"payload": payload, "history": []}
            found[message_id] = by_pk[pk] = extra
        if not by_pk:
            continue
        events = connection.execute(
            select(history)
            .where(history.c.message_pk.in_(list(by_pk)))
            .order_by(history.c.message_pk, history.c.id)
        ).mappings()
        for event in events:
            by_pk[event["message_pk"]]["history"].append(dict(event))
    return found


def _entry(
    row: dict[str, Any],
    extra: dict[str, Any],
    redactor: Redactor,
    target: str | None = None,
    *,
    names: dict[int, str] | None = None,
    several: bool = False,
) -> Entry:
    """``names``: the channels' names by id: a channel's entry's history is its channel's
    rows and 1C's (no channel's), never another channel's (seller 34 item 4: an Ozon entry
    listed the site's «доставлено» and its last attempt was another channel's)."""
    payload, hidden = redactor.payload(extra["payload"])
    own = row["channel"]
    events = [
        HistoryEvent(
            at=e["at"],
            event=e["event"],
            from_state=e["from_state"],
            to_state=e["to_state"],
            worker=e["worker"],
            attempt=e["attempt"],
            leased_at=e["leased_at"],
            lease_until=e["lease_until"],
            http_status=e["http_status"],
            error_class=e["error_class"],
            delay_s=e["delay_s"],
            detail=redactor.optional(e["detail"], hidden),
            operator=e["operator"],
            note=redactor.optional(e["note"], hidden),
            channel_id=e["channel_id"],
        )
        for e in extra["history"]
        if own is None or e["channel_id"] is None or (names or {}).get(e["channel_id"]) == own
    ]
    return Entry(
        message_id=row["message_id"],
        channel=row["channel"],
        target=target,
        kind=row["kind"],
        aggregate=row["aggregate"],
        version=row["version"],
        reason=row["reason"],
        attempts=row["attempts"],
        last_status=row["last_status"],
        last_error=redactor.optional(row["last_error"], hidden),
        source_ref=redactor.optional(row["source_ref"], hidden),
        first_seen=datetime.fromisoformat(row["first_seen"]),
        quarantined_at=datetime.fromisoformat(row["quarantined_at"]),
        rejected_row=row["rejected_row"],
        staging_id=row["staging_id"],
        payload=payload,
        # "last attempt": the last event that carries an attempt number (an attempt's row,
        # written when it ended)
        last_attempt=max((e.at for e in events if e.attempt is not None), default=None),
        # quarantine.superseded_after_quarantine decides it, the same test that
        # `quarantine cancel --superseded` uses: what the report marks is what that cancels
        superseded_after_quarantine=row["superseded_after_quarantine"],
        # quarantine.newer_sent decides it, as for the message's page and the quarantine's list
        newer_version_sent=row["newer_version_sent"],
        newer_version_held=row["newer_version_held"],
        newer_version_withheld=row["newer_version_withheld"],
        history=tuple(events),
        several_channels=several,
    )


def activity(
    connection: Connection, now: datetime, days: int = ACTIVITY_DAYS, zone: str = "UTC"
) -> tuple[DayActivity, ...]:
    """Deliveries and failed attempts per day of ``zone`` (the display zone, whose label the
    report names), the last ``days`` days (today included). Each day's bounds are its local
    midnights in UTC, so a day is right in any zone, a half-hour offset or a DST change
    included, on both databases."""
    local = ZoneInfo(zone)
    today = now.astimezone(local).date()
    dates = [today - timedelta(days=days - 1 - i) for i in range(days + 1)]
    bounds = [datetime.combine(d, time(), tzinfo=local).astimezone(UTC) for d in dates]
    index = case(*((history.c.at < bound, i) for i, bound in enumerate(bounds[1:])), else_=days)
    rows = connection.execute(
        select(index, history.c.event, func.count())
        .where(
            history.c.at >= bounds[0],
            history.c.event.in_([*DELIVERED_EVENTS, *FAILED_EVENTS]),
        )
        .group_by(index, history.c.event)
    ).all()
    delivered: dict[int, int] = {}
    failed: dict[int, int] = {}
    for i, event, count in rows:
        target = delivered if event in DELIVERED_EVENTS else failed
        target[int(i)] = target.get(int(i), 0) + count
    return tuple(DayActivity(dates[i], delivered.get(i, 0), failed.get(i, 0)) for i in range(days))


def render(report: Report, fmt: ReportFormat, lang: Lang) -> bytes:
    return RENDERERS[fmt](report, lang)


def write_atomically(path: Path, data: bytes) -> None:
    """Readers see the old file or the new one, never half of one: write aside, then rename.

    The temporary file sits in the same directory (a rename across file systems is a copy) and
    is created with ``open(…, "xb")`` rather than ``mkstemp``, so that it gets the process's
    umask like any file the service writes, not mkstemp's private 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # the rename must not reach the disk before the data
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def format_for(path: Path) -> ReportFormat:
    """The format an output file's name asks for (``report.html`` -> html); json otherwise."""
    suffix = path.suffix.lower()
    return next((fmt for fmt, known in SUFFIXES.items() if known == suffix), "json")


def known_secrets(settings: Settings) -> list[str]:
    """What must never appear in a report even if 1C or the site put it into the data: the
    site token and the database passwords. A token file that cannot be read is not an error
    here (the export needs no token); ``exchange run`` reports it."""
    return settings.secrets()


def export(report: Report, fmt: ReportFormat, lang: Lang, path: Path) -> None:
    write_atomically(path, render(report, fmt, lang))


def export_json(report: Report, path: Path, lang: Lang = "ru") -> None:
    export(report, "json", lang, path)

"""What ``exchange status`` and ``exchange history`` show: read-only queries, and the tables
``exchange status`` prints.

The figures (``status``) are data, printed as JSON as they are; ``tables`` lays the same
figures out for a person. Every value from the database goes into a table as ``Text``, never
as rich markup: a message id or a site's error text with ``[brackets]`` is shown as it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rich.table import Table
from rich.text import Text
from sqlalchemy import Connection, case, func, not_, select
from sqlalchemy.orm import aliased

from exchange.db.schema import Message, aggregates, history, messages, workers
from exchange.domain.clock import ensure_utc, local_time
from exchange.domain.policy import KindPolicies
from exchange.domain.states import LIVE, PENDING, Event, State, values
from exchange.errors import ExchangeError, OperatorError
from exchange.i18n import Lang, _, ngettext, number
from exchange.intake.sources.common import Source
from exchange.ops.find import held, held_condition
from exchange.queue import order

RECENT = timedelta(minutes=15)
# A worker that has not reported for this long is gone (worker ids change with every start):
# its breaker and pause no longer hold anything back.
WORKER_SEEN_WITHIN = timedelta(hours=1)
BLOCKED_SHOWN = 100
ATTEMPT_EVENTS = [
    Event.DELIVERED.value,
    Event.STALE_AT_SITE.value,
    Event.RETRY_SCHEDULED.value,
    Event.QUARANTINED.value,
]
FAILED_EVENTS = [Event.RETRY_SCHEDULED.value, Event.QUARANTINED.value]
UNDELIVERED = values(PENDING)


@dataclass
class Status:
    counts: dict[str, int]
    new_messages: int
    oldest_undelivered_age_s: float | None
    error_share: float
    delivery_rate_per_min: float
    workers: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[dict[str, Any]] = field(default_factory=list)
    # reason -> {"count", "oldest_message_id", "oldest_quarantined_at", "oldest_age_s"}
    quarantine_by_reason: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Any worker seen within WORKER_SEEN_WITHIN has its delivery paused by a 401/403, or its
    # circuit breaker not closed: the one-glance answers a monitoring script wants.
    delivery_paused: bool = False
    breaker_open: bool = False
    # Messages waiting behind a quarantined predecessor: a part of ``new_messages``, left out
    # of ``oldest_undelivered_age_s`` (a person's retry or cancel moves them, not time).
    held: int = 0
    # Cancelled messages by reason (superseded, stale, not-for-this-shop, operator, ...): what
    # ended without delivery, on purpose or by a person; never a cause for a person.
    cancelled_by_reason: dict[str, int] = field(default_factory=dict)
    # The worker that stopped cleanly last within WORKER_SEEN_WITHIN ({"worker_id",
    # "stopped_at", "stopped_age_s"}), or None: with no worker left, said instead of "no
    # worker reported for an hour".
    last_stopped: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def status(connection: Connection, now: datetime, kinds: KindPolicies) -> Status:
    counts = {state.value: 0 for state in State}
    for state, count in connection.execute(
        select(messages.c.state, func.count()).group_by(messages.c.state)
    ):
        counts[state] = count
    oldest = connection.execute(
        select(func.min(messages.c.created_at)).where(
            messages.c.state.in_(UNDELIVERED), not_(held_condition(kinds))
        )
    ).scalar()
    since = now - RECENT
    attempts, failures, delivered = connection.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((history.c.event.in_(FAILED_EVENTS), 1), else_=0)), 0),
            func.coalesce(
                func.sum(case((history.c.event == Event.DELIVERED.value, 1), else_=0)), 0
            ),
        ).where(
            history.c.at >= since,
            history.c.event.in_(ATTEMPT_EVENTS),
            history.c.attempt.is_not(None),
        )
    ).one()
    live_workers = worker_rows(connection, now)
    return Status(
        counts=counts,
        new_messages=counts[State.NEW.value],
        oldest_undelivered_age_s=(round((now - oldest).total_seconds(), 3) if oldest else None),
        error_share=round(failures / attempts, 4) if attempts else 0.0,
        delivery_rate_per_min=round(delivered / (RECENT.total_seconds() / 60), 3),
        workers=live_workers,
        blocked=blocked_aggregates(connection, kinds),
        quarantine_by_reason=quarantine_by_reason(connection, now),
        delivery_paused=any(w["paused"] for w in live_workers),
        breaker_open=any(w["breaker"] != "closed" for w in live_workers),
        held=held(connection, kinds),
        cancelled_by_reason=cancelled_by_reason(connection),
        last_stopped=last_stopped(connection, now),
    )


def cancelled_by_reason(connection: Connection) -> dict[str, int]:
    """How many messages ended cancelled, per reason (one query)."""
    rows = connection.execute(
        select(messages.c.reason, func.count())
        .where(messages.c.state == State.CANCELLED.value)
        .group_by(messages.c.reason)
        .order_by(messages.c.reason)
    ).all()
    return {reason or "-": count for reason, count in rows}


def last_stopped(connection: Connection, now: datetime) -> dict[str, Any] | None:
    """The worker that stopped cleanly last (``Worker.retire``), within WORKER_SEEN_WITHIN."""
    row = connection.execute(
        select(workers.c.worker_id, workers.c.stopped_at)
        .where(workers.c.stopped_at >= now - WORKER_SEEN_WITHIN)
        .order_by(workers.c.stopped_at.desc(), workers.c.worker_id)
        .limit(1)
    ).first()
    if row is None:
        return None
    return {
        "worker_id": row.worker_id,
        "stopped_at": row.stopped_at.isoformat(),
        "stopped_age_s": round((now - row.stopped_at).total_seconds(), 3),
    }


def worker_rows(connection: Connection, now: datetime) -> list[dict[str, Any]]:
    """The workers that reported within WORKER_SEEN_WITHIN and have not stopped."""
    rows = connection.execute(
        select(workers)
        .where(workers.c.heartbeat_at >= now - WORKER_SEEN_WITHIN, workers.c.stopped_at.is_(None))
        .order_by(workers.c.worker_id)
    ).mappings()
    return [
        {
            "worker_id": row["worker_id"],
            "heartbeat_at": row["heartbeat_at"].isoformat(),
            "heartbeat_age_s": round((now - row["heartbeat_at"]).total_seconds(), 3),
            # The site's answer that paused delivery (401/403), or None while delivering.
            "paused": row["paused_reason"],
            "breaker": row["breaker_state"],
            "breaker_until": row["breaker_until"].isoformat() if row["breaker_until"] else None,
            # The site's pace (contract 5c) as the worker last saw it; None before it reported.
            "pace": _pace(row["pace"]),
            # Whether its broker source consumes (contract 15); None without one.
            "source": _pace(row["source"]),
        }
        for row in rows
    ]


def _pace(text: str | None) -> dict[str, Any] | None:
    """A JSON object a worker reported (its pace, its source's health), or None."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# The pace's words, English and Russian: ``exchange status`` prints English, the workbench's
# dashboard and the operators' notifications follow their language setting.
def requests_per_second(rate: float, lang: Lang) -> str:
    """A request rate as the language writes it, whole from 10 up: «1 запрос/с», «1,5 запроса/с»,
    «42 запроса/с», "5 requests/s" (CLDR's plural rule and decimal mark)."""
    if not math.isfinite(rate):
        return ngettext("{rate} request/s", "{rate} requests/s", 2, lang).format(rate="—")
    shown = round(rate) if rate >= 10 else round(rate, 1)
    return ngettext("{rate} request/s", "{rate} requests/s", shown, lang).format(
        rate=number(shown, lang)
    )


def pace_words(pace: dict[str, Any] | None, lang: str = "en") -> str:
    """``site busy: 40 requests/s, 3 in flight (limit 4), 12 refused in the last minute`` or
    ``keeps up: ...`` when the site refused nothing for a minute; ``lang`` ``ru`` says it in
    Russian."""
    said: Lang = "ru" if lang == "ru" else "en"
    if not pace:
        return _("not reported", said)
    refused = int(pace.get("refused_last_minute") or 0)
    figures = _(
        "{rate}, {in_flight} in flight (limit {limit} of {max_limit}), {refused} refused in the "
        "last minute",
        said,
    ).format(
        rate=requests_per_second(float(pace.get("accepted_rate") or 0), said),
        in_flight=pace.get("in_flight", 0),
        limit=pace.get("limit"),
        max_limit=pace.get("max_limit"),
        refused=refused,
    )
    rate, hold = pace.get("paced_rate"), float(pace.get("hold_s") or 0)
    if not refused and not hold:
        return _("keeps up: {figures}", said).format(figures=figures)
    paced = (
        _(", paced at {rate}", said).format(rate=requests_per_second(float(rate), said))
        if rate
        else ""
    )
    held = _(", all requests held {hold} s", said).format(hold=number(hold, said)) if hold else ""
    return _("site busy: {figures}{paced}{held}", said).format(
        figures=figures, paced=paced, held=held
    )


def site_pace(workers_seen: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The site's pace and limit over the live workers together (the dashboard's card): the
    requests per second the site accepted, the requests in flight and the concurrency limits
    (each worker's own, summed), refusals in the last minute, and the slowest paced rate when
    any worker is paced; None when no live worker has reported its pace."""
    paces = [w["pace"] for w in workers_seen if w.get("live", True) and w.get("pace")]
    if not paces:
        return None
    paced = [float(p["paced_rate"]) for p in paces if p.get("paced_rate")]
    return {
        "accepted_rate": round(sum(float(p.get("accepted_rate") or 0) for p in paces), 1),
        "in_flight": sum(int(p.get("in_flight") or 0) for p in paces),
        "limit": sum(int(p.get("limit") or 0) for p in paces),
        "max_limit": sum(int(p.get("max_limit") or 0) for p in paces),
        "refused_last_minute": sum(int(p.get("refused_last_minute") or 0) for p in paces),
        "paced_rate": min(paced) if paced else None,
        "workers": len(paces),
    }


def quarantine_by_reason(connection: Connection, now: datetime) -> dict[str, dict[str, Any]]:
    """Per reason: how many wait, and the one that has waited longest (one query)."""
    ranked = (
        select(
            messages.c.reason,
            messages.c.message_id,
            messages.c.updated_at,
            func.count().over(partition_by=messages.c.reason).label("count"),
            func.row_number()
            .over(
                partition_by=messages.c.reason,
                order_by=(messages.c.updated_at, messages.c.id),
            )
            .label("rank"),
        )
        # A quarantined message has not changed since it was quarantined: updated_at is when.
        .where(messages.c.state == State.QUARANTINED.value)
        .subquery("ranked")
    )
    rows = connection.execute(
        select(ranked.c.reason, ranked.c.count, ranked.c.message_id, ranked.c.updated_at)
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.reason)
    ).all()
    return {
        reason: {
            "count": count,
            "oldest_message_id": message_id,
            "oldest_quarantined_at": quarantined_at.isoformat(),
            "oldest_age_s": round((now - quarantined_at).total_seconds(), 3),
        }
        for reason, count, message_id, quarantined_at in rows
    }


def blocked_aggregates(
    connection: Connection, kinds: KindPolicies, limit: int = BLOCKED_SHOWN
) -> list[dict[str, Any]]:
    """Strictly ordered aggregates that cannot move: a quarantined next version, or a gap."""
    if not kinds.strict:
        return []
    m = aliased(Message, name="m")
    a = aggregates
    lowest = (
        select(m.aggregate_id, func.min(m.version).label("version"))
        .join(a, a.c.id == m.aggregate_id)
        .where(
            not_(m.rejected),
            order.is_strict(m, kinds),
            order.beyond_cursor(m),
            m.state.in_(values(LIVE)),
        )
        .group_by(m.aggregate_id)
        .subquery()
    )
    rows = connection.execute(
        select(
            a.c.kind,
            a.c.aggregate,
            a.c.done_version,
            lowest.c.version,
            m.message_id,
            m.state,
            m.reason,
        )
        .join(lowest, lowest.c.aggregate_id == a.c.id)
        .join(m, (m.aggregate_id == a.c.id) & (m.version == lowest.c.version) & not_(m.rejected))
        .where((m.state == State.QUARANTINED.value) | (lowest.c.version > a.c.done_version + 1))
        .order_by(a.c.kind, a.c.aggregate)
        .limit(limit)
    ).all()
    result = []
    for kind, aggregate, done, version, message_id, state, reason in rows:
        # Held by a quarantined message: only a person moves it. Held by a gap: the missing
        # version may still arrive (until EXCHANGE_GAP_TIMEOUT quarantines the next one).
        held_by = "quarantine" if state == State.QUARANTINED.value else "gap"
        if state == State.QUARANTINED.value and version == done + 1:
            cause = f"{message_id} is quarantined ({reason}): retry or cancel it"
        elif state == State.QUARANTINED.value:
            cause = f"{message_id} is quarantined ({reason}) after a gap at version {done + 1}"
        else:
            cause = f"waiting for version {done + 1} (a gap); {message_id} is next"
        result.append(
            {
                "kind": kind,
                "aggregate": aggregate,
                "delivered_through": done,
                "held_by": held_by,
                "message_id": message_id,
                "cause": cause,
            }
        )
    return result


_UNITS = {"en": ("d", "h", "min", "s"), "ru": ("д", "ч", "мин", "с")}


def human_age(seconds: float | None, lang: str = "en") -> str:
    """An age as a person reads it: the two largest units ("3 h 12 min", «3 ч 12 мин» with
    ``lang`` ``ru``), "-" for none."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    d, h, m, s = _UNITS["ru" if lang == "ru" else "en"]
    parts = [(days, d), (hours, h), (minutes, m), (secs, s)]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{value} {unit}" for value, unit in parts[:2] if value or unit == s)


def when_ago(value: str | datetime | None, zone: str, now: datetime, lang: str = "en") -> str:
    """An absolute time in the display zone with how long ago it was beside it (issue 24 item
    8): ``2026-11-30 11:00:00 MSK (5 min ago)``, «… (5 мин назад)»."""
    if value is None or value == "":
        return "-"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    age = human_age((now - ensure_utc(moment)).total_seconds(), lang)
    return f"{local_time(moment, zone)} ({age} {'назад' if lang == 'ru' else 'ago'})"


def tables(figures: Status, zone: str = "UTC") -> list[Table]:
    """``exchange status`` for a person: one table per question an operator asks; times in
    ``zone`` (EXCHANGE_DISPLAY_TZ) with their age beside them."""
    states = Table(title="messages by state")
    states.add_column("state")
    states.add_column("count", justify="right")
    for state, count in figures.counts.items():
        states.add_row(state, str(count))

    queue = Table(title="queue")
    queue.add_column("figure")
    queue.add_column("value", justify="right")
    queue.add_row("new messages", str(figures.new_messages))
    queue.add_row("  of which held behind the quarantine", str(figures.held))
    queue.add_row("oldest undelivered", human_age(figures.oldest_undelivered_age_s))
    minutes = int(RECENT.total_seconds() // 60)
    queue.add_row(f"error share ({minutes} min)", f"{figures.error_share:.1%}")
    queue.add_row(f"delivery rate ({minutes} min)", f"{figures.delivery_rate_per_min:.1f}/min")
    for reason, count in figures.cancelled_by_reason.items():
        queue.add_row(Text(f"cancelled: {reason}"), str(count))

    hours = int(WORKER_SEEN_WITHIN.total_seconds() // 3600)
    workers_table = Table(title="workers")
    for column in ("worker", "last seen", "breaker", "delivery", "site's pace"):
        workers_table.add_column(column, overflow="fold")
    for worker in figures.workers:
        breaker = worker["breaker"]
        if worker["breaker_until"]:
            breaker += f" until {local_time(worker['breaker_until'], zone)}"
        delivery = _delivery_words(worker, zone)
        seen = local_time(worker["heartbeat_at"], zone)
        workers_table.add_row(
            Text(worker["worker_id"]),
            f"{seen} ({human_age(worker['heartbeat_age_s'])} ago)",
            Text(breaker),
            Text(delivery),
            Text(pace_words(worker["pace"])),
        )
    if not figures.workers and figures.last_stopped:
        gone = figures.last_stopped
        workers_table.caption = (
            f"the last worker, {gone['worker_id']}, stopped "
            f"{human_age(gone['stopped_age_s'])} ago ({local_time(gone['stopped_at'], zone)})"
        )
    elif not figures.workers:
        workers_table.caption = f"no worker has reported in the last {hours} h"

    quarantine = Table(title="quarantine: the oldest entry per reason")
    for column in ("reason", "count", "oldest message_id", "waiting since"):
        quarantine.add_column(
            column, justify="right" if column == "count" else "left", overflow="fold"
        )
    for reason, entry in figures.quarantine_by_reason.items():
        quarantine.add_row(
            Text(reason),
            str(entry["count"]),
            Text(entry["oldest_message_id"]),
            f"{local_time(entry['oldest_quarantined_at'], zone)} "
            f"({human_age(entry['oldest_age_s'])})",
        )
    if not figures.quarantine_by_reason:
        quarantine.caption = "the quarantine is empty"

    blocked = Table(title="blocked aggregates (strict order)")
    for column in ("kind", "aggregate", "delivered through", "state", "cause"):
        blocked.add_column(column, overflow="fold")
    for entry in figures.blocked:
        blocked.add_row(
            Text(entry["kind"]),
            Text(entry["aggregate"]),
            str(entry["delivered_through"]),
            f"blocked by {entry['held_by']}",
            Text(entry["cause"]),
        )
    if not figures.blocked:
        blocked.caption = "none"
    elif len(figures.blocked) >= BLOCKED_SHOWN:
        blocked.caption = f"the first {BLOCKED_SHOWN}, by kind and aggregate"
    return [states, queue, workers_table, quarantine, blocked]


def _delivery_words(worker: dict[str, Any], zone: str = "UTC") -> str:
    """A worker's delivery as ``status`` prints it: one that is not live (contract 6) is
    silent, never "running", whatever it last said."""
    if worker.get("live") is False:
        since = local_time(worker["heartbeat_at"], zone)
        return f"SILENT since {since} (not live: delivers nothing)"
    return f"PAUSED: {worker['paused']}" if worker["paused"] else "running"


def biography(connection: Connection, message_id: str) -> dict[str, Any]:
    row = (
        connection.execute(select(messages).where(messages.c.message_id == message_id))
        .mappings()
        .first()
    )
    if row is None:
        raise OperatorError(f"no message with id {message_id!r}")
    entries = (
        connection.execute(
            select(history).where(history.c.message_pk == row["id"]).order_by(history.c.id)
        )
        .mappings()
        .all()
    )
    story = [
        {
            "at": _iso(e["at"]),
            "event": e["event"],
            "from": e["from_state"],
            "to": e["to_state"],
            "worker": e["worker"],
            "attempt": e["attempt"],
            "leased_at": _iso(e["leased_at"]),
            "lease_until": _iso(e["lease_until"]),
            "http_status": e["http_status"],
            "error_class": e["error_class"],
            "delay_s": e["delay_s"],
            "detail": e["detail"],
            "operator": e["operator"],
            "note": e["note"],
        }
        for e in entries
    ]
    if row["state"] == State.IN_PROGRESS.value:
        story.append(in_flight(row, story[-1]["to"] if story else None))
    return {
        "message": {
            "message_id": row["message_id"],
            "kind": row["kind"],
            "aggregate": row["aggregate"],
            "version": row["version"],
            "state": row["state"],
            "reason": row["reason"],
            "attempts": row["attempts"],
            "superseded_by": row["superseded_by"],
            "last_status": row["last_status"],
            "last_error": row["last_error"],
            "receipt": row["receipt"],
            "source_ref": row["source_ref"],
            "staging_id": row["staging_id"],
            "rejected": bool(row["rejected"]),
            "created_at": _iso(row["created_at"]),
            "taken_at": _iso(row["taken_at"]),
            "next_try_at": _iso(row["next_try_at"]),
            "locked_by": row["locked_by"],
            "locked_until": _iso(row["locked_until"]),
            "leased_at": _iso(row["leased_at"]),
        },
        "history": story,
    }


def in_flight(row: Any, before: str | None) -> dict[str, Any]:
    """The attempt in flight, read from the message (its history row is written only when it
    ends): ``at`` is when its lease began, ``before`` the state it was leased from."""
    return {
        "at": _iso(row["leased_at"]),
        "event": Event.LEASED.value,
        "from": before,
        "to": State.IN_PROGRESS.value,
        "worker": row["locked_by"],
        "attempt": row["attempts"],
        "leased_at": _iso(row["leased_at"]),
        "lease_until": _iso(row["locked_until"]),
        "http_status": None,
        "error_class": None,
        "delay_s": None,
        "detail": f"no outcome yet; leased until {_iso(row['locked_until'])}",
        "operator": None,
        "note": None,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# -- the broker sources (contract 12): what each has ready and pending ------------------------


async def source_figures(
    source: Source | None, workers_seen: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``status``'s ``sources``: one entry per configured broker source with what it has ready
    (not yet taken) and pending (taken by a consumer, not acknowledged; RabbitMQ does not tell
    it: null), or ``error`` when the broker cannot be asked; and what the live workers say of
    it (``source_health``). Empty when none is configured."""
    if source is None:
        return []
    try:
        entry = await source.figures()
    except ExchangeError as exc:
        entry = {"source": source.name, "error": str(exc)}
    finally:
        await source.aclose()
    return [{**entry, **source_health(workers_seen)}]


def source_health(workers_seen: list[dict[str, Any]]) -> dict[str, Any]:
    """What the live workers (``attention.mark_live``) say of their source (contract 15):
    ``consuming`` false when any does not (with its ``cause`` and ``since``), null when none
    has said; ``warning`` the latest ({text, since}), or null."""
    said = [w for w in workers_seen if w.get("live") and isinstance(w.get("source"), dict)]
    told = [w["source"] for w in said if w["source"].get("consuming") is not None]
    stopped = [h for h in told if h["consuming"] is False]
    warnings = [w["source"]["warning"] for w in said if w["source"].get("warning")]
    first = min(stopped, key=lambda h: h.get("since") or "", default=None)
    return {
        "consuming": None if not told else not stopped,
        "cause": first["cause"] if first else None,
        "since": first["since"] if first else None,
        "warning": max(warnings, key=lambda w: w.get("since") or "", default=None),
    }


def sources_table(entries: list[dict[str, Any]]) -> Table:
    table = Table(title="broker sources")
    for column in ("source", "queue or stream", "ready", "pending", "consuming"):
        table.add_column(column, justify="right" if column in ("ready", "pending") else "left")
    for entry in entries:
        consuming = _consuming(entry)
        if "error" in entry:
            table.add_row(Text(entry["source"]), Text(entry["error"]), "", "", Text(consuming))
            continue
        where = entry.get("queue") or entry.get("stream") or ""
        if entry.get("group"):
            where += f" (group {entry['group']})"
        table.add_row(
            Text(entry["source"]),
            Text(where),
            _figure(entry.get("ready")),
            _figure(entry.get("pending")),
            Text(consuming),
        )
    return table


def _consuming(entry: dict[str, Any]) -> str:
    consuming = entry.get("consuming")
    words = {True: "yes", None: "no worker says"}.get(consuming) or (
        f"no, since {entry.get('since')}: {entry.get('cause')}"
    )
    warning = entry.get("warning")
    if warning:
        words += f"; since {warning['since']}: {warning['text']}"
    return words


def _figure(value: Any) -> str:
    return "unknown" if value is None else str(value)

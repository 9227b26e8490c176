"""What ``exchange status`` and ``exchange history`` show: read-only queries, and the tables
``exchange status`` prints.

The figures (``status``) are data, printed as JSON as they are; ``tables`` lays the same
figures out for a person. Every value from the database goes into a table as ``Text``, never
as rich markup: a message id or a site's error text with ``[brackets]`` is shown as it is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from rich.table import Table
from rich.text import Text
from sqlalchemy import Connection, and_, case, func, not_, or_, select
from sqlalchemy.orm import aliased

from exchange.db.channels import oldest_kept, seed_from, untaken_kinds
from exchange.db.on_channels import (
    Channel,
    channel_ids,
    channel_names,
    listed,
    on,
    removed_at,
    targets_by_id,
)
from exchange.db.schema import (
    Message,
    aggregates,
    channel_aggregates,
    channels,
    deliveries,
    history,
    messages,
    workers,
)
from exchange.db.worker_rows import WORKERS_KEPT
from exchange.domain.clock import ensure_utc, local_time
from exchange.domain.pause import PauseCause
from exchange.domain.policy import KindPolicies
from exchange.domain.reasons import DATA_REASONS
from exchange.domain.states import LIVE, PENDING, Event, State, values
from exchange.errors import ExchangeError, OperatorError
from exchange.i18n import N_, Lang, _, matching, ngettext, number, percent, pgettext
from exchange.intake.sources.common import Source
from exchange.ops.find import held, held_condition, nowhere_facts
from exchange.ops.quarantine import shown_now, sku_sent_since
from exchange.ops.waits import Wait, wait_of, waiting_on, waits_said
from exchange.ops.withheld_behind import behind_counts
from exchange.queue import control, order
from exchange.settings import worker_live_within
from exchange.settings.delivery import DeliverySettings
from exchange.words import (
    WORDS,
    channel_named,
    channel_subject,
    error_words,
    name,
    reason_target,
    word,
)
from exchange.words import human_age as human_age  # the one duration, where it was read

RECENT = timedelta(minutes=15)
# A worker that has not reported for this long is gone (worker ids change with every start):
# its breaker and pause no longer hold anything back.
WORKER_SEEN_WITHIN = timedelta(hours=1)
# Contract 15: a worker reports at least every ``worker.REPORT_EVERY_S``; one quiet for
# SILENT_AFTER is shown silent, and its row is shown (live or not, stopped or not) until
# ``db.worker_rows.WORKERS_KEPT`` has passed since its last report.
SILENT_AFTER = timedelta(seconds=30)
# Settings.live_within with the default lease and poll: for callers without the settings
# (tests, the blocked-aggregates page).
DEFAULT_LIVE_WITHIN = worker_live_within(
    DeliverySettings.model_fields["lease_seconds"].default,
    DeliverySettings.model_fields["poll_interval"].default,
)
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
    # Delivery is paused, whoever paused it (contract 15, "one pause, one truth"): ``pause``
    # says by whom; ``breaker_open``: a worker's circuit breaker is not closed. The one-glance
    # answers a monitoring script wants.
    delivery_paused: bool = False
    breaker_open: bool = False
    # {"by": "operator"|"configuration"|"site", "since", "note", "operator"} or None
    # (``pause_of``): what the console's worker rows, the page and the notice all read.
    pause: dict[str, Any] | None = None
    # Since when the site has answered no live worker at all (refused connections,
    # timeouts), or None: delivery waits for the site, and resumes by itself.
    site_unreachable_since: str | None = None
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
    # The ``in_progress`` messages whose worker waits out the site's Retry-After (contract
    # 5c: every request waits for the pace's hold) and sends none of them now: {"count",
    # "until"}, or None. They keep their lease (contract 4: a slow site never makes two
    # workers send one message), so they stay ``in_progress`` and are said as waiting.
    waiting_for_site: dict[str, Any] | None = None
    # The ``delayed`` deliveries that wait for their channel, not for a retry
    # (``exchange.ops.waits``: Ozon's hourly limit, an outcome read later, a read-back): a
    # part of ``counts["delayed"]``, said as a wait.
    awaiting_channel: int = 0
    # Of the ``delayed`` ones that wait, those that wait for 1C to send the other price type
    # (``waits.wait_of``: "1c"): not counted in ``awaiting_channel``, said as a wait for 1C.
    awaiting_1c: int = 0
    # Of the ``delayed`` ones that wait, those that wait for an operator's decision on their
    # SKU's main price, quarantined by a rule of two price types (``waits.wait_of``:
    # "person"): not counted in ``awaiting_channel``, said as a wait for a person.
    awaiting_person: int = 0
    # The ``withheld`` prices a newer price waits behind (``ops.withheld_behind``: Wildberries'
    # price quarantine): a part of ``counts["withheld"]`` that must not be confirmed.
    withheld_behind: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def status(
    connection: Connection,
    now: datetime,
    kinds: KindPolicies,
    *,
    live_within: float = DEFAULT_LIVE_WITHIN,
    channel: Channel = None,
) -> Status:
    """The figures; ``live_within``: Settings.live_within (a worker is live while its last
    report is younger); ``channel``: the deliveries of one channel (an id or a name), every
    channel's for None (intake's rejected records are counted whatever the channel)."""
    ids = channel_ids(connection, channel)
    counts = {state.value: 0 for state in State}
    for by_channel in counts_by_channel(connection, ids).values():
        for state, count in by_channel.items():
            counts[state] = counts.get(state, 0) + count
    for state, count in connection.execute(
        select(messages.c.state, func.count()).where(messages.c.rejected).group_by(messages.c.state)
    ):
        counts[state] = counts.get(state, 0) + count
    d = deliveries
    oldest = connection.execute(
        select(func.min(messages.c.created_at))
        .select_from(d.join(messages, messages.c.id == d.c.message_pk))
        .where(on(d.c.channel_id, ids), d.c.state.in_(UNDELIVERED), not_(held_condition(kinds)))
    ).scalar()
    since = now - RECENT
    # A quarantine of 1C's data (its delivery's reason one of DATA_REASONS) is no failure of
    # the channel: an attempt, never an error (words38 item 5)
    of_data = (
        select(d.c.message_pk)
        .where(
            d.c.message_pk == history.c.message_pk,
            d.c.channel_id == history.c.channel_id,
            d.c.reason.in_([r.value for r in DATA_REASONS]),
        )
        .exists()
    )
    failed = and_(
        history.c.event.in_(FAILED_EVENTS),
        or_(history.c.event != Event.QUARANTINED.value, not_(of_data)),
    )
    attempts, failures, delivered = connection.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((failed, 1), else_=0)), 0),
            func.coalesce(
                func.sum(case((history.c.event == Event.DELIVERED.value, 1), else_=0)), 0
            ),
        ).where(
            history.c.at >= since,
            history.c.event.in_(ATTEMPT_EVENTS),
            history.c.attempt.is_not(None),
        )
    ).one()
    shown = worker_rows(connection, now, live_within)
    held_by = holding(shown)
    pause = pause_of(control.operator_pause(connection), held_by)
    waits = awaiting_by_kind(connection, ids) if counts[State.DELAYED.value] else {}
    return Status(
        counts=counts,
        new_messages=counts[State.NEW.value],
        oldest_undelivered_age_s=(round((now - oldest).total_seconds(), 3) if oldest else None),
        error_share=round(failures / attempts, 4) if attempts else 0.0,
        delivery_rate_per_min=round(delivered / (RECENT.total_seconds() / 60), 3),
        workers=shown,
        blocked=blocked_aggregates(connection, kinds, channel=ids),
        quarantine_by_reason=quarantine_by_reason(connection, now, ids),
        delivery_paused=pause is not None,
        breaker_open=site_failing(shown, last_deliveries(connection)),
        held=held(connection, kinds, ids),
        cancelled_by_reason=cancelled_by_reason(connection, ids),
        last_stopped=last_stopped(shown),
        pause=pause,
        site_unreachable_since=unreachable_since(shown),
        waiting_for_site=waiting_for_site(connection, shown, now, ids),
        awaiting_channel=waits.get("channel", 0),
        awaiting_1c=waits.get("1c", 0),
        awaiting_person=waits.get("person", 0),
        withheld_behind=(
            sum(behind_counts(connection, ids).values()) if counts[State.WITHHELD.value] else 0
        ),
    )


def awaiting_by_kind(connection: Connection, ids: list[int]) -> dict[Wait, int]:
    """How many delayed deliveries on the channels ``ids`` wait, by what they wait for
    (``waits.wait_of``): their channel ("channel"), 1C's other price type ("1c") or an
    operator's decision on a quarantined main price ("person"); a retry is none of them."""
    d = deliveries
    waiting = (
        select(wait_of(d.c.message_pk, d.c.channel_id, d.c.state).label("wait"))
        .where(on(d.c.channel_id, ids), d.c.state == State.DELAYED.value)
        .subquery()
    )
    rows = connection.execute(select(waiting.c.wait, func.count()).group_by(waiting.c.wait)).all()
    return {kind: int(count) for kind, count in rows if kind}


def counts_by_channel(connection: Connection, ids: list[int]) -> dict[int, dict[str, int]]:
    """How many deliveries each of the channels ``ids`` has in each state (one query)."""
    by_channel: dict[int, dict[str, int]] = {i: {} for i in ids}
    for channel_id, state, count in connection.execute(
        select(deliveries.c.channel_id, deliveries.c.state, func.count())
        .where(on(deliveries.c.channel_id, ids))
        .group_by(deliveries.c.channel_id, deliveries.c.state)
    ):
        by_channel.setdefault(channel_id, {})[state] = int(count)
    return by_channel


def waiting_for_site(
    connection: Connection,
    shown: list[dict[str, Any]],
    now: datetime,
    ids: list[int] | None = None,
) -> dict[str, Any] | None:
    """How many ``in_progress`` messages are leased by a live worker whose pace holds every
    request (the site's Retry-After, ``pace.hold_s`` when it reported), and until when the
    site asked to wait; None when no live worker holds."""
    until: dict[str, datetime] = {}
    for worker in shown:
        hold = float((worker["pace"] or {}).get("hold_s") or 0)
        ends = datetime.fromisoformat(worker["heartbeat_at"]) + timedelta(seconds=hold)
        if worker["live"] and hold > 0 and ends > now:
            owner = worker["worker_id"].split("/")[0]  # a channel's row: <worker id>/<channel>
            until[owner] = max(ends, until.get(owner, ends))
    if not until:
        return None
    ids = channel_ids(connection) if ids is None else ids
    count = connection.execute(
        select(func.count()).where(
            on(deliveries.c.channel_id, ids),
            deliveries.c.state == State.IN_PROGRESS.value,
            deliveries.c.locked_by.in_(list(until)),
        )
    ).scalar_one()
    if not count:
        return None
    return {"count": int(count), "until": max(until.values()).isoformat()}


def cancelled_by_reason(connection: Connection, ids: list[int] | None = None) -> dict[str, int]:
    """How many deliveries on the channels ``ids`` (every channel for None) and rejected
    records ended cancelled, per reason (one query)."""
    ids = channel_ids(connection) if ids is None else ids
    m = listed(ids, states=[State.CANCELLED.value])
    rows = connection.execute(
        select(m.c.reason, func.count())
        .where(m.c.state == State.CANCELLED.value)
        .group_by(m.c.reason)
        .order_by(m.c.reason)
    ).all()
    return {reason or "-": count for reason, count in rows}


def last_stopped(shown: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The worker that stopped cleanly last (``Worker.retire``) among the rows shown, unless a
    worker is live: said instead of "no worker reported for an hour"."""
    if any(w["live"] for w in shown):
        return None
    stopped = [w for w in shown if w["state"] == WorkerState.STOPPED]
    if not stopped:
        return None
    last = max(stopped, key=lambda w: (w["stopped_at"], w["worker_id"]))
    return {
        "worker_id": last["worker_id"],
        "stopped_at": last["stopped_at"],
        "stopped_age_s": last["stopped_age_s"],
        # The others shown that are not live and did not stop (a ``kill -9``): the sentence
        # names them, never "no other" beside their rows.
        "silent": [
            {"worker_id": w["worker_id"], "since": w["heartbeat_at"]}
            for w in shown
            if w["state"] == WorkerState.NOT_LIVE
        ],
    }


def silent_others(silent: list[dict[str, Any]], zone: str = "UTC", lang: Lang = "en") -> str:
    """The workers beside the last one stopped that went quiet without stopping: «не работают
    и другие: w1 молчит с …», never «других нет» beside their rows."""
    others = ", ".join(
        word("silent_worker", lang).format(worker=w["worker_id"], when=local_time(w["since"], zone))
        for w in silent
    )
    return word("silent_others", lang).format(others=others)


class WorkerState(StrEnum):
    """A worker's row as it is (contract 15)."""

    LIVE = "live"  # reporting
    SILENT = "silent"  # live, but quiet for SILENT_AFTER (it reports every 10 s)
    NOT_LIVE = "not-live"  # quiet for Settings.live_within: it delivers nothing
    STOPPED = "stopped"  # stopped cleanly (``Worker.retire``), at ``stopped_at``


def worker_state(
    heartbeat_at: datetime, stopped_at: datetime | None, now: datetime, live_within: float
) -> WorkerState:
    """What a worker's row says of it: the one rule the console, the page and the notice
    read."""
    if stopped_at is not None:
        return WorkerState.STOPPED
    age = now - heartbeat_at
    if age >= timedelta(seconds=live_within):
        return WorkerState.NOT_LIVE
    return WorkerState.SILENT if age >= SILENT_AFTER else WorkerState.LIVE


def serving(rows: list[dict[str, Any]], channels: Iterable[str]) -> list[dict[str, Any]]:
    """The workers' rows (``worker_rows``) that serve one of ``channels``: a delivery loop's
    row of one of them (``<worker id>/<channel>``), and a process's own row (no channel) whose
    loops deliver to one of them, or that has no loop row of its own (without
    EXCHANGE_CHANNELS its one loop is on its row: it serves whatever channel there is). A
    process of ``exchange run --channel ozon`` is never listed under another channel (review
    33: ``status --channel`` listed every process)."""
    wanted = set(channels)
    loops: dict[str, set[str]] = {}
    for row in rows:
        channel, worker = row.get("channel"), row["worker_id"]
        if channel and worker.endswith(f"/{channel}"):
            loops.setdefault(worker[: -len(channel) - 1], set()).add(channel)
    return [
        row
        for row in rows
        if (row.get("channel") in wanted)
        or (not row.get("channel") and loops.get(row["worker_id"], wanted) & wanted)
    ]


def worker_rows(
    connection: Connection, now: datetime, live_within: float = DEFAULT_LIVE_WITHIN
) -> list[dict[str, Any]]:
    """Every worker that reported within WORKERS_KEPT, as it is (``worker_state``): a worker
    that stopped or went silent stays shown, never vanishes."""
    rows = connection.execute(
        select(workers)
        .where(workers.c.heartbeat_at >= now - WORKERS_KEPT)
        .order_by(workers.c.worker_id)
    ).mappings()
    shown = []
    for row in rows:
        state = worker_state(row["heartbeat_at"], row["stopped_at"], now, live_within)
        stopped_at = row["stopped_at"]
        shown.append(
            {
                "worker_id": row["worker_id"],
                "worker": row["worker_id"],  # contract 6's name
                "state": state.value,
                "live": state in (WorkerState.LIVE, WorkerState.SILENT),
                "heartbeat_at": row["heartbeat_at"].isoformat(),
                "heartbeat_age_s": round((now - row["heartbeat_at"]).total_seconds(), 3),
                "stopped_at": stopped_at.isoformat() if stopped_at else None,
                "stopped_age_s": (
                    round((now - stopped_at).total_seconds(), 3) if stopped_at else None
                ),
                # The site's answer that paused this worker's delivery (401/403), or None,
                # and since when.
                "paused": row["paused_reason"],
                "paused_at": _iso(row["paused_at"]),
                "pause_cause": row["pause_cause"],  # domain.pause.PauseCause, or None
                # Since when the site has given this worker no answer at all, or None.
                "unreachable_since": _iso(row["unreachable_since"]),
                "channel": row["channel"],  # None: a process's own row (contract 13)
                "breaker": row["breaker_state"],
                "breaker_until": (
                    row["breaker_until"].isoformat() if row["breaker_until"] else None
                ),
                # The site's pace (contract 5c) as the worker last saw it; None before it
                # reported.
                "pace": _pace(row["pace"]),
                # Whether its broker source consumes (contract 15); None without one.
                "source": _pace(row["source"]),
            }
        )
    return shown


def holding(shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows whose pause and breaker still hold delivery back: every worker seen within
    WORKER_SEEN_WITHIN that has not stopped; a stopped one's last word only while no worker
    is live (a live worker's own report supersedes it); a stopped or silent one's only while no
    other worker of its channel reported after it went quiet (that later worker's own row says
    how delivery went since: a pause it did not meet is no current pause; several workers per
    channel, each with its own row)."""
    anyone_live = any(w["live"] for w in shown)
    return [
        w
        for w in shown
        if w["heartbeat_age_s"] < WORKER_SEEN_WITHIN.total_seconds()
        and (w["state"] != WorkerState.STOPPED or not anyone_live)
        and (w["live"] or not _superseded(w, shown))
    ]


def _superseded(quiet: dict[str, Any], shown: list[dict[str, Any]]) -> bool:
    """Whether another worker of ``quiet``'s channel reported after ``quiet`` stopped or last
    reported (a ``kill -9``): that later worker's own row says how delivery went since."""
    since = datetime.fromisoformat(quiet["stopped_at"] or quiet["heartbeat_at"])
    return any(
        other["worker_id"] != quiet["worker_id"]
        and other.get("channel") == quiet.get("channel")
        and datetime.fromisoformat(other["heartbeat_at"]) > since
        for other in shown
    )


def last_deliveries(connection: Connection) -> dict[str | None, datetime]:
    """When the latest message was delivered, per channel's name, and under None on any
    channel (a process's own row has no channel): the evidence that the site answers."""
    latest: dict[str | None, datetime] = {}
    rows = connection.execute(
        select(channels.c.name, func.max(history.c.at))
        .select_from(history.outerjoin(channels, channels.c.id == history.c.channel_id))
        .where(history.c.event == Event.DELIVERED.value)
        .group_by(channels.c.name)
    ).all()
    for channel, at in rows:
        at = ensure_utc(at)
        if channel is not None:
            latest[channel] = max(at, latest.get(channel, at))
        latest[None] = max(at, latest.get(None, at))
    return latest


def site_failing(shown: list[dict[str, Any]], delivered: dict[str | None, datetime]) -> bool:
    """Whether a worker's breaker says the site keeps failing (the cause ``breaker``; the
    notice's stop): the one rule (docs/runbook.md, "The site keeps failing").

    Only a live worker's breaker counts: a worker that stopped or is not live delivers
    nothing, and its breaker, frozen when it went quiet, says nothing of the site now. A live
    worker's open or half-open breaker is superseded by evidence that the site answers: a
    live worker of the same channel whose breaker is closed and who hears the site, or a
    message of its channel delivered after its cool-down ended (``breaker_until``: the
    breaker opened before that; an idle worker with nothing to probe with stays half-open)."""
    live = [w for w in shown if w["live"]]
    for worker in live:
        if worker["breaker"] == "closed":
            continue
        channel = worker.get("channel")
        hears = any(
            other["breaker"] == "closed"
            and other["unreachable_since"] is None
            and other.get("channel") == channel
            for other in live
        )
        last = delivered.get(channel)
        until = worker["breaker_until"]
        answered = last is not None and until and last >= datetime.fromisoformat(until)
        if not hears and not answered:
            return True
    return False


def unreachable_since(shown: list[dict[str, Any]]) -> str | None:
    """Since when the site has answered no live worker (each live worker says so, the
    earliest time), or None when one of them hears it, or none is live."""
    live = [w for w in shown if w["live"]]
    if not live or any(w["unreachable_since"] is None for w in live):
        return None
    return str(min(w["unreachable_since"] for w in live))


def unreachable_channels(
    shown: list[dict[str, Any]], named: dict[str, str] | None
) -> dict[str, str]:
    """Each channel of ``named`` that answers none of its live loops (the rule of
    ``unreachable_since``, per channel), with since when; a channel without a live loop says
    nothing."""
    found = {}
    for channel in named or {}:
        since = unreachable_since([w for w in shown if w.get("channel") == channel])
        if since is not None:
            found[channel] = since
    return found


# Pauses the site's people mend (``pause_of``'s ``by`` ``site``).
_SITES_OWN = (PauseCause.READ_ONLY_KEY.value, PauseCause.OTHER.value)


def pause_of(
    operator: dict[str, Any] | None, held_by: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The pause, whoever made it (contract 15): an operator's first (a person's decision,
    with their note), else the site's refusal a worker reported: ``by`` ``configuration``
    where a setting of ours is to mend (a token, a key, a login, a certificate, the API's
    address, the broker's), ``site`` where the site's people are to act (a key that may only
    read, a refusal of its own words); None while delivery runs."""
    if operator is not None:
        return {
            "by": "operator",
            "since": ensure_utc(operator["paused_at"]).isoformat(),
            "note": operator["note"],
            "operator": operator["operator"],
        }
    paused = [w for w in held_by if w["paused"]]
    if not paused:
        return None
    first = min(paused, key=lambda w: w["paused_at"] or w["heartbeat_at"])
    cause = first["pause_cause"] or PauseCause.OTHER.value
    return {
        "by": "site" if cause in _SITES_OWN else "configuration",
        "since": first["paused_at"] or first["heartbeat_at"],
        "note": first["paused"],
        "operator": None,
        # Which pause it is (domain.pause.PauseCause): the words that say what to mend.
        "cause": cause,
    }


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


def pace_words(pace: dict[str, Any] | None, lang: str = "en", channel: str | None = None) -> str:
    """``site busy: 40 requests/s, 3 in flight (limit 4), 12 refused in the last minute`` or
    ``keeps up: ...`` when the site refused nothing for a minute; ``lang`` ``ru`` says it in
    Russian. ``channel``: what is busy where it is no site, as the words name it
    (``words.channel_subject``: «канал ozon (Ozon) перегружен», «Ozon перегружен»), never
    "site busy" of a marketplace (issue 31 item 7); None: the one site's words."""
    said: Lang = "ru" if lang == "ru" else "en"
    if not pace:
        return _("not reported", said)
    refused = int(pace.get("refused_last_minute") or 0)
    # A limit every worker of the channel shares (Yandex Market's ``ym_parallel`` places in
    # the database, ``DeliveryLoop.pace_figures``): said to be all of theirs, not this one's.
    figures = (
        _(
            "{rate}, {in_flight} in flight (limit {limit} of {max_limit} for all the workers "
            "together), {refused} refused in the last minute",
            said,
        )
        if pace.get("limit_shared")
        else _(
            "{rate}, {in_flight} in flight (limit {limit} of {max_limit}), {refused} refused in "
            "the last minute",
            said,
        )
    ).format(
        rate=requests_per_second(float(pace.get("accepted_rate") or 0), said),
        in_flight=pace.get("in_flight", 0),
        limit=pace.get("limit"),
        max_limit=pace.get("max_limit"),
        refused=refused,
    )
    rate, hold = pace.get("paced_rate"), float(pace.get("hold_s") or 0)
    if not refused and not hold:
        if channel is not None:
            return _("{channel} keeps up: {figures}", said).format(channel=channel, figures=figures)
        return _("keeps up: {figures}", said).format(figures=figures)
    paced = (
        _(", paced at {rate}", said).format(rate=requests_per_second(float(rate), said))
        if rate
        else ""
    )
    held = _(", all requests held {hold} s", said).format(hold=number(hold, said)) if hold else ""
    if channel is not None:
        return _("{channel} busy: {figures}{paced}{held}", said).format(
            channel=channel, figures=figures, paced=paced, held=held
        )
    return _("site busy: {figures}{paced}{held}", said).format(
        figures=figures, paced=paced, held=held
    )


def site_pace(workers_seen: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The site's pace and limit over the live workers together (the dashboard's card): the
    requests per second the site accepted, the requests in flight and the concurrency limits
    (each worker's own, summed; a limit the workers of a channel share, Yandex Market's
    ``ym_parallel`` places, ``limit_shared``, counted once a channel, as its workers last
    said it: the highest), refusals in the last minute, and the slowest paced rate when any
    worker is paced; None when no live worker has reported its pace."""
    live = [w for w in workers_seen if w.get("live", True) and w.get("pace")]
    paces = [w["pace"] for w in live]
    if not paces:
        return None
    paced = [float(p["paced_rate"]) for p in paces if p.get("paced_rate")]
    limits: dict[str, int] = {"limit": 0, "max_limit": 0}
    shared: dict[object, dict[str, int]] = {}
    for w in live:
        pace = w["pace"]
        for key in limits:
            figure = int(pace.get(key) or 0)
            if pace.get("limit_shared"):
                kept = shared.setdefault(w.get("channel"), {"limit": 0, "max_limit": 0})
                kept[key] = max(kept[key], figure)
            else:
                limits[key] += figure
    for kept in shared.values():
        for key in limits:
            limits[key] += kept[key]
    return {
        "accepted_rate": round(sum(float(p.get("accepted_rate") or 0) for p in paces), 1),
        "in_flight": sum(int(p.get("in_flight") or 0) for p in paces),
        **limits,
        "refused_last_minute": sum(int(p.get("refused_last_minute") or 0) for p in paces),
        "paced_rate": min(paced) if paced else None,
        "workers": len(paces),
    }


def quarantine_by_reason(
    connection: Connection, now: datetime, ids: list[int] | None = None
) -> dict[str, dict[str, Any]]:
    """Per reason: how many deliveries on the channels ``ids`` (every channel for None) and
    rejected records wait, and the one that has waited longest (one query)."""
    ids = channel_ids(connection) if ids is None else ids
    m = listed(ids, states=[State.QUARANTINED.value], name="quarantined")
    ranked = (
        select(
            m.c.reason,
            m.c.message_id,
            m.c.updated_at,
            func.count().over(partition_by=m.c.reason).label("count"),
            func.row_number()
            .over(
                partition_by=m.c.reason,
                order_by=(m.c.updated_at, m.c.id, m.c.channel_id),
            )
            .label("rank"),
        )
        # A quarantined delivery has not changed since it was quarantined: updated_at is when.
        .where(m.c.state == State.QUARANTINED.value)
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


def quarantine_reason_kinds(
    connection: Connection, ids: list[int] | None = None
) -> dict[str, set[str | None]]:
    """Per reason of ``quarantine_by_reason`` (the same channels ``ids``), the targets of the
    channels its deliveries are quarantined on (None: an intake's record, no channel's): the
    notice's advice says each kind's (``report.words.advice_by_kind``)."""
    ids = channel_ids(connection) if ids is None else ids
    m = listed(ids, states=[State.QUARANTINED.value], name="quarantined")
    rows = connection.execute(
        select(m.c.reason, m.c.channel_id)
        .where(m.c.state == State.QUARANTINED.value)
        .group_by(m.c.reason, m.c.channel_id)
    ).all()
    targets = targets_by_id(connection)
    found: dict[str, set[str | None]] = {}
    for reason, channel_id in rows:
        target = targets.get(channel_id) if channel_id is not None else None
        found.setdefault(str(reason or ""), set()).add(target)
    return found


def quarantine_reason_targets(
    connection: Connection, ids: list[int] | None = None
) -> dict[str, str | None]:
    """Per reason of ``quarantine_by_reason`` (the same channels ``ids``), the target whose
    words its one row takes (``words.reason_target``: a marketplace's reason in the
    marketplace's words, «непонятный ответ площадки»): what ``status``, the dashboard and the
    notice name each reason by."""
    found = quarantine_reason_kinds(connection, ids)
    return {reason: reason_target(these) for reason, these in found.items()}


def blocked_aggregates(
    connection: Connection,
    kinds: KindPolicies,
    limit: int = BLOCKED_SHOWN,
    *,
    channel: Channel | list[int] = None,
) -> list[dict[str, Any]]:
    """Strictly ordered aggregates that cannot move on a channel (``channel``: an id, a name,
    the ids, or None for every channel): a quarantined next version, or a gap."""
    if not kinds.strict:
        return []
    m = aliased(Message, name="m")
    ids = channel if isinstance(channel, list) else channel_ids(connection, channel)
    d = deliveries.alias("d")
    c = channel_aggregates
    a = aggregates
    same = (c.c.aggregate_id == d.c.aggregate_id) & (c.c.channel_id == d.c.channel_id)
    lowest = (
        select(d.c.aggregate_id, d.c.channel_id, func.min(d.c.version).label("version"))
        .join(c, same)
        .where(
            on(d.c.channel_id, ids),
            order.is_strict(d.c, kinds),
            d.c.version > c.c.done_version,  # beyond the channel's cursor
            d.c.state.in_(values(LIVE)),
        )
        .group_by(d.c.aggregate_id, d.c.channel_id)
        .subquery()
    )
    # Strict order on a channel starts at the first version it received (contract 13).
    through = case(
        (c.c.done_version >= c.c.first_version - 1, c.c.done_version),
        else_=c.c.first_version - 1,
    )
    rows = connection.execute(
        select(
            a.c.kind,
            a.c.aggregate,
            lowest.c.aggregate_id,
            through,
            lowest.c.version,
            m.message_id,
            d.c.state,
            d.c.reason,
            channels.c.name,
        )
        .select_from(lowest)
        .join(a, a.c.id == lowest.c.aggregate_id)
        .join(channels, channels.c.id == lowest.c.channel_id)
        .join(
            c,
            (c.c.aggregate_id == lowest.c.aggregate_id) & (c.c.channel_id == lowest.c.channel_id),
        )
        .join(
            d,
            (d.c.aggregate_id == lowest.c.aggregate_id)
            & (d.c.channel_id == lowest.c.channel_id)
            & (d.c.version == lowest.c.version),
        )
        .join(m, m.id == d.c.message_pk)
        .where((d.c.state == State.QUARANTINED.value) | (lowest.c.version > through + 1))
        .order_by(a.c.kind, a.c.aggregate, lowest.c.channel_id)
        .limit(limit)
    ).all()
    # The missing versions that arrived but are kept on no channel (``messages.kept_nowhere``):
    # no gap, a seed's to give (review 32k), said with its command.
    kept = oldest_kept(
        connection, [r.aggregate_id for r in rows if r.state != State.QUARANTINED.value]
    )
    result = []
    for kind, aggregate, aggregate_id, done, version, message_id, state, reason, channel in rows:
        # Held by a quarantined message: only a person moves it. Held by a gap: the missing
        # version may still arrive (until EXCHANGE_GAP_TIMEOUT quarantines the next one).
        # Held by a kept version: only ``channels seed --from`` gives it to the channel.
        held_by = "quarantine" if state == State.QUARANTINED.value else "gap"
        if state == State.QUARANTINED.value and version == done + 1:
            cause = f"{message_id} is quarantined ({reason}): retry or cancel it"
        elif state == State.QUARANTINED.value:
            cause = f"{message_id} is quarantined ({reason}) after a gap at version {done + 1}"
        elif aggregate_id in kept:
            held_by = "kept"
            cause = (
                f"waiting for version {done + 1}, kept on no channel; {message_id} is next: "
                f"exchange channels seed {channel} --from {kept[aggregate_id]}"
            )
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
                "channel": channel,  # contract 13: whose strict order it is
                # held by a kept version: where ``channels seed`` starts (review 32k)
                "seed_from": kept.get(aggregate_id) if held_by == "kept" else None,
            }
        )
    return result


def when_ago(value: str | datetime | None, zone: str, now: datetime, lang: str = "en") -> str:
    """An absolute time in the display zone with how long ago it was beside it (issue 24 item
    8): ``2026-11-30 11:00:00 MSK (5 min ago)``, «… (5 мин назад)»."""
    if value is None or value == "":
        return "-"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    age = human_age((now - ensure_utc(moment)).total_seconds(), lang)
    return f"{local_time(moment, zone)} ({age} {'назад' if lang == 'ru' else 'ago'})"


def tables(
    figures: Status,
    zone: str = "UTC",
    lang: Lang = "en",
    *,
    channels: int = 1,
    named: dict[str, str] | None = None,
    targets: dict[str, str] | None = None,
    channel_pauses: dict[str, dict[str, Any]] | None = None,
    reason_targets: dict[str, str | None] | None = None,
) -> list[Table]:
    """``exchange status`` for a person: one table per question an operator asks; times in
    ``zone`` (EXCHANGE_DISPLAY_TZ) with their age beside them; in ``lang`` (contract 15,
    "Words": codes and ids as they are). ``channels``: how many channels the counts sum
    (contract 13): with more than one they count deliveries, a message once per channel, and
    the title says so. ``named`` (given where the words name the channels,
    ``words.channels_named``: each channel's target by its name): the words about a channel
    that does not answer or is busy name it (contract 13), never "the site". ``targets``:
    each registered channel's target by its name, so that a marketplace's row says the
    marketplace even where the channels are not named (``words.channel_subject``).
    ``channel_pauses``: each channel paused on its own (``control.paused_channels``): its
    loops' rows say so, never «running» (owner 31 item 6). ``reason_targets``
    (``quarantine_reason_targets``): a marketplace's reason in the marketplace's words."""
    title = (
        _("messages by state", lang)
        if channels <= 1
        else _(
            "deliveries by state ({channels} channels: a message counts once on each)", lang
        ).format(channels=channels)
    )
    states = Table(title=title)
    states.add_column(pgettext("status column", "state", lang))
    states.add_column(pgettext("status column", "count", lang), justify="right")
    for state, count in figures.counts.items():
        if state == State.WITHHELD.value and not count:
            continue  # contract 13: said where a channel withholds prices, else as before
        waits = figures.awaiting_channel + figures.awaiting_1c + figures.awaiting_person
        if state == State.DELAYED.value and waits:
            # the rows below say which wait: the state's own row is not "delayed (retry)" then
            states.add_row(word("delayed_with_waits", lang), str(count))
        else:
            states.add_row(_named("state", state, lang), str(count))
        if state == State.DELAYED.value and figures.awaiting_channel:
            # a wait for the marketplace is no retry (``waits.awaiting``), as the dashboard
            states.add_row("  " + word("delayed_awaiting", lang), str(figures.awaiting_channel))
        if state == State.DELAYED.value and figures.awaiting_1c:
            # a wait on 1C's other price type is neither a retry nor the marketplace's
            states.add_row("  " + word("delayed_awaiting_1c", lang), str(figures.awaiting_1c))
        if state == State.DELAYED.value and figures.awaiting_person:
            # a wait on an operator's decision on the quarantined main price: nor 1C's either
            states.add_row(
                "  " + word("delayed_awaiting_person", lang), str(figures.awaiting_person)
            )
        waiting = figures.waiting_for_site
        if state == State.IN_PROGRESS.value and waiting:
            until = local_time(waiting["until"], zone)
            said = word("in_progress_waiting", lang).format(until=until)
            states.add_row("  " + said, str(waiting["count"]))

    queue = Table(title=_("queue", lang))
    queue.add_column(pgettext("status column", "figure", lang))
    queue.add_column(pgettext("status column", "value", lang), justify="right")
    queue.add_row(_("new messages", lang), str(figures.new_messages))
    queue.add_row("  " + _("of which held behind the quarantine", lang), str(figures.held))
    queue.add_row(_("oldest undelivered", lang), human_age(figures.oldest_undelivered_age_s, lang))
    minutes = int(RECENT.total_seconds() // 60)
    queue.add_row(
        _("error share ({minutes} min)", lang).format(minutes=minutes),
        f"{figures.error_share:.1%}" if lang == "en" else percent(figures.error_share, lang),
    )
    queue.add_row(
        _("delivery rate ({minutes} min)", lang).format(minutes=minutes),
        f"{figures.delivery_rate_per_min:.1f}/min"
        if lang == "en"
        else _("{rate}/min", lang).format(rate=number(figures.delivery_rate_per_min, lang)),
    )
    for reason, count in figures.cancelled_by_reason.items():
        said = _("cancelled: {reason}", lang).format(reason=_named("reason", reason, lang))
        queue.add_row(Text(said), str(count))

    hours = int(WORKERS_KEPT.total_seconds() // 3600)
    kinds_of = {**(targets or {}), **(named or {})}
    naming = named is not None or channels > 1
    subjects: dict[str | None, str | None] = {
        channel: channel_subject(channel, kinds_of.get(channel), lang, named=naming)
        for channel in {*kinds_of, *(w["channel"] for w in figures.workers if w.get("channel"))}
    }
    if targets is not None and len(targets) == 1:
        # One channel registered: the process's own row is its loop's (the reporter writes it
        # there without EXCHANGE_CHANNELS), so EXCHANGE_TARGET=ozon's row says Ozon.
        subjects[None] = subjects.get(next(iter(targets)))
    # What the rows shown are about: a channel named, or a marketplace, where "the site" is
    # no word for it (contract 13, 14; ``--channel ozon`` without EXCHANGE_CHANNELS too).
    about = {
        subjects.get(w.get("channel"))
        for w in figures.workers
        if w.get("channel") is not None or None in subjects
    }
    on = naming or about - {None} != set()
    lone = next(iter(about)) if channels <= 1 and len(about) == 1 else None
    workers_table = Table(title=_("workers", lang))
    for column in (
        pgettext("status column", "worker", lang),
        pgettext("status column", "last seen", lang),
        # the dashboard's «Сайт»: one set of words (issue 34); with several channels, or
        # EXCHANGE_CHANNELS, the dashboard's «Ответы канала» (issue 31 item 7); the one
        # channel shown, where it is no site, by its name («Канал ozon (Ozon)», «Ozon»)
        (
            lone[:1].upper() + lone[1:]
            if lone is not None
            else word("breaker_channels" if on else "breaker", lang)
        ),
        pgettext("status column", "delivery", lang),
        (
            pgettext("status column", "channel's pace", lang)
            if on
            else pgettext("status column", "site's pace", lang)
        ),
    ):
        workers_table.add_column(column, overflow="fold")
    shown, more = shown_workers(figures.workers)
    for worker in shown:
        seen = local_time(worker["heartbeat_at"], zone)
        age = human_age(worker["heartbeat_age_s"], lang)
        workers_table.add_row(
            Text(worker["worker_id"]),
            _("{time} ({age} ago)", lang).format(time=seen, age=age),
            Text(site_words(worker, zone, lang)),
            Text(
                _delivery_words(
                    worker,
                    figures.pause or _channel_pause(channel_pauses, worker.get("channel")),
                    zone,
                    lang,
                    channels=on,
                )
            ),
            Text(pace_cell(worker, lang, channel=subjects.get(worker.get("channel")))),
        )
    if more:
        workers_table.add_row(
            Text(
                ngettext("and {count} more stopped", "and {count} more stopped", more, lang).format(
                    count=more
                )
            )
        )
    silent_channels = unreachable_channels(figures.workers, named) if named else {}
    if silent_channels:
        workers_table.caption = "; ".join(
            _(
                "{channel} has not answered since {time}: delivery to it resumes by itself "
                "when it answers",
                lang,
            ).format(
                channel=channel_named(channel, named.get(channel) if named else None, lang),
                time=local_time(since, zone),
            )
            for channel, since in silent_channels.items()
        )
    elif figures.site_unreachable_since:
        workers_table.caption = _(
            "the site has not answered since {time}: delivery resumes by itself when it answers",
            lang,
        ).format(time=local_time(figures.site_unreachable_since, zone))
    elif figures.last_stopped:
        gone = figures.last_stopped
        workers_table.caption = _(
            "the last worker, {worker}, stopped {age} ago ({time})", lang
        ).format(
            worker=gone["worker_id"],
            age=human_age(gone["stopped_age_s"], lang),
            time=local_time(gone["stopped_at"], zone),
        )
        if gone["silent"]:
            workers_table.caption += "; " + silent_others(gone["silent"], zone, lang)
    elif not figures.workers:
        workers_table.caption = _("no worker has reported in the last {hours} h", lang).format(
            hours=hours
        )

    quarantine = Table(title=_("quarantine: the oldest entry per reason", lang))
    quarantine.add_column(pgettext("status column", "reason", lang), overflow="fold")
    quarantine.add_column(pgettext("status column", "count", lang), justify="right")
    quarantine.add_column(pgettext("status column", "oldest message_id", lang), overflow="fold")
    quarantine.add_column(pgettext("status column", "waiting since", lang), overflow="fold")
    for reason, entry in figures.quarantine_by_reason.items():
        quarantine.add_row(
            Text(_named("reason", reason, lang, (reason_targets or {}).get(reason))),
            str(entry["count"]),
            Text(entry["oldest_message_id"]),
            f"{local_time(entry['oldest_quarantined_at'], zone)} "
            f"({human_age(entry['oldest_age_s'], lang)})",
        )
    if not figures.quarantine_by_reason:
        quarantine.caption = _("the quarantine is empty", lang)

    blocked = Table(title=_("blocked aggregates (strict order)", lang))
    for column in (
        pgettext("status column", "kind", lang),
        pgettext("status column", "aggregate", lang),
        pgettext("status column", "delivered through", lang),
        pgettext("status column", "state", lang),
        pgettext("status column", "cause", lang),
    ):
        blocked.add_column(column, overflow="fold")
    for entry in figures.blocked:
        blocked.add_row(
            Text(_named("kind", entry["kind"], lang)),
            Text(entry["aggregate"]),
            str(entry["delivered_through"]),
            _("blocked by {held_by}", lang).format(
                held_by=_named("held_by", entry["held_by"], lang)
            ),
            Text(matching(entry["cause"], _BLOCKED_CAUSES, lang)),
        )
    if not figures.blocked:
        blocked.caption = _("none", lang)
    elif len(figures.blocked) >= BLOCKED_SHOWN:
        blocked.caption = _("the first {count}, by kind and aggregate", lang).format(
            count=BLOCKED_SHOWN
        )
    return [states, queue, workers_table, quarantine, blocked]


def site_words(worker: dict[str, Any], zone: str = "UTC", lang: Lang = "en") -> str:
    """What a live worker hears of the site, in the dashboard's words (``words.py``'s
    ``breaker_*``): no answer since when (refused connections, timeouts: never "answers with
    errors"), else its breaker as the site's answers; "-" for a worker not live."""
    if not worker["live"]:
        return "-"
    if worker["unreachable_since"]:
        when = local_time(worker["unreachable_since"], zone)
        return word("breaker_unreachable", lang).format(when=when)
    state = worker["breaker"]
    said = word(f"breaker_{state}", lang) if f"breaker_{state}" in WORDS else state
    if state == "open" and worker["breaker_until"]:  # a half-open one's time lies in the past
        said += " → " + local_time(worker["breaker_until"], zone)
    return said


def pace_cell(worker: dict[str, Any], lang: Lang = "en", *, channel: str | None = None) -> str:
    """A live worker's site's pace, in the dashboard's words: with no answer at all, the
    attempts that failed in the last minute (never "site busy"); ``channel``: its channel as
    the words name it where it is no site (``pace_words``)."""
    if not worker["live"]:
        return "-"
    if worker["unreachable_since"]:
        failed = (worker["pace"] or {}).get("refused_last_minute") or 0
        return word("pace_unreachable", lang).format(failed=failed)
    return pace_words(worker["pace"], lang, channel)


# The English causes ``blocked_aggregates`` writes (``--json``'s), as the console says them.
_BLOCKED_CAUSES = (
    (
        re.compile(r"(?P<id>\S+) is quarantined \((?P<reason>[^)]*)\): retry or cancel it"),
        N_("{id} is quarantined ({reason}): retry or cancel it"),
    ),
    (
        re.compile(
            r"(?P<id>\S+) is quarantined \((?P<reason>[^)]*)\) after a gap at version (?P<v>\d+)"
        ),
        N_("{id} is quarantined ({reason}) after a gap at version {v}"),
    ),
    (
        re.compile(r"waiting for version (?P<v>\d+) \(a gap\); (?P<id>\S+) is next"),
        N_("waiting for version {v} (a gap); {id} is next"),
    ),
    (
        re.compile(
            r"waiting for version (?P<v>\d+), kept on no channel; (?P<id>\S+) is next: "
            r"exchange channels seed (?P<name>\S+) --from (?P<first>\S+)"
        ),
        N_(
            "waiting for version {v}, kept on no channel; {id} is next: exchange channels "
            "seed {name} --from {first}"
        ),
    ),
)


def _named(group: str, code: str, lang: Lang, target: str | None = None) -> str:
    """A code in Russian words (``words.name``, a reason of a marketplace's channel,
    ``target``, in its words); English keeps the code as it was printed."""
    return code if lang == "en" else name(group, code, lang, target)


def shown_workers(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The worker rows a person reads (``status``'s table, the dashboard's): every one not
    stopped, and the last stopped of each channel (a process's own rows, of no channel, as
    one more); how many other stopped rows there are, counted in one line instead. Short runs
    without EXCHANGE_WORKER_ID leave rows that only pruning removes (owner 31 item 7: 45 rows
    after 15 runs); ``--json`` keeps them all. A process whose delivery loops have rows of
    their own (``<worker id>/<channel>``, contract 13: with EXCHANGE_CHANNELS) is read on
    those rows: its own row (no channel, no pace: «обработчик ещё не сообщал») is not shown
    beside them, so four workers read as four, not eight (review mpadvice item 7)."""
    loops = {str(row["worker_id"]).rpartition("/")[0] for row in rows if row.get("channel")}
    rows = [r for r in rows if r.get("channel") or r["worker_id"] not in loops]
    last: dict[str | None, dict[str, Any]] = {}
    for row in rows:
        if row.get("state") != WorkerState.STOPPED:
            continue
        kept = last.get(row.get("channel"))
        if kept is None or (row["stopped_at"] or "") > (kept["stopped_at"] or ""):
            last[row.get("channel")] = row
    kept_ids = {id(row) for row in last.values()}
    shown = [r for r in rows if r.get("state") != WorkerState.STOPPED or id(r) in kept_ids]
    return shown, len(rows) - len(shown)


def _channel_pause(
    channel_pauses: dict[str, dict[str, Any]] | None, channel: str | None
) -> dict[str, Any] | None:
    """The pause of ``channel`` alone (``control.paused_channels``'s row), as ``figures.pause``
    says an operator's."""
    row = (channel_pauses or {}).get(channel or "")
    return None if row is None else {**row, "by": "operator"}


def _delivery_words(
    worker: dict[str, Any],
    pause: dict[str, Any] | None,
    zone: str = "UTC",
    lang: Lang = "en",
    *,
    channels: bool = False,
) -> str:
    """A worker's delivery as ``status`` prints it, from its row's state and the one pause
    (contract 15): stopped with when, silent since when, not live (contract 6: never
    "running", whatever it last said), paused as ``pause`` says, else running. ``channels``:
    the rows are about channels or a marketplace, where no site is waited for (the
    dashboard's rule; rev32q: an Ozon channel's row said it waits for the site)."""
    state = worker.get("state")
    if state == WorkerState.STOPPED:
        stopped = _("STOPPED at {time}", lang).format(time=local_time(worker["stopped_at"], zone))
        # Its last word about the site still holds while no worker is live (``holding``).
        if not worker["paused"]:
            return stopped
        return _("{stopped} (last said: PAUSED: {paused})", lang).format(
            stopped=stopped, paused=error_words(worker["paused"], lang)
        )
    since = local_time(worker["heartbeat_at"], zone)
    if state == WorkerState.NOT_LIVE or worker.get("live") is False:
        return _("SILENT since {time} (not live: delivers nothing)", lang).format(time=since)
    if pause is not None and pause["by"] == "operator":
        said = _("PAUSED by operator {operator}", lang).format(operator=pause["operator"])
    elif worker["paused"]:
        # Why the worker paused, in English as the target said it (``--json``'s): said in
        # ``lang`` by the words' patterns, as the history and the workbench say it.
        said = _("PAUSED: {paused}", lang).format(paused=error_words(worker["paused"], lang))
    elif worker.get("unreachable_since"):
        said = word("waits_for_channel" if channels else "waits_for_site", lang)
    else:
        said = _("running", lang)
    if state == WorkerState.SILENT:
        return _("SILENT since {time} (still live; last said: {said})", lang).format(
            time=since, said=said
        )
    return said


def biography(connection: Connection, message_id: str, channel: Channel = None) -> dict[str, Any]:
    """A message and its history: its delivery on ``channel`` (for None, the first live
    channel's of those it has, else the first dropped one's; a rejected record's own state),
    and the history of that delivery and of intake (every channel's for None). A dropped
    channel's events and delivery carry ``channel_removed_at`` (review ozon 34b: a name added
    again is another channel)."""
    ids = channel_ids(connection, channel)
    m = listed(ids, homeless=True)  # contract 1: a message no channel took is found too
    removed = removed_at(connection)
    rows = (
        connection.execute(
            select(m, sku_sent_since(m).label("sku_sent_since"))
            .where(m.c.message_id == message_id)
            .order_by(m.c.channel_id)
        )
        .mappings()
        .all()
    )
    live = [r for r in rows if r["channel_id"] not in removed]
    row = (live or rows)[0] if rows else None
    if row is None:
        raise OperatorError(f"no message with id {message_id!r}")
    events = select(history).where(history.c.message_pk == row["id"])
    if channel is not None:
        events = events.where(history.c.channel_id.is_(None) | on(history.c.channel_id, ids))
    entries = connection.execute(events.order_by(history.c.id)).mappings().all()
    names = channel_names(connection)
    story = [
        {
            "at": _iso(e["at"]),
            # contract 13: the delivery's channel; None for intake's own events
            "channel": names.get(e["channel_id"]) if e["channel_id"] is not None else None,
            "channel_removed_at": removed.get(e["channel_id"]),
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
    found: dict[str, Any] = {
        "message": {
            "message_id": row["message_id"],
            "channel": names.get(row["channel_id"]) if row["channel_id"] is not None else None,
            "channel_removed_at": removed.get(row["channel_id"]),
            "kind": row["kind"],
            "aggregate": row["aggregate"],
            "version": row["version"],
            "state": row["state"],
            # delayed waiting for its channel, not for a retry; of those, waiting for 1C's
            # other price type or for a person (``waits.wait_of``)
            **_waits_of(connection, row),
            # quarantined: the prices that wait for a person's decision on it (words35b item 1)
            "waiting_on_it": (
                waiting_on(connection, row["message_id"], row["channel_id"])
                if row["state"] == State.QUARANTINED.value
                else []
            ),
            "reason": row["reason"],
            "attempts": row["attempts"],
            "superseded_by": row["superseded_by"],
            "last_status": row["last_status"],
            # A quarantined strikethrough price said still shown, as true now (review rev39
            # W4: a price of its SKU went since without it): ``quarantine.shown_now``.
            "last_error": shown_now(
                row["last_error"],
                row["state"] == State.QUARANTINED.value and bool(row["sku_sent_since"]),
            ),
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
        # contract 13: the message's state on every channel (a rejected record: none)
        "deliveries": on_every_channel(connection, row["id"]),
    }
    nowhere = row["channel_id"] is None and not row["rejected"]
    found["message"].update(
        nowhere_facts(
            nowhere,
            nowhere and bool(untaken_kinds(connection, [row["kind"]])),
            seed_from(connection, [row["message_id"]]).get(row["message_id"]) if nowhere else None,
        )
    )
    return found


def on_every_channel(connection: Connection, pk: int) -> list[dict[str, Any]]:
    """The message's delivery on each channel, oldest channel first: its channel's name,
    state, reason, attempts and when it last changed (``find``'s and the message page's
    "state on every channel")."""
    rows = connection.execute(
        select(
            channels.c.name,
            channels.c.dropped_at,
            deliveries.c.state,
            deliveries.c.reason,
            deliveries.c.attempts,
            deliveries.c.updated_at,
            wait_of(deliveries.c.message_pk, deliveries.c.channel_id, deliveries.c.state),
        )
        .join(channels, channels.c.id == deliveries.c.channel_id)
        .where(deliveries.c.message_pk == pk)
        .order_by(deliveries.c.channel_id)
    ).all()
    return [
        {
            "channel": name,
            # a dropped channel's (None: a live one's): its name may be a live channel's too
            "channel_removed_at": _iso(dropped_at),
            "state": state,
            "reason": reason,
            "attempts": attempts,
            "updated_at": _iso(updated_at),
            **waits_said(wait),
        }
        for name, dropped_at, state, reason, attempts, updated_at, wait in rows
    ]


def _waits_of(connection: Connection, row: Any) -> dict[str, bool]:
    """What a message's delivery (``row``: its ``id``, ``channel_id``, ``state``) waits for,
    as ``waits_said`` says it."""
    if row["state"] != State.DELAYED.value or row["channel_id"] is None:
        return waits_said("")
    d = deliveries
    found = connection.execute(
        select(wait_of(d.c.message_pk, d.c.channel_id, d.c.state)).where(
            d.c.message_pk == row["id"], d.c.channel_id == row["channel_id"]
        )
    ).scalar()
    return waits_said(found or "")


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


def sources_table(entries: list[dict[str, Any]], lang: Lang = "en") -> Table:
    table = Table(title=_("broker sources", lang))
    table.add_column(pgettext("status column", "source", lang))
    table.add_column(pgettext("status column", "queue or stream", lang))
    table.add_column(pgettext("status column", "ready", lang), justify="right")
    table.add_column(pgettext("status column", "pending", lang), justify="right")
    table.add_column(pgettext("status column", "consuming", lang))
    for entry in entries:
        consuming = _consuming(entry, lang)
        if "error" in entry:
            table.add_row(Text(entry["source"]), Text(entry["error"]), "", "", Text(consuming))
            continue
        where = entry.get("queue") or entry.get("stream") or ""
        if entry.get("group"):
            where += " " + _("(group {group})", lang).format(group=entry["group"])
        table.add_row(
            Text(entry["source"]),
            Text(where),
            _figure(entry.get("ready"), lang),
            _figure(entry.get("pending"), lang),
            Text(consuming),
        )
    return table


def _consuming(entry: dict[str, Any], lang: Lang = "en") -> str:
    consuming = entry.get("consuming")
    if consuming is True:
        words = _("yes", lang)
    elif consuming is None:
        words = _("no worker says", lang)
    else:
        words = _("no, since {since}: {cause}", lang).format(
            since=entry.get("since"), cause=entry.get("cause")
        )
    warning = entry.get("warning")
    if warning:
        words += "; " + _("since {since}: {text}", lang).format(
            since=warning["since"], text=warning["text"]
        )
    return words


def _figure(value: Any, lang: Lang = "en") -> str:
    return _("unknown", lang) if value is None else str(value)

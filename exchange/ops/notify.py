"""The database side of the operators' notifications (issue 16 item 6): what needs a person now,
what the operators were last told, and the one conditional statement that gives one process
the right to tell them.

Cheap by design, since a worker asks each cycle: the told row first (one read by primary key);
the quarantine's count and newest entry (the state index); the live workers (a small table); the
operator's pause (one row). Whether work waits is asked only when no worker reported lately.
The details a message shows (the quarantine by reason) are read only when one is sent.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, not_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from exchange.db.channels import kept_nowhere
from exchange.db.engine import is_postgres
from exchange.db.on_channels import (
    Channel,
    channel_ids,
    channel_names,
    channel_targets,
    listed,
    on,
)
from exchange.db.schema import deliveries, messages, notifications, staging, workers
from exchange.domain.notify import (
    Situation,
    Stop,
    Told,
    channel_pause_stop,
    is_stop,
    no_channel_stop,
    unserved_stop,
)
from exchange.domain.policy import KindPolicies
from exchange.domain.states import PENDING, State, values
from exchange.ops import sign_ins
from exchange.ops.attention import unserved
from exchange.ops.find import held_condition
from exchange.ops.status import (
    holding,
    last_deliveries,
    quarantine_by_reason,
    quarantine_reason_kinds,
    site_failing,
    worker_rows,
)
from exchange.ops.withheld_behind import behind_counts
from exchange.queue import control

ROW = "operators"
OUTCOME_MAX = 500


@dataclass
class Snapshot:
    """What needs a person, with what a message says about it."""

    situation: Situation
    workers: list[dict[str, Any]] = field(default_factory=list)
    operator_pause: dict[str, Any] | None = None
    # Each channel an operator paused on its own (``pause --channel``), its pause by its name.
    channel_pauses: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Each channel registered and not dropped, its target by its name: what the words count
    # and name (``words.channels_named``).
    channels: dict[str, str] = field(default_factory=dict)
    # Work that waits while no worker reports: untaken staging rows, movable messages, and the
    # age of the oldest of either (seconds).
    waiting_rows: int = 0
    waiting_messages: int = 0
    waiting_age_s: float | None = None
    last_heartbeat_age_s: float | None = None
    # Per way in, sign-ins refused lately with none accepted since (``ops/sign_ins.py``).
    refused_sign_ins: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Filled only for a message: reason -> {"count", "oldest_message_id", "oldest_age_s", ...}
    quarantine_by_reason: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Filled only for a message: each reason's targets, the channels' it is quarantined on
    # (``status.quarantine_reason_kinds``): its name and each kind's advice (review 33).
    reason_targets: dict[str, set[str | None]] = field(default_factory=dict)
    # Filled only for a message, with more than one channel registered (contract 13): how many
    # deliveries each channel (by name) holds in quarantine; intake's records under None.
    quarantine_by_channel: dict[str | None, int] = field(default_factory=dict)
    # Filled only for a message (contract 13): per channel (by name) with withheld prices,
    # {"count", "oldest_message_id", "oldest_age_s", "said", "behind"}: the channel's own
    # words, and how many of them a newer price waits behind (``ops.withheld_behind``).
    withheld_by_channel: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Given the channels configured (EXCHANGE_CHANNELS): work waiting on a registered channel
    # none of them serves, by name ({"target", "count"}): ``attention.unserved``, the one
    # computation of ``status``'s ``unserved:NAME`` causes.
    unserved: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Messages of a kind no channel takes, kept with no delivery, by kind ({"count",
    # "oldest"}): ``db.channels.kept_nowhere``, the one computation of ``status``'s
    # ``no-channel:KIND`` causes.
    no_channel: dict[str, dict[str, Any]] = field(default_factory=dict)


def snapshot(
    connection: Connection,
    now: datetime,
    kinds: KindPolicies,
    *,
    stalled_after: float,
    staging_connection: Connection | None = None,
    channel: Channel = None,
    configured: Collection[str] | None = None,
) -> Snapshot:
    """What needs a person now (without the quarantine's details: ``add_details``), of the
    deliveries on ``channel`` (every channel for None) and intake's rejected records.
    ``configured``: the channels the process configures by name (EXCHANGE_CHANNELS; None
    without): work waiting on a registered channel none of them serves is a stop of that
    channel (``unserved:NAME``), as ``status`` makes it a cause."""
    ids = channel_ids(connection, channel)
    quarantine = listed(ids, states=[State.QUARANTINED.value], name="quarantined")
    quarantined, newest = connection.execute(
        select(func.count(), func.max(quarantine.c.updated_at)).where(
            quarantine.c.state == State.QUARANTINED.value
        )
    ).one()
    # Prices a channel took and withholds until a person confirms them (contract 13): the
    # state index, as the quarantine's.
    withheld, newest_withheld = connection.execute(
        select(func.count(), func.max(deliveries.c.updated_at)).where(
            on(deliveries.c.channel_id, ids), deliveries.c.state == State.WITHHELD.value
        )
    ).one()
    # The rows whose breaker and pause hold delivery back, as ``exchange status`` reads them
    # (contract 15: one truth): a worker that restarted under its id is no stopped one.
    shown = worker_rows(connection, now)
    live = holding(shown)
    pause = control.operator_pause(connection)
    registered = channel_targets(connection)
    # An operator's pause of one channel is that channel's stop (contract 13), for a channel
    # registered and not dropped (a dropped one delivers nothing to stop).
    held = {
        name: row for name, row in control.paused_channels(connection).items() if name in registered
    }
    stops: set[str] = set()
    if site_failing(shown, last_deliveries(connection)):
        stops.add(Stop.BREAKER)
    if any(w["paused"] for w in live):
        stops.add(Stop.TOKEN)
    if pause is not None:
        stops.add(Stop.OPERATOR)
    stops.update(channel_pause_stop(name) for name in held)
    waiting_unserved = unserved(connection, configured, channel) if configured is not None else {}
    stops.update(unserved_stop(name) for name in waiting_unserved)
    nowhere = kept_nowhere(
        connection, (kind for kind, _policy in kinds.policies), coalescing=kinds.latest_wins
    )
    stops.update(no_channel_stop(kind) for kind in nowhere)
    found = Snapshot(
        situation=Situation(0, None, frozenset()),
        workers=live,
        operator_pause=pause,
        channel_pauses=held,
        channels=registered,
        unserved=waiting_unserved,
        no_channel=nowhere,
    )
    # A worker that stopped cleanly is none (its row stays only to say when it stopped).
    last_beat = connection.execute(
        select(func.max(workers.c.heartbeat_at)).where(workers.c.stopped_at.is_(None))
    ).scalar()
    found.last_heartbeat_age_s = (now - last_beat).total_seconds() if last_beat else None
    stalled = timedelta(seconds=stalled_after)
    if pause is None and (last_beat is None or now - last_beat >= stalled):
        _waiting(found, connection, staging_connection or connection, now, kinds, ids)
        if found.waiting_age_s is not None and found.waiting_age_s >= stalled_after:
            stops.add(Stop.NO_WORKER)
    found.refused_sign_ins = sign_ins.refused_lately(connection, now)
    for door in found.refused_sign_ins:
        if door in sign_ins.CAUSE_DOORS:
            stops.add(Stop(f"sign-in-refused:{door}"))
    # Live workers only: one gone quiet delivers nothing, so a stop that went with it (its
    # breaker, ``status.site_failing``) is no resumption.
    reporting = sum(1 for w in shown if w["live"])
    found.situation = Situation(
        int(quarantined),
        newest,
        frozenset(stops),
        reporting,
        withheld=int(withheld),
        newest_withheld_at=newest_withheld,
    )
    return found


def _waiting(
    found: Snapshot,
    connection: Connection,
    staging_connection: Connection,
    now: datetime,
    kinds: KindPolicies,
    ids: list[int],
) -> None:
    rows, oldest_row = staging_connection.execute(
        select(func.count(), func.min(staging.c.created_at)).where(staging.c.taken_at.is_(None))
    ).one()
    d = deliveries
    pending, oldest_message = connection.execute(
        select(func.count(), func.min(messages.c.created_at))
        .select_from(d.join(messages, messages.c.id == d.c.message_pk))
        .where(
            on(d.c.channel_id, ids),
            d.c.state.in_(values(PENDING)),
            not_(held_condition(kinds)),
        )
    ).one()
    found.waiting_rows, found.waiting_messages = int(rows), int(pending)
    oldest = min((t for t in (oldest_row, oldest_message) if t is not None), default=None)
    found.waiting_age_s = (now - oldest).total_seconds() if oldest is not None else None


def add_details(
    found: Snapshot, connection: Connection, now: datetime, channel: Channel = None
) -> None:
    """What a message shows of the quarantine: counts by reason and the oldest of each, and,
    with more than one channel, the count on each channel."""
    ids = channel_ids(connection, channel)
    found.quarantine_by_reason = quarantine_by_reason(connection, now, ids)
    found.reason_targets = quarantine_reason_kinds(connection, ids)
    if len(channel_ids(connection)) > 1:
        found.quarantine_by_channel = quarantined_by_channel(connection, ids)
    if found.situation.withheld:
        found.withheld_by_channel = withheld_by_channel(connection, now, ids)


def withheld_by_channel(
    connection: Connection, now: datetime, ids: list[int]
) -> dict[str, dict[str, Any]]:
    """Per channel of ``ids`` holding withheld prices (by name, the channels' order): how
    many, the oldest (its message_id and how long it has been withheld) and what the channel
    said of it (``last_error``, its own words)."""
    names = channel_names(connection)
    d, m = deliveries.c, messages.c
    counted = connection.execute(
        select(d.channel_id, func.count(), func.min(d.updated_at))
        .where(on(d.channel_id, ids), d.state == State.WITHHELD.value)
        .group_by(d.channel_id)
        .order_by(d.channel_id)
    ).all()
    found: dict[str, dict[str, Any]] = {}
    for channel_id, count, oldest_at in counted:
        oldest = connection.execute(
            select(m.message_id, d.last_error)
            .select_from(deliveries.join(messages, m.id == d.message_pk))
            .where(
                d.channel_id == channel_id,
                d.state == State.WITHHELD.value,
                d.updated_at == oldest_at,
            )
            .order_by(d.message_pk)
            .limit(1)
        ).first()
        found[names.get(channel_id, str(channel_id))] = {
            "count": int(count),
            "oldest_message_id": oldest.message_id if oldest else None,
            "oldest_age_s": (now - oldest_at).total_seconds() if oldest_at else None,
            "said": oldest.last_error if oldest else None,
            # those a newer price waits behind: not to confirm (``ops.withheld_behind``)
            "behind": behind_counts(connection, [channel_id]).get(channel_id, 0),
        }
    return found


def quarantined_by_channel(connection: Connection, ids: list[int]) -> dict[str | None, int]:
    """How many deliveries each channel of ``ids`` holds in quarantine (by name, the channels'
    order; none left out), and intake's rejected records under None (when there are any)."""
    names = channel_names(connection)
    counted: dict[str | None, int] = {names[i]: 0 for i in sorted(ids) if i in names}
    quarantine = listed(ids, states=[State.QUARANTINED.value], name="quarantined")
    for channel_id, count in connection.execute(
        select(quarantine.c.channel_id, func.count())
        .where(quarantine.c.state == State.QUARANTINED.value)
        .group_by(quarantine.c.channel_id)
    ):
        key = names.get(channel_id) if channel_id is not None else None
        counted[key] = counted.get(key, 0) + int(count)
    return {name: count for name, count in counted.items() if count or name is not None}


def told(connection: Connection) -> Told:
    row = (
        connection.execute(select(notifications).where(notifications.c.name == ROW))
        .mappings()
        .first()
    )
    if row is None:
        return Told()
    return Told(
        version=row["version"],
        attempted_at=row["attempted_at"],
        quarantine_mark=row["quarantine_mark"],
        stops=frozenset(s for s in row["stops"].split(",") if is_stop(s)),
    )


def last_told(connection: Connection) -> dict[str, Any] | None:
    """What ``exchange status`` and the workbench show of the notifications: when the operators
    were last told (or an attempt was made), by which process, how it went, and the stops
    told; None when nothing was ever told (no way configured, or nothing to tell yet)."""
    row = (
        connection.execute(select(notifications).where(notifications.c.name == ROW))
        .mappings()
        .first()
    )
    if row is None or row["attempted_at"] is None:
        return None
    return {
        "attempted_at": row["attempted_at"].isoformat(),
        "sent_by": row["sent_by"],
        "outcome": row["outcome"],
        "stops_told": [s for s in (row["stops"] or "").split(",") if s],
    }


def _values(state: Told, sent_by: str, outcome: str | None) -> dict[str, Any]:
    return {
        "version": state.version,
        "attempted_at": state.attempted_at,
        "quarantine_mark": state.quarantine_mark,
        "stops": ",".join(sorted(state.stops)),
        "sent_by": sent_by[:200],
        "outcome": outcome[:OUTCOME_MAX] if outcome else outcome,
    }


def remember(
    connection: Connection, read: Told, new: Told, *, sent_by: str, outcome: str | None
) -> bool:
    """Write ``new`` if the row is still at ``read.version``: True for exactly one of several
    processes that read the same row (the first row is inserted; a second insert conflicts)."""
    if read.version == 0:
        dialect_insert = postgresql.insert if is_postgres(connection) else sqlite.insert
        # RETURNING, not rowcount: psycopg reports -1 for an INSERT … ON CONFLICT.
        inserted = connection.execute(
            dialect_insert(notifications)
            .values(name=ROW, **_values(new, sent_by, outcome))
            .on_conflict_do_nothing(index_elements=["name"])  # another process was first
            .returning(notifications.c.version)
        ).first()
        return inserted is not None
    changed = connection.execute(
        update(notifications)
        .where(notifications.c.name == ROW, notifications.c.version == read.version)
        .values(**_values(new, sent_by, outcome))
        .returning(notifications.c.version)
    ).first()
    return changed is not None


def outcome(connection: Connection, version: int, text: str) -> None:
    """How the message of ``version`` went ("sent", or why not): shown by ``exchange notify``."""
    connection.execute(
        update(notifications)
        .where(notifications.c.name == ROW, notifications.c.version == version)
        .values(outcome=text[:OUTCOME_MAX])
    )


def give_back(connection: Connection, claimed: Told, previous: Told, text: str) -> None:
    """A message that could not be sent: what it was to tell stays news (told again after the
    period), and the attempt still counts, so a failing way is tried once a period."""
    connection.execute(
        update(notifications)
        .where(notifications.c.name == ROW, notifications.c.version == claimed.version)
        .values(
            version=claimed.version + 1,
            quarantine_mark=previous.quarantine_mark,
            stops=",".join(sorted(previous.stops)),
            outcome=text[:OUTCOME_MAX],
        )
    )

"""Storing a chunk of intake (contract 1): the accepted rows as messages (set-based: one JSON
parameter, or on SQLite one ``executemany`` of tuples, ``ON CONFLICT DO NOTHING``, their
``taken`` history), duplicates and version conflicts told apart, the rejected rows as
quarantine records; what it did as an ``IntakeReport``. Moved out of ``staging_table``, which
takes them in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    String,
    Text,
    and_,
    any_,
    cast,
    exists,
    false,
    func,
    insert,
    literal,
    null,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from exchange.db.channels import mark_kept
from exchange.db.engine import is_postgres
from exchange.db.rowset import _time_writer, rowset
from exchange.db.schema import (
    UTCDateTime,
    aggregates,
    deliveries,
    history,
    messages,
    price_owners,
)
from exchange.domain.identity import MAX_VERSION, legacy_message_id, rejected_id
from exchange.domain.reasons import Reason
from exchange.domain.search_key import search_key
from exchange.domain.states import Event, State
from exchange.intake.contracts import (
    EMPTY_1C_DATE,
    STAGING_TEXT_LIMITS,
    Accepted,
    Rejected,
    StagingRow,
    price_aggregate,
    same_payload,
)
from exchange.queue.deliveries import COPIED, late_cursors, new_cursors, new_deliveries
from exchange.queue.transitions import Change, apply, insert_history


@dataclass
class IntakeReport:
    taken: int = 0
    messages: int = 0
    duplicates: int = 0
    rejected: int = 0

    def add(self, other: IntakeReport) -> None:
        self.taken += other.taken
        self.messages += other.messages
        self.duplicates += other.duplicates
        self.rejected += other.rejected


def _insert(connection: Connection, table: Any) -> Any:
    if is_postgres(connection):
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


V = TypeVar("V")


def settle_ids(connection: Connection, verdicts: list[V]) -> list[V]:
    """``verdicts`` with the id of each accepted intent whose message was made before
    2026-12 under the id of that time (``identity.legacy_message_id``, which differs only for
    a Cyrillic kind or aggregate) set to that id: the message's id never changes, so the
    intent sent again is its duplicate (or a version conflict), never a second message under
    a second Idempotency-Key. One query, only for intents whose two ids differ."""
    legacy = {
        v.message_id: old
        for v in verdicts
        if isinstance(v, Accepted)
        # only a non-ASCII kind or aggregate is transliterated: the rest need no second digest
        and not (v.row.kind.isascii() and v.row.aggregate.isascii())
        and (old := legacy_message_id(v.row.kind, v.row.aggregate, v.row.aggregate_version))
        != v.message_id
    }
    if not legacy:
        return verdicts
    found = set(
        connection.execute(
            select(messages.c.message_id).where(messages.c.message_id.in_(set(legacy.values())))
        ).scalars()
    )
    if not found:
        return verdicts
    return [
        replace(v, message_id=legacy[v.message_id])
        if isinstance(v, Accepted) and legacy.get(v.message_id) in found
        else v
        for v in verdicts
    ]


def _store(
    connection: Connection,
    verdicts: list[Accepted | Rejected],
    now: datetime,
    dealt: range,
    shifts: Mapping[int, int] | None = None,
) -> IntakeReport:
    """Store one chunk; its ``i``-th row's message gets the rank ``dealt[i]``, and its
    delivery on a channel that rank moved by the channel's shift (``shifts``, channel id ->
    ranks, ``urgency.shifts``; none: 0)."""
    verdicts = settle_ids(connection, verdicts)
    report = IntakeReport(taken=len(verdicts))
    rejected: list[tuple[StagingRow, Reason, str]] = []
    fresh: dict[str, Accepted] = {}  # the first row of the chunk that carries each message
    later: list[Accepted] = []  # rows whose message an earlier row of the chunk carries
    foreign = _pin_prices(connection, verdicts)
    for verdict in verdicts:
        if isinstance(verdict, Rejected):
            rejected.append((verdict.row, verdict.reason, verdict.detail))
        elif verdict.row.id in foreign:
            rejected.append((verdict.row, Reason.INVALID_CONTRACT, foreign[verdict.row.id]))
        elif verdict.message_id in fresh:
            later.append(verdict)
        else:
            fresh[verdict.message_id] = verdict

    # Insert first, look up only what was not inserted: in the common case (new versions)
    # nothing is looked up. Not inserted = already a message (taken before, or inserted by
    # another worker meanwhile).
    rank = {verdict.row.id: dealt[i] for i, verdict in enumerate(verdicts)}
    inserted = _insert_messages(connection, list(fresh.values()), now, rank, shifts)
    # Those no channel takes: kept with no delivery, marked for ``status`` (contract 13).
    mark_kept(connection, (item.row.kind for item in fresh.values()), inserted)
    report.messages = len(inserted)
    again = [item for mid, item in fresh.items() if mid not in inserted] + later
    existing = _existing(connection, {item.message_id for item in again})
    duplicates: list[tuple[int, Accepted]] = []
    for item in again:
        pk, payload = existing[item.message_id]
        if same_payload(item.row.kind, payload, item.payload):
            duplicates.append((pk, item))
        else:
            rejected.append((item.row, Reason.VERSION_CONFLICT, _conflict(item)))
    duplicates.sort(key=lambda found: found[1].row.id)
    report.duplicates = len(duplicates)
    insert_history(
        connection,
        (
            Change(
                pk,
                Event.DUPLICATE,
                None,
                None,
                detail=f"staging row #{item.row.id} carried this message again: "
                "recorded, not sent again",
            )
            for pk, item in duplicates
        ),
        now,
    )
    rejected.sort(key=lambda found: found[0].id)
    report.rejected = _insert_rejected(connection, rejected, now)
    return report


# What a price aggregate was fixed to, as (sku, price_type), read or written for one chunk.
_PIN_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("kind", String()),
    ("aggregate", String()),
    ("sku", String()),
    ("sku_key", String()),
    ("price_type", String()),
)


def _pin_prices(connection: Connection, verdicts: list[Accepted | Rejected]) -> dict[int, str]:
    """One aggregate is one price (contract 1): the first accepted version of a ``price``
    aggregate fixes its sku and price_type on the aggregate row; a row naming others is
    quarantined ``invalid-contract``. Returns those rows: staging id -> detail.

    Set-based, three statements per chunk with prices: create the chunk's new aggregates with
    the identity of their first row (in staging order, so of several versions of a new
    aggregate in one chunk the first row decides), and their cursors; read every identity
    back. Only where an aggregate read has none yet (made before migration 0003, every message
    since pruned), its identity is fixed and the identities read again. PostgreSQL, two
    workers taking rows of one new aggregate at once: the second's insert waits for the first's
    commit and does nothing, and its read (a new snapshot, READ COMMITTED) then sees the
    identity the first one fixed.
    """
    named: list[tuple[Accepted, str, str]] = []
    first: dict[str, tuple[str, str]] = {}
    for verdict in verdicts:
        if isinstance(verdict, Rejected) or verdict.row.kind != "price":
            continue
        identity = verdict.price
        if identity is None:  # a verdict not made by validate: read from its payload
            wire = json.loads(verdict.payload)
            identity = (wire["sku"], wire["price_type"])
        named.append((verdict, *identity))
        first.setdefault(verdict.row.aggregate, identity)
    if not named:
        return {}
    rows = [
        ("price", aggregate, sku, search_key(sku), kind) for aggregate, (sku, kind) in first.items()
    ]
    source, params = rowset(connection, "pins", _PIN_COLUMNS, rows, name="pins")
    same = and_(aggregates.c.kind == source.c.kind, aggregates.c.aggregate == source.c.aggregate)
    _made_with_cursors(
        connection,
        _insert(connection, aggregates)
        .from_select(
            ["kind", "aggregate", "sku", "sku_key", "price_type"],
            select(
                source.c.kind,
                source.c.aggregate,
                source.c.sku,
                source.c.sku_key,
                source.c.price_type,
            )
            .where(~exists().where(same))
            .order_by(source.c.kind, source.c.aggregate),
        )
        .on_conflict_do_nothing(),
        params,
    )
    fixed = (
        select(source.c.sku, source.c.price_type)
        .where(same, aggregates.c.sku.is_(None))
        .correlate(aggregates)
    )
    # Each aggregate's sku and price type, and who owns that pair (contract 15; None: no one
    # yet), in one read: an aggregate that owns its pair (every one after its first chunk)
    # costs the owner rule nothing more. Only the aggregates that need a look come back: an
    # aggregate fixed to the identity its first row here names and owning that pair (every
    # one after its first chunk, as a rule) is settled in the database, and its rows are
    # checked against that identity below; sending 5,000 settled rows back a chunk cost more
    # than the rest of this check.
    settled = and_(
        aggregates.c.sku == source.c.sku,
        aggregates.c.price_type == source.c.price_type,
        price_owners.c.aggregate == aggregates.c.aggregate,
    )
    read = (
        select(
            aggregates.c.aggregate,
            aggregates.c.sku,
            aggregates.c.price_type,
            price_owners.c.aggregate,
        )
        .join_from(source, aggregates, same)
        .outerjoin(
            price_owners,
            and_(
                price_owners.c.sku == aggregates.c.sku,
                price_owners.c.price_type == aggregates.c.price_type,
            ),
        )
        # NULL (no identity yet, no owner) is not settled: the row comes back
        .where(func.coalesce(settled, false()) == false())
    )
    found = connection.execute(read, params).all()  # at once: row by row costs a call a row
    if any(sku is None for _, sku, _, _ in found):  # rare: fixed, then read again
        connection.execute(
            update(aggregates)
            .where(aggregates.c.kind == "price", aggregates.c.sku.is_(None))
            .where(exists(fixed))
            .values(
                sku=fixed.with_only_columns(source.c.sku).scalar_subquery(),
                sku_key=fixed.with_only_columns(source.c.sku_key).scalar_subquery(),
                price_type=fixed.with_only_columns(source.c.price_type).scalar_subquery(),
            ),
            params,
        )
        found = connection.execute(read, params).all()
    # An aggregate not read back is settled: fixed to its first row's identity, and its owner.
    pins: dict[str, tuple[str, str]] = dict(first)
    owners: dict[str, str | None] = {aggregate: aggregate for aggregate in first}
    for aggregate, sku, price_type, owner in found:
        pins[aggregate] = (sku, price_type)
        owners[aggregate] = owner
    foreign: dict[int, str] = {}
    for item, sku, price_type in named:
        aggregate = item.row.aggregate
        pin = pins.get(aggregate)
        if pin is None or pin == (sku, price_type):
            continue
        differs = " and ".join(
            f"{name} {given!r} (not {fixed_to!r})"
            for name, given, fixed_to in (("sku", sku, pin[0]), ("price_type", price_type, pin[1]))
            if given != fixed_to
        )
        foreign[item.row.id] = (
            f"aggregate {aggregate!r} is the price of sku {pin[0]!r} in price type {pin[1]!r}, "
            f"fixed by its first version; this row names {differs}. One aggregate is one price: "
            f"write this price under aggregate {price_aggregate(sku, price_type)!r} "
            "(<sku>/<price_type>)"
        )
    unclaimed: list[tuple[Accepted, str, str]] = []
    for item, sku, price_type in named:
        if item.row.id in foreign:
            continue  # refused for its aggregate's own pair: it claims nothing
        owner = owners.get(item.row.aggregate)
        if owner is None:
            unclaimed.append((item, sku, price_type))
        elif owner != item.row.aggregate:
            foreign[item.row.id] = _not_the_owner(item, sku, price_type, owner)
    foreign.update(_owned_elsewhere(connection, unclaimed))
    return foreign


def _not_the_owner(item: Accepted, sku: str, price_type: str, owner: str) -> str:
    return (
        f"sku {sku!r} in price type {price_type!r} belongs to aggregate {owner!r}, the "
        f"first that carried it; this row names it under aggregate {item.row.aggregate!r}. "
        "One sku in one price type is one aggregate: write this price under aggregate "
        f"{owner!r}"
    )


_OWNER_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("sku", String()),
    ("price_type", String()),
    ("aggregate", String()),
)


def _owned_elsewhere(
    connection: Connection, named: list[tuple[Accepted, str, str]]
) -> dict[int, str]:
    """One (sku, price type), one aggregate (contract 15): the first aggregate accepted for a
    pair owns it (``price_owners``); a row naming the pair under another aggregate is
    ``invalid-contract``, naming the owner. ``named``: the rows whose pair no one owned when
    ``_pin_prices`` read it. Returns the rows refused: staging id -> detail.

    One statement per chunk with such rows (a pair new to the service): claim the pairs no one
    owns yet for the first row of the chunk that names each (in staging order; the rows already
    refused by their aggregate's own sku and price type are not among ``named``); a second
    reads the owners of the pairs it did not claim. PostgreSQL, two intakes claiming one pair
    at once: the primary key decides, the second insert waits for the first's commit and does
    nothing, and its read (READ COMMITTED) sees the owner. The pairs are claimed in key order,
    so two chunks never wait on each other in a circle.
    """
    if not named:
        return {}
    first: dict[tuple[str, str], str] = {}
    for item, sku, price_type in named:
        first.setdefault((sku, price_type), item.row.aggregate)
    rows = [(sku, price_type, aggregate) for (sku, price_type), aggregate in first.items()]
    source, params = rowset(connection, "owners", _OWNER_COLUMNS, rows, name="owners")
    same = and_(
        price_owners.c.sku == source.c.sku, price_owners.c.price_type == source.c.price_type
    )
    owners = {
        (sku, price_type): aggregate
        for sku, price_type, aggregate in connection.execute(
            _insert(connection, price_owners)
            .from_select(
                ["sku", "price_type", "aggregate"],
                select(source.c.sku, source.c.price_type, source.c.aggregate)
                .where(~exists().where(same))
                .order_by(source.c.sku, source.c.price_type),
            )
            .on_conflict_do_nothing()
            .returning(price_owners.c.sku, price_owners.c.price_type, price_owners.c.aggregate),
            params,
        )
    }
    if len(owners) < len(first):  # claimed by another intake a moment ago: read who
        owners.update(
            ((sku, price_type), aggregate)
            for sku, price_type, aggregate in connection.execute(
                select(price_owners.c.sku, price_owners.c.price_type, price_owners.c.aggregate)
                .join_from(source, price_owners, same)
                .where(true()),
                params,
            )
        )
    refused: dict[int, str] = {}
    for item, sku, price_type in named:
        owner = owners.get((sku, price_type))
        if owner is None or owner == item.row.aggregate:
            continue
        refused[item.row.id] = _not_the_owner(item, sku, price_type, owner)
    return refused


def _conflict(item: Accepted) -> str:
    row = item.row
    return (
        f"version {row.aggregate_version} of {row.kind} {row.aggregate!r} was already taken "
        f"as {item.message_id} with a different payload"
    )


def _existing(connection: Connection, ids: set[str]) -> dict[str, tuple[int, str]]:
    if not ids:
        return {}
    found = connection.execute(
        select(messages.c.message_id, messages.c.id, messages.c.payload).where(
            messages.c.message_id.in_(ids)
        )
    )
    return {mid: (pk, payload) for mid, pk, payload in found}


# The columns of a new message that come from its staging row, with their database types: sent
# as one parameter per column (PostgreSQL arrays) or one JSON parameter (SQLite), never one
# parameter per value. Drivers parse and adapt statements with tens of thousands of
# placeholders slowly; a constant statement is parsed once and cached. The last, the rank it
# is dealt in the claim order, is its deliveries' (``new_deliveries``), not the message's.
_FROM_ROW: tuple[tuple[str, Any], ...] = (
    ("message_id", String()),
    ("message_id_key", String()),
    ("kind", String()),
    ("aggregate", String()),
    ("aggregate_key", String()),
    ("version", BigInteger()),
    ("schema_version", String()),
    ("payload", Text()),
    ("source_ref", String()),
    ("name", String()),
    ("created_at", DateTime()),  # naive UTC, as UTCDateTime stores it
    ("staging_id", BigInteger()),
    ("claim_rank", BigInteger()),
)


def _row_values(item: Accepted, now: datetime, rank: dict[int, int]) -> tuple[Any, ...]:
    row = item.row
    return (
        item.message_id,
        search_key(item.message_id),
        row.kind,
        row.aggregate,
        search_key(row.aggregate),
        row.aggregate_version,
        row.schema_version,
        item.payload,
        row.source_ref,
        row.name,
        _created_at(row, now),
        row.id,
        rank[row.id],
    )


def _created_at(row: StagingRow, now: datetime) -> datetime:
    """1C's empty date (or a NULL, where a DBA made the column nullable) is a created_at 1C
    did not fill in: the time the row was taken stands in for it, as the column's DEFAULT now
    would have; never year 1 on the wire or in the age of the oldest message."""
    created = row.created_at
    return created if isinstance(created, datetime) and created != EMPTY_1C_DATE else now


def _insert_messages(
    connection: Connection,
    items: list[Accepted],
    now: datetime,
    rank: dict[int, int],
    shifts: Mapping[int, int] | None = None,
) -> set[str]:
    """Insert the messages not yet known, with their ``taken`` history; returns their ids.

    Set-based: the rows go to the database as a few parameters, the aggregates are created
    and joined there, and the history is written from the inserted rows.
    """
    if not items:
        return set()
    _make_aggregates(connection, items)
    # Each new message's deliveries, one per channel taking its kind, are written from the
    # inserted rows and their ranks, and the cursors of the channels that had none
    # (``late_cursors``). The message row itself holds no delivery's state.
    copied = [messages.c[name] for name in COPIED]
    start = _delivery_start(now)
    if not is_postgres(connection):
        return _insert_messages_sqlite(connection, items, now, rank, copied, shifts)
    source, params = _source(connection, items, now, rank)
    given = select(source).cte("given")  # read twice: the messages, then their ranks
    message_start = {"rejected": False, "taken_at": now, "updated_at": now}
    names = [name for name, _ in _FROM_ROW if name != "claim_rank"]
    rows = (
        select(
            *(given.c[name] for name in names),
            aggregates.c.id,
            *(literal(value, messages.c[name].type) for name, value in message_start.items()),
        )
        .join_from(
            given,
            aggregates,
            and_(aggregates.c.kind == given.c.kind, aggregates.c.aggregate == given.c.aggregate),
        )
        .where(true())
        .order_by(given.c.staging_id)
    )
    statement = (
        _insert(connection, messages)
        .from_select([*names, "aggregate_id", *message_start], rows)
        .on_conflict_do_nothing(index_elements=["message_id"])
    )
    # One statement: insert, and write history and deliveries from what it returned.
    new = statement.returning(
        messages.c.id, messages.c.message_id, messages.c.staging_id, *copied
    ).cte("new")
    written = _taken_history(new, now).cte("written")
    ranked = (
        select(new, given.c.claim_rank)
        .join_from(new, given, given.c.message_id == new.c.message_id)
        .subquery("ranked")
    )
    fanned = (
        new_deliveries(ranked, True, shifts, start=start)
        .returning(deliveries.c.aggregate_id, deliveries.c.channel_id, deliveries.c.version)
        .cte("fanned")
    )
    late = late_cursors(fanned, True).cte("late")
    found = select(new.c.message_id).add_cte(written).add_cte(fanned).add_cte(late)
    return set(connection.execute(found, params).scalars())


def _delivery_start(now: datetime) -> dict[str, Any]:
    """What a new delivery starts with but its rank: new, never tried, its gap clock now."""
    return {"state": State.NEW.value, "attempts": 0, "waiting_since": now, "updated_at": now}


def _insert_messages_sqlite(
    connection: Connection,
    items: list[Accepted],
    now: datetime,
    rank: dict[int, int],
    copied: list[Any],
    shifts: Mapping[int, int] | None,
) -> set[str]:
    """``_insert_messages`` on SQLite."""
    # SQLite, one writer at a time (BEGIN IMMEDIATE): the rows inserted now are exactly those
    # with an id above the highest id before.
    before = connection.execute(select(func.coalesce(func.max(messages.c.id), 0))).scalar_one()
    inserted = _insert_rows_sqlite(connection, items, now, rank)
    new_rows = select(messages.c.id, messages.c.staging_id, *copied).where(messages.c.id > before)
    connection.execute(_taken_history(new_rows.subquery(), now))
    # Each new message's rank (one JSON parameter, ``db.rowset``), each message found by its
    # unique id: the rowset has no index to be searched.
    ranks, params = rowset(
        connection,
        "ranks",
        _RANK_COLUMNS,
        ((item.message_id, rank[item.row.id]) for item in items),
        name="ranks",
    )
    ranked = (
        new_rows.add_columns(ranks.c.claim_rank)
        .join_from(ranks, messages, ranks.c.message_id == messages.c.message_id)
        .subquery("ranked")
    )
    connection.execute(new_deliveries(ranked, False, shifts, start=_delivery_start(now)), params)
    fanned = select(deliveries.c.aggregate_id, deliveries.c.channel_id, deliveries.c.version)
    connection.execute(
        late_cursors(fanned.where(deliveries.c.message_pk > before).subquery(), False)
    )
    if inserted == len(items):
        return {item.message_id for item in items}
    return set(
        connection.execute(select(messages.c.message_id).where(messages.c.id > before)).scalars()
    )


# The columns of a new message as ``_insert_rows_sqlite`` writes them: ``_FROM_ROW``'s but the
# rank, then
# the aggregate's id looked up by (kind, aggregate), then the values every new message starts
# with (``_START``).
_START = ("rejected", "taken_at", "updated_at")
# A new message's rank (``_insert_messages_sqlite``): its id, and its deliveries' first rank.
_RANK_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("message_id", String()),
    ("claim_rank", BigInteger()),
)
_SQLITE_INSERT = (
    f"INSERT INTO messages ({', '.join([name for name, _ in _FROM_ROW[:-1]])}, aggregate_id, "
    f"{', '.join(_START)}) VALUES ({', '.join('?' * (len(_FROM_ROW) - 1))}, "
    "(SELECT id FROM aggregates WHERE kind = ? AND aggregate = ?), "
    f"{', '.join('?' * len(_START))}) ON CONFLICT (message_id) DO NOTHING"
)


def _insert_rows_sqlite(
    connection: Connection, items: list[Accepted], now: datetime, rank: dict[int, int]
) -> int:
    """The messages of ``items`` (their aggregates made), in staging order, as one
    ``executemany`` of plain tuples on the driver's cursor, in ``connection``'s transaction;
    returns how many were inserted. On SQLite this is cheaper than one JSON parameter: each
    value read back out of the JSON text cost more than binding it, and building the JSON
    cost SQLAlchemy's processing of each time (``_insert_messages`` with the history and the
    deliveries: 1.29 s of CPU for 50,000 messages against 1.57 s). Every value is written as
    SQLAlchemy would write it (times as naive UTC text)."""
    to_text = _time_writer(connection)
    at = to_text(now)
    start = (False, at, at)
    rows = [
        (
            *values[:10],
            at if values[10] is now else to_text(values[10]),
            values[11],
            item.row.kind,
            item.row.aggregate,
            *start,
        )
        for item in items
        for values in (_row_values(item, now, rank),)
    ]
    driver: Any = connection.connection.driver_connection  # the same transaction
    cursor = driver.cursor()
    try:
        cursor.executemany(_SQLITE_INSERT, rows)
        return int(cursor.rowcount)
    finally:
        cursor.close()


_AGGREGATE_COLUMNS: tuple[tuple[str, Any], ...] = (("kind", String()), ("aggregate", String()))


def _make_aggregates(connection: Connection, items: list[Accepted]) -> None:
    """Create the aggregates of ``items`` not known yet, each with its cursor.

    A price's aggregate is made (with its sku and price type) and given its cursor by
    ``_pin_prices`` before this, in the same transaction: only the other kinds' aggregates are
    sent here, so that a chunk of prices spends no statement on aggregates twice.
    """
    pairs = list(
        dict.fromkeys((i.row.kind, i.row.aggregate) for i in items if i.row.kind != "price")
    )
    if not pairs:
        return
    source, params = rowset(connection, "aggregates", _AGGREGATE_COLUMNS, pairs, name="made")
    same = and_(aggregates.c.kind == source.c.kind, aggregates.c.aggregate == source.c.aggregate)
    _made_with_cursors(
        connection,
        _insert(connection, aggregates)
        .from_select(
            ["kind", "aggregate"],
            select(source.c.kind, source.c.aggregate)
            # the aggregate is new (a concurrent insert of it is a conflict, ignored)
            .where(~exists().where(same))
            .order_by(source.c.kind, source.c.aggregate),
        )
        .on_conflict_do_nothing(),
        params,
    )


def _made_with_cursors(connection: Connection, made: Any, params: dict[str, Any]) -> None:
    """Run ``made`` (an ``INSERT INTO aggregates``) and give each aggregate it made its
    cursors (``deliveries.new_cursors``: every channel that takes its kind, from version 1).
    An aggregate made before (by an earlier chunk, or another intake at once) is not given
    any here: a channel without its cursor gets one with its first delivery of it
    (``deliveries.late_cursors``). The insert returns the ids it made; PostgreSQL: the
    cursors of those (one array parameter); SQLite (one writer): of the rows from the lowest
    of them on."""
    ids = connection.execute(made.returning(aggregates.c.id), params).scalars().all()
    if not ids:
        return
    postgres = is_postgres(connection)
    if postgres:
        these = aggregates.c.id == any_(literal(list(ids), ARRAY(BigInteger())))
    else:
        these = aggregates.c.id >= min(ids)
    new = select(aggregates.c.id, aggregates.c.kind).where(these)
    connection.execute(new_cursors(new.subquery("new_aggregates"), postgres))


def _source(
    connection: Connection, items: list[Accepted], now: datetime, rank: dict[int, int]
) -> tuple[Any, dict[str, Any]]:
    """The rows as a table in the database, from one JSON parameter (``db.rowset``): the
    database parses one text parameter in C; a parameter per value costs the driver far more
    (escaping, adapting, parsing statements of thousands of placeholders)."""
    return rowset(connection, "rows", _FROM_ROW, (_row_values(item, now, rank) for item in items))


def _taken_history(source: Any, now: datetime) -> Any:
    """``taken`` history rows for the messages ``source`` selects (columns id, staging_id)."""
    return insert(history).from_select(
        ["message_pk", "at", "event", "from_state", "to_state", "detail"],
        select(
            source.c.id,
            literal(now, UTCDateTime()),
            literal(Event.TAKEN.value),
            null(),
            literal(State.NEW.value),
            literal("from staging row #") + cast(source.c.staging_id, String),
        ),
    )


def _held_to_columns(row: StagingRow) -> dict[str, Any]:
    """A rejected row's fields as the messages table holds them: a text cut to its column's
    length, a version outside BIGINT as 0 (the staging row keeps the original, and the
    quarantine record says what was wrong), so one row can never fail its chunk's insert."""
    fields: dict[str, Any] = {}
    for name, limit in STAGING_TEXT_LIMITS.items():
        value = getattr(row, name)
        if value is None and name == "source_ref":
            fields[name] = None
        else:
            fields[name] = ("" if value is None else str(value))[:limit]
    version = row.aggregate_version
    in_range = type(version) is int and -MAX_VERSION - 1 <= version <= MAX_VERSION
    fields["version"] = version if in_range else 0
    return fields


def _insert_rejected(
    connection: Connection, rows: list[tuple[StagingRow, Reason, str]], now: datetime
) -> int:
    if not rows:
        return 0
    statement = (
        _insert(connection, messages)
        .on_conflict_do_nothing(index_elements=["message_id"])
        .returning(messages.c.id, messages.c.message_id)
    )
    params = [
        {
            "message_id": rejected_id(row.id),
            "aggregate_id": None,
            "rejected": True,
            **_held_to_columns(row),
            "name": row.name,
            "payload": row.payload if isinstance(row.payload, str) else "",
            "created_at": _created_at(row, now),
            "staging_id": row.id,
            "taken_at": now,
            "state": State.QUARANTINED.value,
            "reason": reason.value,
            "last_error": detail,
            "updated_at": now,
        }
        for row, reason, detail in rows
    ]
    inserted = {mid: pk for pk, mid in connection.execute(statement, params)}
    details = {rejected_id(row.id): (reason, detail) for row, reason, detail in rows}
    changes = [
        Change(
            pk,
            Event.REJECTED,
            None,
            State.QUARANTINED,
            detail=f"{details[mid][0].value}: {details[mid][1]}",
        )
        for mid, pk in inserted.items()
    ]
    apply(connection, changes, now)
    return len(inserted)

"""Intake (contract 1): untaken staging rows -> messages, duplicates or quarantine records.

Each chunk of rows is handled in one transaction that also marks the rows taken, so a row
ends as exactly one of: a new message, a recorded duplicate, or a quarantine record. When
staging lives in another database the rows are marked taken after that commit, and a row
taken twice is recognised by its (kind, aggregate, version) and recorded as a duplicate.
Validation is per row (``contracts.validate``); storing is set-based, a few statements per
chunk whatever its size: the chunk's accepted rows go to the database as one JSON parameter,
which creates the aggregates, inserts the messages (``ON CONFLICT DO NOTHING``) and writes
their ``taken`` history from what was inserted. Only rows not inserted (a message already
known) are looked up, to tell a duplicate from a version conflict. Memory is bounded by the
chunk, never by the number of rows waiting. Coalescing is the next stage (``coalesce``),
after every chunk is in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    Engine,
    LargeBinary,
    String,
    Text,
    and_,
    any_,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal,
    null,
    select,
    text,
    true,
    update,
)
from sqlalchemy.exc import DBAPIError

from exchange.db.engine import is_postgres, transaction
from exchange.db.rowset import rowset
from exchange.db.schema import UTCDateTime, aggregates, cml_packages, history, messages, staging
from exchange.domain import urgency
from exchange.domain.clock import ensure_utc
from exchange.domain.identity import MAX_VERSION, PACKAGE_VERSIONS_FROM, rejected_id
from exchange.domain.policy import KindPolicies, Policy
from exchange.domain.reasons import Reason
from exchange.domain.states import Event, State
from exchange.failpoints import failpoint
from exchange.intake.contracts import (
    EMPTY_1C_DATE,
    STAGING_TEXT_LIMITS,
    Accepted,
    Rejected,
    StagingRow,
    price_aggregate,
    validate,
)
from exchange.queue import order
from exchange.queue.transitions import Change, apply, insert_history

log = logging.getLogger(__name__)

CHUNK = 5000
# After this many new messages, the planner's statistics are refreshed at once. PostgreSQL:
# until autovacuum gets round to it, the planner takes the freshly loaded tables for empty and
# a claim after a full reload took 0.7-1.1 s instead of a few ms (measured with python -m
# bench). SQLite keeps no statistics unless asked: without them the claim read every new
# message through the state index, 5 ms per batch at 20,000 new messages instead of 0.3 ms
# through the aggregate index (python -m bench.lease_cost).
ANALYZE_AFTER = 10_000


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


def take(
    engine: Engine,
    staging_engine: Engine | None,
    kinds: dict[str, Policy],
    now: datetime,
    *,
    chunk: int = CHUNK,
) -> IntakeReport:
    """Take every staging row that is untaken now, chunk by chunk."""
    separate = staging_engine is not None and staging_engine is not engine
    source = staging_engine if separate and staging_engine is not None else engine
    with transaction(source, read_only=True) as connection:
        last_id = connection.execute(
            select(func.max(staging.c.id)).where(staging.c.taken_at.is_(None))
        ).scalar()
    if last_id is None:
        return IntakeReport()
    # Where this take is dealt into the claim order (domain/urgency.py): read once, so that
    # the take keeps its staging order across its chunks.
    with transaction(engine, read_only=True) as connection:
        head = connection.execute(order.head_rank(KindPolicies.of(kinds))).scalar()
    if not separate and is_postgres(engine):
        report = _take_overlapped(engine, kinds, now, last_id, chunk, head)
    else:
        report = _take_in_turn(engine, source, separate, kinds, now, last_id, chunk, head)
    if report.taken:
        log.info(
            "intake: %d rows taken: %d messages, %d duplicates, %d rejected",
            report.taken,
            report.messages,
            report.duplicates,
            report.rejected,
        )
    if report.messages >= ANALYZE_AFTER:
        analyze(engine)
    return report


def analyze(engine: Engine) -> None:
    """Refresh the planner's statistics of the tables the claim reads."""
    with transaction(engine) as connection:
        if is_postgres(connection):
            connection.execute(text("ANALYZE aggregates, messages"))
        else:  # sampled: a few hundred ms at 1,000,000 messages instead of seconds
            connection.execute(text("PRAGMA analysis_limit=1000"))
            connection.execute(text("ANALYZE aggregates"))
            connection.execute(text("ANALYZE messages"))


def _take_in_turn(
    engine: Engine,
    source: Engine,
    separate: bool,
    kinds: dict[str, Policy],
    now: datetime,
    last_id: int,
    chunk: int,
    head: int | None,
) -> IntakeReport:
    """One chunk after the other: SQLite (one writer), or staging in another database."""
    report = IntakeReport()
    after = 0
    while True:
        if separate:
            with transaction(source, read_only=True) as connection:
                rows = _select_rows(connection, after, last_id, chunk, lock=False)
            if not rows:
                break
            with transaction(engine) as connection:
                report.add(
                    _store(
                        connection,
                        _verdicts(rows, kinds),
                        now,
                        _dealt(head, report.taken, len(rows)),
                    )
                )
            failpoint("intake-stored")
            with transaction(source) as connection:
                _mark_taken(connection, [row.id for row in rows], now)
        else:
            with transaction(engine) as connection:
                rows = _select_rows(connection, after, last_id, chunk, lock=is_postgres(connection))
                if not rows:
                    break
                verdicts = _verdicts(rows, kinds)
                report.add(_store(connection, verdicts, now, _dealt(head, report.taken, len(rows))))
                _mark_taken(connection, [row.id for row in rows], now)
                failpoint("intake-stored")
        failpoint("intake-chunk-done")
        after = rows[-1].id
    return report


def _take_overlapped(
    engine: Engine,
    kinds: dict[str, Policy],
    now: datetime,
    last_id: int,
    chunk: int,
    head: int | None,
) -> IntakeReport:
    """PostgreSQL with staging in the same database: two cores at work, not one in turn.

    While one chunk is stored and committed (the database works, this process waits on it, in
    a helper thread), the next chunk is selected, locked and validated in its own transaction
    (this process works). Chunks are still stored one at a time and in order, each in one
    transaction that also marks its rows taken.
    """
    report = IntakeReport()
    after = 0
    position = 0  # rows of the take before this chunk: its first rank is head + position
    with ThreadPoolExecutor(1, thread_name_prefix="intake-store") as pool:
        storing: Future[IntakeReport] | None = None
        while True:
            opened = ExitStack()
            with ExitStack() as on_error:
                on_error.push(opened)  # an error below rolls this chunk's transaction back
                connection = opened.enter_context(transaction(engine))
                rows = _select_rows(connection, after, last_id, chunk, lock=True)
                verdicts = _verdicts(rows, kinds)
                if storing is not None:
                    report.add(storing.result())
                    storing = None
                on_error.pop_all()
            if not rows:
                opened.close()
                break
            after = rows[-1].id
            dealt = _dealt(head, position, len(rows))
            position += len(rows)
            storing = pool.submit(_store_chunk, opened, connection, rows, verdicts, now, dealt)
    return report


def _store_chunk(
    opened: ExitStack,
    connection: Connection,
    rows: list[StagingRow],
    verdicts: list[Accepted | Rejected],
    now: datetime,
    dealt: range,
) -> IntakeReport:
    with opened:  # commits, or rolls back on an error
        report = _store(connection, verdicts, now, dealt)
        _mark_taken(connection, [row.id for row in rows], now)
        failpoint("intake-stored")
    failpoint("intake-chunk-done")
    return report


def _dealt(head: int | None, before: int, count: int) -> range:
    """The ranks of a chunk of ``count`` rows after the take's first ``before`` rows."""
    return urgency.ranks(head, before + count)[before:]


def _verdicts(rows: list[StagingRow], kinds: dict[str, Policy]) -> list[Accepted | Rejected]:
    return [validate(row, kinds) for row in rows]


def _select_rows(
    connection: Connection, after: int, last_id: int, chunk: int, *, lock: bool
) -> list[StagingRow]:
    return _packages_marked(connection, _read_rows(connection, after, last_id, chunk, lock=lock))


def _packages_marked(connection: Connection, rows: list[StagingRow]) -> list[StagingRow]:
    """The rows with a version from PACKAGE_VERSIONS_FROM up that a 1C package staged (a
    ``price`` row whose version is a package's number, in ``cml_packages`` beside the staging
    table) marked as such: only they may carry such a version (contract 1, 9a)."""
    high = {
        row.aggregate_version
        for row in rows
        if row.kind == "price"
        and type(row.aggregate_version) is int
        and PACKAGE_VERSIONS_FROM <= row.aggregate_version <= MAX_VERSION
    }
    if not high:
        return rows
    packages = set(
        connection.execute(
            select(cml_packages.c.version).where(cml_packages.c.version.in_(sorted(high)))
        ).scalars()
    )
    return [
        replace(row, package=True)
        if row.kind == "price" and row.aggregate_version in packages
        else row
        for row in rows
    ]


def _read_rows(
    connection: Connection, after: int, last_id: int, chunk: int, *, lock: bool
) -> list[StagingRow]:
    query = (
        select(
            staging.c.id,
            staging.c.kind,
            staging.c.aggregate,
            staging.c.aggregate_version,
            staging.c.payload,
            staging.c.schema_version,
            staging.c.source_ref,
            staging.c.created_at,
        )
        .where(staging.c.taken_at.is_(None), staging.c.id > after, staging.c.id <= last_id)
        .order_by(staging.c.id)
        .limit(chunk)
    )
    if lock:  # PostgreSQL: workers taking intake at once share the rows out
        query = query.with_for_update(skip_locked=True)
    if is_postgres(connection):  # the database checked every type and every text on INSERT
        try:
            return [_pg_row(tuple(row)) for row in connection.execute(query)]
        except (DBAPIError, ValueError, OverflowError):  # a created_at of 'infinity': no time
            loose = query.with_only_columns(
                *list(query.selected_columns)[:-1], cast(staging.c.created_at, Text)
            )
            return [_loose_row(tuple(row), raw_time=True) for row in connection.execute(loose)]
    # SQLite stores what it is given: text in the version column, bytes that are not UTF-8, a
    # BLOB, a created_at that is no time. Such a row must become a quarantine record, never
    # fail the chunk (and with it every row after it, every cycle).
    try:
        found = connection.execute(query).all()
    except (DBAPIError, ValueError, OverflowError):  # undecodable text, unreadable created_at
        return _select_loosely(connection, query)
    return [_loose_row(tuple(row)) for row in found]


def _pg_row(values: tuple[Any, ...]) -> StagingRow:
    row_id, kind, aggregate, version, *rest = values
    return StagingRow(row_id, kind, aggregate, _whole(version), *rest)


def _whole(version: Any) -> Any:
    """A version read from a column a DBA widened to NUMERIC: the integer it holds, when it
    holds one (a fraction stays as it is, and the row contract refuses it)."""
    if isinstance(version, Decimal) and version.is_finite() and version == version.to_integral():
        return int(version)
    return version


_NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)  # a rejected row whose created_at is unreadable


def _select_loosely(connection: Connection, query: Any) -> list[StagingRow]:
    """Read the chunk again as raw values: texts as bytes, created_at as it was written."""
    raw = [
        staging.c.id,
        *(cast(staging.c[name], LargeBinary) for name in _TEXT_COLUMNS[:2]),
        staging.c.aggregate_version,
        *(cast(staging.c[name], LargeBinary) for name in _TEXT_COLUMNS[2:]),
        cast(staging.c.created_at, Text),
    ]
    return [
        _loose_row(tuple(row), raw_time=True)
        for row in connection.execute(query.with_only_columns(*raw))
    ]


_TEXT_COLUMNS = ("kind", "aggregate", "payload", "schema_version", "source_ref")


def _loose_row(values: tuple[Any, ...], *, raw_time: bool = False) -> StagingRow:
    """A staging row from SQLite's values; what breaks the table's types is its ``defect``."""
    row_id, kind, aggregate, version, payload, schema_version, source_ref, created_at = values
    defects: list[str] = []
    texts = {}
    given = (kind, aggregate, payload, schema_version, source_ref)
    for name, value in zip(_TEXT_COLUMNS, given, strict=True):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                defects.append(f"{name} is not valid UTF-8 text")
                value = value.decode("utf-8", errors="replace")
        texts[name] = value
    version = _whole(version)
    if type(version) is not int:
        defects.append(f"aggregate_version {version!r} is not a whole number")
        version = 0
    if raw_time:
        try:
            created_at = ensure_utc(datetime.fromisoformat(str(created_at)))
        except (ValueError, OverflowError):  # OverflowError: 0001-01-01 00:00+03:00
            defects.append(f"created_at {created_at!r} is not a time")
            created_at = _NO_TIME
    return StagingRow(
        row_id,
        texts["kind"],
        texts["aggregate"],
        version,
        texts["payload"],
        texts["schema_version"],
        texts["source_ref"],
        created_at,
        defect="; ".join(defects) or None,
    )


def _mark_taken(connection: Connection, ids: Sequence[int], now: datetime) -> None:
    if is_postgres(connection):  # one array parameter, not one per row
        from sqlalchemy.dialects.postgresql import ARRAY

        chosen = staging.c.id == any_(bindparam("ids", list(ids), type_=ARRAY(BigInteger())))
    else:  # one JSON parameter: SQLAlchemy would render (and process) one per row
        each = func.json_each(bindparam("ids", json.dumps(list(ids)), type_=Text()))
        chosen = staging.c.id.in_(select(each.table_valued("value").c.value))
    connection.execute(update(staging).where(chosen).values(taken_at=now))


def _insert(connection: Connection, table: Any) -> Any:
    if is_postgres(connection):
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def _store(
    connection: Connection, verdicts: list[Accepted | Rejected], now: datetime, dealt: range
) -> IntakeReport:
    """Store one chunk; its ``i``-th row's message gets the rank ``dealt[i]``."""
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
    inserted = _insert_messages(connection, list(fresh.values()), now, rank)
    report.messages = len(inserted)
    again = [item for mid, item in fresh.items() if mid not in inserted] + later
    existing = _existing(connection, {item.message_id for item in again})
    duplicates: list[tuple[int, Accepted]] = []
    for item in again:
        pk, payload = existing[item.message_id]
        if _same_payload(item.row.kind, payload, item.payload):
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


def _same_payload(kind: str, stored: str, given: str) -> bool:
    """Two canonical payloads of one version carry the same message. A price's canonical JSON
    keeps the price's digits as 1C wrote them (it is sent so), and two prices equal as decimals
    (``"840.0"``, ``"840.00"``, the JSON number 840) are one price (contract 1): compared by
    value. Every other payload is compared as its canonical text, exactly."""
    if stored == given:
        return True
    if kind != "price":
        return False
    try:
        old, new = json.loads(stored), json.loads(given)
        return bool(
            old.keys() == new.keys()
            and Decimal(old.pop("price")) == Decimal(new.pop("price"))
            and old == new
        )
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError):
        return False


# What a price aggregate was fixed to, as (sku, price_type), read or written for one chunk.
_PIN_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("kind", String()),
    ("aggregate", String()),
    ("sku", String()),
    ("price_type", String()),
)


def _pin_prices(connection: Connection, verdicts: list[Accepted | Rejected]) -> dict[int, str]:
    """One aggregate is one price (contract 1): the first accepted version of a ``price``
    aggregate fixes its sku and price_type on the aggregate row; a row naming others is
    quarantined ``invalid-contract``. Returns those rows: staging id -> detail.

    Set-based, three statements per chunk with prices: create the chunk's new aggregates with
    the identity of their first row (in staging order, so of several versions of a new
    aggregate in one chunk the first row decides); fix the identity of aggregates that have
    none yet (made before migration 0003, every message since pruned); read every identity
    back. PostgreSQL, two workers taking rows of one new aggregate at once: the second's
    insert waits for the first's commit and does nothing, and its read (a new snapshot, READ
    COMMITTED) then sees the identity the first one fixed.
    """
    named: list[tuple[Accepted, str, str]] = []
    first: dict[str, tuple[str, str]] = {}
    for verdict in verdicts:
        if isinstance(verdict, Rejected) or verdict.row.kind != "price":
            continue
        wire = json.loads(verdict.payload)
        identity = (wire["sku"], wire["price_type"])
        named.append((verdict, *identity))
        first.setdefault(verdict.row.aggregate, identity)
    if not named:
        return {}
    rows = [("price", aggregate, sku, kind) for aggregate, (sku, kind) in first.items()]
    source, params = rowset(connection, "pins", _PIN_COLUMNS, rows, name="pins")
    same = and_(aggregates.c.kind == source.c.kind, aggregates.c.aggregate == source.c.aggregate)
    connection.execute(
        _insert(connection, aggregates)
        .from_select(
            ["kind", "aggregate", "sku", "price_type"],
            select(source.c.kind, source.c.aggregate, source.c.sku, source.c.price_type)
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
    connection.execute(
        update(aggregates)
        .where(aggregates.c.kind == "price", aggregates.c.sku.is_(None))
        .where(exists(fixed))
        .values(
            sku=fixed.with_only_columns(source.c.sku).scalar_subquery(),
            price_type=fixed.with_only_columns(source.c.price_type).scalar_subquery(),
        ),
        params,
    )
    pins = {
        aggregate: (sku, price_type)
        for aggregate, sku, price_type in connection.execute(
            select(aggregates.c.aggregate, aggregates.c.sku, aggregates.c.price_type)
            .join_from(source, aggregates, same)
            .where(true()),
            params,
        )
    }
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
    return foreign


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
# placeholders slowly; a constant statement is parsed once and cached.
_FROM_ROW: tuple[tuple[str, Any], ...] = (
    ("message_id", String()),
    ("kind", String()),
    ("aggregate", String()),
    ("version", BigInteger()),
    ("schema_version", String()),
    ("payload", Text()),
    ("source_ref", String()),
    ("created_at", DateTime()),  # naive UTC, as UTCDateTime stores it
    ("staging_id", BigInteger()),
    ("claim_rank", BigInteger()),
)


def _row_values(item: Accepted, now: datetime, rank: dict[int, int]) -> tuple[Any, ...]:
    row = item.row
    return (
        item.message_id,
        row.kind,
        row.aggregate,
        row.aggregate_version,
        row.schema_version,
        item.payload,
        row.source_ref,
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
    connection: Connection, items: list[Accepted], now: datetime, rank: dict[int, int]
) -> set[str]:
    """Insert the messages not yet known, with their ``taken`` history; returns their ids.

    Set-based: the rows go to the database as a few parameters, the aggregates are created
    and joined there, and the history is written from the inserted rows.
    """
    if not items:
        return set()
    postgres = is_postgres(connection)
    source, params = _source(connection, items, now, rank)
    connection.execute(
        _insert(connection, aggregates)
        .from_select(
            ["kind", "aggregate"],
            select(source.c.kind, source.c.aggregate)
            .where(  # the aggregate is new (a concurrent insert of it is a conflict, ignored)
                ~exists().where(
                    aggregates.c.kind == source.c.kind,
                    aggregates.c.aggregate == source.c.aggregate,
                )
            )
            .distinct()
            .order_by(source.c.kind, source.c.aggregate),
        )
        .on_conflict_do_nothing(),
        params,
    )
    start = {
        "rejected": False,
        "taken_at": now,
        "state": State.NEW.value,
        "attempts": 0,
        "waiting_since": now,
        "updated_at": now,
    }
    names = [name for name, _ in _FROM_ROW]
    rows = (
        select(
            *(source.c[name] for name in names),
            aggregates.c.id,
            *(literal(value, messages.c[name].type) for name, value in start.items()),
        )
        .join_from(
            source,
            aggregates,
            and_(aggregates.c.kind == source.c.kind, aggregates.c.aggregate == source.c.aggregate),
        )
        .where(true())
        .order_by(source.c.staging_id)
    )
    statement = (
        _insert(connection, messages)
        .from_select([*names, "aggregate_id", *start], rows)
        .on_conflict_do_nothing(index_elements=["message_id"])
    )
    if postgres:  # one statement: insert, and write history from what it returned
        new = statement.returning(messages.c.id, messages.c.message_id, messages.c.staging_id).cte(
            "new"
        )
        written = _taken_history(new, now).cte("written")
        return set(connection.execute(select(new.c.message_id).add_cte(written), params).scalars())
    # SQLite, one writer at a time (BEGIN IMMEDIATE): the rows inserted now are exactly those
    # with an id above the highest id before.
    before = connection.execute(select(func.coalesce(func.max(messages.c.id), 0))).scalar_one()
    inserted = connection.execute(statement, params).rowcount
    new_rows = select(messages.c.id, messages.c.staging_id).where(messages.c.id > before)
    connection.execute(_taken_history(new_rows.subquery(), now))
    if inserted == len(items):
        return {item.message_id for item in items}
    return set(
        connection.execute(select(messages.c.message_id).where(messages.c.id > before)).scalars()
    )


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
            "payload": row.payload if isinstance(row.payload, str) else "",
            "created_at": _created_at(row, now),
            "staging_id": row.id,
            "taken_at": now,
            "state": State.QUARANTINED.value,
            "reason": reason.value,
            "attempts": 0,
            "last_error": detail,
            "waiting_since": now,
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

"""Reading the staging table for intake (contract 1): the untaken rows of a chunk in id order,
read loosely where the database let a wrong value in (it becomes a rejected row, never a failed
chunk), the rows of a 1C package marked, and the rows marked taken. Moved verbatim out of
``staging_table``, which takes them in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    LargeBinary,
    Text,
    any_,
    bindparam,
    cast,
    func,
    select,
    update,
)
from sqlalchemy.exc import DataError, DBAPIError

from exchange.db.engine import is_postgres
from exchange.db.schema import cml_package_repeats, cml_packages, staging
from exchange.domain.clock import ensure_utc
from exchange.domain.identity import MAX_VERSION, PACKAGE_VERSIONS_FROM
from exchange.intake.contracts import StagingRow, product_name


def _select_rows(
    connection: Connection, after: int, last_id: int, chunk: int, *, lock: bool
) -> list[StagingRow]:
    return _packages_marked(connection, _read_rows(connection, after, last_id, chunk, lock=lock))


def _packages_marked(connection: Connection, rows: list[StagingRow]) -> list[StagingRow]:
    """The rows with a version from PACKAGE_VERSIONS_FROM up that a 1C package staged (a
    ``price`` row whose version is a package's number, in ``cml_packages`` beside the staging
    table) marked as such: only they may carry such a version (contract 1, 9a). And the rows
    of an aggregate that a later offer of their package maps to as well, with that offer's
    payload (contract 15, ``later_offer``)."""
    versions = [
        row.aggregate_version
        for row in rows
        if row.kind == "price"
        and type(row.aggregate_version) is int
        and 1 <= row.aggregate_version <= MAX_VERSION
    ]
    if not versions:
        return rows
    high = {v for v in versions if v >= PACKAGE_VERSIONS_FROM}
    packages = (
        set(
            connection.execute(
                select(cml_packages.c.version).where(cml_packages.c.version.in_(sorted(high)))
            ).scalars()
        )
        if high
        else set()
    )
    # A package's repeated aggregates with their last offers' payloads (``publish``): few if
    # any, read by a range of the table's key. Only a package's rows carry its version for
    # such an aggregate (another row of that version is the package's message again: a
    # duplicate or a conflict, judged against the offer that wins).
    later = {
        (version, aggregate): payload
        for version, aggregate, payload in connection.execute(
            select(
                cml_package_repeats.c.version,
                cml_package_repeats.c.aggregate,
                cml_package_repeats.c.payload,
            ).where(cml_package_repeats.c.version.between(min(versions), max(versions)))
        )
    }
    if not packages and not later:
        return rows
    return [
        replace(
            row,
            package=row.aggregate_version in packages,
            later_offer=later.get((row.aggregate_version, row.aggregate)),
        )
        if row.kind == "price"
        else row
        for row in rows
    ]


# What intake reads of a staging row, in ``StagingRow``'s order (``read_rows``).
COLUMNS = (
    staging.c.id,
    staging.c.kind,
    staging.c.aggregate,
    staging.c.aggregate_version,
    staging.c.payload,
    staging.c.schema_version,
    staging.c.source_ref,
    staging.c.created_at,
    staging.c.name,
)


def _read_rows(
    connection: Connection, after: int, last_id: int, chunk: int, *, lock: bool
) -> list[StagingRow]:
    query = (
        select(*COLUMNS)
        .where(staging.c.taken_at.is_(None), staging.c.id > after, staging.c.id <= last_id)
        .order_by(staging.c.id)
        .limit(chunk)
    )
    if lock:  # PostgreSQL: workers taking intake at once share the rows out
        query = query.with_for_update(skip_locked=True)
    return read_rows(connection, query)


def read_rows(connection: Connection, query: Any) -> list[StagingRow]:
    """The staging rows ``query`` selects (``COLUMNS``, in that order), each as
    intake reads it: a value that breaks the table's types becomes the row's ``defect``, never
    a failed read. Also ``withheld release``'s look for a newer version 1C staged
    (``intake.staged``)."""
    if is_postgres(connection):  # the database checked every type and every text on INSERT
        try:
            return [_pg_row(tuple(row)) for row in connection.execute(query)]
        # A created_at of 'infinity' (no time the driver can read) is the driver's DataError;
        # a connection PostgreSQL ended is not bad data, and a second read on it would fail
        # with the first failure as its context: that one goes up as it is.
        except (DataError, ValueError, OverflowError):
            loose = query.with_only_columns(
                *list(query.selected_columns)[:-2],
                cast(staging.c.created_at, Text),
                staging.c.name,
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
    row_id, kind, aggregate, version, payload, schema_version, source_ref, created_at, name = values
    return StagingRow(
        row_id,
        kind,
        aggregate,
        _whole(version),
        payload,
        schema_version,
        source_ref,
        created_at,
        name=product_name(name),
        name_chars=_chars(name),
    )


def _chars(name: Any) -> int:
    """How many characters a ``name`` holds as written (bytes: as UTF-8, replaced where not)."""
    if isinstance(name, bytes):
        return len(name.decode("utf-8", errors="replace"))
    return len(name) if isinstance(name, str) else 0


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
        cast(staging.c.name, LargeBinary),
    ]
    return [
        _loose_row(tuple(row), raw_time=True)
        for row in connection.execute(query.with_only_columns(*raw))
    ]


_TEXT_COLUMNS = ("kind", "aggregate", "payload", "schema_version", "source_ref")


def _loose_row(values: tuple[Any, ...], *, raw_time: bool = False) -> StagingRow:
    """A staging row from SQLite's values; what breaks the table's types is its ``defect``."""
    row_id, kind, aggregate, version, payload, schema_version, source_ref, created_at, label = (
        values
    )
    if (  # every row as the table's types have it: nothing to decode, nothing to judge here
        not raw_time
        and type(kind) is str
        and type(aggregate) is str
        and type(version) is int
        and type(payload) is str
        and type(schema_version) is str
        and (source_ref is None or type(source_ref) is str)
    ):
        return StagingRow(
            row_id,
            kind,
            aggregate,
            version,
            payload,
            schema_version,
            source_ref,
            created_at,
            name=product_name(label),
            name_chars=_chars(label),
        )
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
        name=product_name(label),
        name_chars=_chars(label),
    )


def _mark_taken(connection: Connection, ids: Sequence[int], now: datetime) -> None:
    if not ids:
        return
    if is_postgres(connection):  # one array parameter, not one per row
        from sqlalchemy.dialects.postgresql import ARRAY

        chosen = staging.c.id == any_(bindparam("ids", list(ids), type_=ARRAY(BigInteger())))
    else:  # one JSON parameter: SQLAlchemy would render (and process) one per row
        each = func.json_each(bindparam("ids", json.dumps(list(ids)), type_=Text()))
        chosen = staging.c.id.in_(select(each.table_valued("value").c.value))
    # The chunk's id range beside the list: PostgreSQL otherwise read the whole staging table
    # for each chunk (a sequential scan filtered by the list, seen with EXPLAIN at 50,000 rows).
    within = staging.c.id.between(min(ids), max(ids))
    connection.execute(update(staging).where(within, chosen).values(taken_at=now))

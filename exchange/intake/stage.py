"""``stage()``: the one way the service itself writes intents into ``staging_intents``.

1C writes the table directly (contract 1); every other source goes through here: the JSON
intake and the CommerceML exchange of ``exchange serve``, the demo, the benchmarks and the
tests. Like 1C, it only ever INSERTs; the rows are judged later by intake, with the very code
that judges 1C's own rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby
from typing import Any

from sqlalchemy import Connection, insert

from exchange.db.schema import staging


def stage(connection: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
    """INSERT ``rows`` (column -> value) in ``connection``'s transaction, in order; returns how
    many. Consecutive rows that give the same columns go as one statement."""

    def columns(row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(row)

    for _, same in groupby(rows, key=columns):
        connection.execute(insert(staging), [dict(row) for row in same])
    return len(rows)


COLUMNS = (
    "kind",
    "aggregate",
    "aggregate_version",
    "payload",
    "schema_version",
    "source_ref",
    "name",
)
# The last value is the product's name (None where the source gave none).
Row = tuple[str, str, int, str, str, str | None, str | None]


def stage_many(connection: Connection, rows: Sequence[Row]) -> int:
    """The rows of ``stage()`` as plain tuples in ``COLUMNS`` order, for a large package: one
    ``executemany`` of the tuples on SQLite, ``COPY`` on PostgreSQL (psycopg's ``copy``), in
    ``connection``'s transaction, without SQLAlchemy's work per row. Returns how many."""
    table = connection.dialect.identifier_preparer.format_table(staging)
    columns = ", ".join(COLUMNS)
    driver: Any = connection.connection.driver_connection  # the same transaction
    if connection.dialect.name == "postgresql":
        with driver.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return len(rows)
    cursor = driver.cursor()
    try:
        marks = ", ".join("?" * len(COLUMNS))
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
    finally:
        cursor.close()
    return len(rows)


def stage_attached(
    connection: Connection,
    source: str,
    *,
    kind: str,
    version: int,
    schema_version: str,
    source_ref: str | None,
) -> int:
    """The rows of ``source``, a table ``(aggregate, payload, name)`` of a database attached to
    ``connection`` (SQLite, ``transaction(attach=...)``), staged in its rowid order with these
    other columns, as ``stage_many`` would stage the same tuples: one ``INSERT ... SELECT``
    that SQLite runs without Python per row, in ``connection``'s transaction. Returns how
    many."""
    table = connection.dialect.identifier_preparer.format_table(staging)
    columns = ", ".join(COLUMNS)
    driver: Any = connection.connection.driver_connection  # the same transaction
    cursor = driver.execute(
        f"INSERT INTO {table} ({columns}) "
        f"SELECT ?, aggregate, ?, payload, ?, ?, name FROM {source} ORDER BY rowid",
        (kind, version, schema_version, source_ref),
    )
    try:
        return int(cursor.rowcount)
    finally:
        cursor.close()

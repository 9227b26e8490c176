"""Rows from Python inside one statement (exchange/db/rowset.py): a value reads the same
whether it travels once per row (``rowset_table``) or once for all rows (``rowset_shared``).

Runs on SQLite and on PostgreSQL (the ``engine`` fixture is parametrized over both).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import BigInteger, Engine, Float, Integer, String, select

from exchange.db.engine import is_postgres, transaction
from exchange.db.rowset import Column, rowset_params, rowset_shared, rowset_table, split_shared
from exchange.db.schema import UTCDateTime

COLUMNS: tuple[Column, ...] = (
    ("pk", BigInteger()),
    ("text", String()),
    ("number", Integer()),
    ("seconds", Float()),
    ("at", UTCDateTime()),
    ("missing", String()),
)
MOSCOW = timezone(timedelta(hours=3))


@pytest.mark.parametrize(
    ("rows", "shared"),
    [
        ([], ()),
        ([[1, "a", None]], (1, 2)),  # one row: everything but the key is shared
        ([[1, "a", 5], [2, "a", 6]], (1,)),
        ([[1, "a", 5], [2, "b", 5]], (2,)),
        ([[1, "a", 5], [1, "a", 5]], (1, 2)),  # the key stays per row even when it repeats
        ([[1, 1, None], [2, True, None]], (2,)),  # 1 == True, but JSON writes them apart
        ([[1, 1.0], [2, 1]], ()),
        ([[1, None], [2, "x"]], ()),
    ],
)
def test_split_shared_names_the_positions_every_row_has_the_same_value_of_the_same_type(
    rows: list[list[Any]], shared: tuple[int, ...]
) -> None:
    assert shared == split_shared(rows)


def test_split_shared_can_keep_more_than_the_first_position_per_row() -> None:
    assert (2,) == split_shared([[1, "a", "x"], [2, "a", "x"]], keep=2)


def test_a_value_reads_the_same_sent_once_or_in_every_row(engine: Engine) -> None:
    at = datetime(2026, 3, 1, 12, 30, 15, 250_000, tzinfo=MOSCOW)
    row = [7, 'Розничная "цена"', 42, 0.125, at, None]
    with transaction(engine) as connection:
        postgres = is_postgres(connection)
        source = rowset_table(postgres, "rows", COLUMNS, "source")
        per_row = connection.execute(
            select(*source.c), rowset_params(connection, "rows", COLUMNS, [row])
        ).one()
        once = rowset_shared(postgres, "once", COLUMNS)
        shared = connection.execute(
            select(*(once[name] for name, _ in COLUMNS)),
            rowset_params(connection, "once", COLUMNS, [row]),
        ).one()
    expected = (7, 'Розничная "цена"', 42, 0.125, at.astimezone(UTC), None)
    assert expected == tuple(per_row)
    assert expected == tuple(shared)

"""Rows from Python as a table inside one SQL statement, from one JSON parameter.

The hot path writes many rows at once (the messages of an intake chunk, the state changes of
a claimed or recorded batch, their history rows). Sent as ``executemany``, every row costs
SQLAlchemy's per-row parameter processing and, on PostgreSQL, a round in the pipeline; sent
as one JSON text that the database unpacks (``json_each`` on SQLite, ``jsonb_array_elements``
on PostgreSQL), they cost one ``json.dumps`` in C and one statement, whatever their number.

    source, params = rowset(connection, "changes", [("pk", BigInteger()), ...], rows)
    connection.execute(update(messages).where(messages.c.id == source.c.pk)..., params)

On the hot path the statement is built once around ``rowset_table`` and each call sends only
``rowset_params``. Values that every row shares (the lease of a claimed batch, the worker, the
event) go once, as ``rowset_shared`` expressions read from a one-row parameter, rather than once
per row: ``split_shared`` says which they are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    DateTime,
    Subquery,
    Text,
    bindparam,
    cast,
    func,
    select,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeEngine

from exchange.db.engine import is_postgres
from exchange.domain.clock import ensure_utc

Column = tuple[str, TypeEngine[Any]]


def rowset(
    connection: Connection,
    param: str,
    columns: Sequence[Column],
    rows: Iterable[Sequence[Any]],
    *,
    name: str = "source",
) -> tuple[Subquery, dict[str, str]]:
    """``rows`` (sequences in the order of ``columns``) as a subquery named ``name``, and the
    parameters to execute it with (one: ``param``, the rows as a JSON array of arrays)."""
    columns = tuple(columns)
    table = rowset_table(is_postgres(connection), param, columns, name)
    return table, rowset_params(connection, param, columns, rows)


def rowset_params(
    connection: Connection, param: str, columns: Sequence[Column], rows: Iterable[Sequence[Any]]
) -> dict[str, str]:
    """The parameters alone, for a statement built once around ``rowset_table``.

    Times (columns typed ``DateTime``, which ``UTCDateTime`` is) are written as the naive UTC
    text each database stores; other values go as JSON has them (text, numbers, null).
    """
    times = [i for i, (_, kind) in enumerate(columns) if _is_time(kind)]
    data = [list(row) for row in rows]
    if times:
        to_text = _time_writer(connection)
        for values in data:
            for i in times:
                if values[i] is not None:
                    values[i] = to_text(values[i])
    return {param: json.dumps(data, ensure_ascii=False)}


@functools.lru_cache(maxsize=256)
def rowset_table(postgres: bool, param: str, columns: tuple[Column, ...], name: str) -> Subquery:
    """The subquery alone, built once per shape: building a statement costs SQLAlchemy more
    than running it, so callers on the hot path build theirs once around this one. (Types are
    keys by identity: callers pass the same type objects, e.g. a table's.)"""
    if postgres:
        each = (
            func.jsonb_array_elements(cast(bindparam(param, type_=Text()), JSONB()))
            .table_valued("value")
            .render_derived()
        )
        selected = [
            cast(each.c.value.op("->>")(i), kind).label(column)
            for i, (column, kind) in enumerate(columns)
        ]
    else:
        # json_extract gives text, integers and NULL as they are; a CAST would apply SQLite's
        # type affinity (DATETIME is numeric there), so the types are declared, not cast.
        each = func.json_each(bindparam(param, type_=Text())).table_valued("value")
        selected = [
            type_coerce(func.json_extract(each.c.value, f"$[{i}]"), kind).label(column)
            for i, (column, kind) in enumerate(columns)
        ]
    return select(*selected).subquery(name)


@functools.lru_cache(maxsize=256)
def rowset_shared(postgres: bool, param: str, columns: tuple[Column, ...]) -> dict[str, Any]:
    """One row of values as expressions, by column name, read from one parameter that
    ``rowset_params(connection, param, columns, [row])`` fills: each typed exactly as
    ``rowset_table`` types a row's value, so a value reads the same whichever way it travels."""
    if postgres:
        row = cast(bindparam(param, type_=Text()), JSONB()).op("->")(0)
        return {column: cast(row.op("->>")(i), kind) for i, (column, kind) in enumerate(columns)}
    return {
        column: type_coerce(func.json_extract(bindparam(param, type_=Text()), f"$[0][{i}]"), kind)
        for i, (column, kind) in enumerate(columns)
    }


def split_shared(rows: Sequence[Sequence[Any]], keep: int = 1) -> tuple[int, ...]:
    """The positions (from ``keep`` on: the first ``keep`` stay per row, e.g. the key) whose
    value is the same in every row, of the same type: those can travel once."""
    if not rows:
        return ()
    first = rows[0]
    shared = []
    for i in range(keep, len(first)):
        column = [row[i] for row in rows]
        value = first[i]
        if column.count(value) == len(column) and len(set(map(type, column))) == 1:
            shared.append(i)
    return tuple(shared)


def _is_time(kind: TypeEngine[Any]) -> bool:
    return isinstance(kind, DateTime) or isinstance(getattr(kind, "impl", None), DateTime)


def _time_writer(connection: Connection) -> Callable[[datetime], str]:
    """An aware (or naive UTC) datetime -> the text of its naive UTC timestamp, as SQLAlchemy's
    own type writes it on SQLite (compared as text there) and as PostgreSQL casts it."""
    if is_postgres(connection):
        return lambda value: ensure_utc(value).replace(tzinfo=None).isoformat(" ")
    dialect = connection.dialect
    stored = DateTime().dialect_impl(dialect).bind_processor(dialect)
    assert stored is not None  # SQLite's DATETIME always has one: it writes the text
    return lambda value: str(stored(ensure_utc(value).replace(tzinfo=None)))

"""Engines and transactions for SQLite and PostgreSQL.

SQLite: every write transaction is ``BEGIN IMMEDIATE`` (the claim of a batch is serialised
by the database), WAL journal, a busy timeout. PostgreSQL: psycopg 3, pre-ping so that a
restarted server costs one failed cycle at most.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from exchange.errors import DatabaseUnavailable
from exchange.settings import safe_url

SQLITE_BUSY_TIMEOUT_S = 30


def normalise_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, **kwargs: Any) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            **kwargs,
        )
        _configure_sqlite(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # We emit BEGIN ourselves (below), so the driver must not.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get("read_only"):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


def is_postgres(connection_or_engine: Connection | Engine) -> bool:
    return connection_or_engine.dialect.name == "postgresql"


@contextmanager
def transaction(engine: Engine, *, read_only: bool = False) -> Iterator[Connection]:
    """One short transaction. Connection failures become ``DatabaseUnavailable``."""
    try:
        raw = engine.connect()
    except DBAPIError as exc:  # refused, unknown host, bad password, not a database file…
        raise DatabaseUnavailable(describe_db_error(engine, exc)) from exc
    try:
        with raw:
            connection = raw.execution_options(read_only=True) if read_only else raw
            with connection.begin():
                yield connection
    except OperationalError as exc:
        raise DatabaseUnavailable(describe_db_error(engine, exc)) from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(describe_db_error(engine, exc)) from exc
        raise


def describe_db_error(engine: Engine, exc: DBAPIError) -> str:
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
    # Drivers sometimes repeat the connection string: never show a password.
    reason = re.sub(r"password=\S+", "password=***", reason)
    return f"database {safe_url(str(engine.url))} is unreachable: {reason}"


def ping(engine: Engine) -> None:
    with transaction(engine, read_only=True) as connection:
        connection.execute(text("SELECT 1"))

"""A connection PostgreSQL ends while intake reads the staging table is a database failure, not
a row the driver cannot read: intake must not take it for bad data and read again "loosely" on
the dead connection (seen in CI under ``pg_terminate_backend``: the second read's error carried
the first as its context, and the worker logged a traceback)."""

from __future__ import annotations

import os

import psycopg
import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import OperationalError

from exchange.intake.staging_read import _read_rows

pytestmark = pytest.mark.postgres


def test_a_connection_ended_mid_read_raises_the_database_failure_without_a_second_read(
    pg_url: str,
) -> None:
    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    admin_url = os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    statements: list[str] = []
    try:
        with engine.connect() as connection:
            pid = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

            @event.listens_for(engine, "before_cursor_execute")
            def seen(*args: object) -> None:
                statements.append(str(args[2]))

            with pytest.raises(OperationalError) as raised:
                _read_rows(connection, 0, 10**9, 100, lock=True)
            assert raised.value.connection_invalidated
            assert 1 == len(statements), statements  # no loose second read
    finally:
        engine.dispose()

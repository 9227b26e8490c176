"""Fixtures shared by every tier: databases (SQLite and a real PostgreSQL), clocks, staging.

PostgreSQL is required, never skipped: when it cannot be reached the tests that need it
fail with the reason. Each test gets a migrated database of its own: a copy of a migrated
SQLite file, or a PostgreSQL database of the process's pool, reset and proven clean
(exchange/dev/dbkit.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine

from exchange.db.engine import make_engine
from exchange.dev.dbkit import PgKit, SqliteTemplate, pg_admin_url
from exchange.domain.clock import FakeClock

PG_ADMIN_URL = pg_admin_url()


@pytest.fixture(scope="session")
def pg_kit() -> Iterator[PgKit]:
    """This process's PostgreSQL databases (exchange/dev/dbkit.py): one xdist worker, one kit."""
    kit = PgKit(PG_ADMIN_URL)
    try:
        kit.admin()
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is required for these tests and is unreachable at {PG_ADMIN_URL}: {exc}",
            pytrace=False,
        )
    yield kit
    kit.close()


@pytest.fixture(scope="session")
def pg_template(pg_kit: PgKit) -> str:
    """The name of the migrated template database the pool is cloned from."""
    return pg_kit.template


@pytest.fixture
def pg_url(pg_kit: PgKit) -> Iterator[str]:
    """A migrated PostgreSQL database for this test alone: empty, sequences at their start,
    the schema of a fresh migration (proven when handed out)."""
    name = pg_kit.acquire()
    yield pg_kit.url(name)
    pg_kit.release(name)


@pytest.fixture
def other_pg_url(pg_kit: PgKit) -> Iterator[str]:
    """A second migrated PostgreSQL database for one test (a staging database of its own,
    EXCHANGE_STAGING_URL), the same promise as ``pg_url``."""
    name = pg_kit.acquire()
    yield pg_kit.url(name)
    pg_kit.release(name)


@pytest.fixture
def empty_pg_url(pg_kit: PgKit) -> Iterator[str]:
    """A fresh PostgreSQL database with no tables (for migration tests), dropped afterwards."""
    name = pg_kit.create_empty()
    yield pg_kit.url(name)
    pg_kit.drop(name)


@pytest.fixture(scope="session")
def sqlite_template() -> SqliteTemplate:
    """The migrations run once per process into a file that each test copies."""
    return SqliteTemplate.shared()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: SqliteTemplate) -> str:
    """A migrated database URL of this test alone, once for SQLite and once for PostgreSQL."""
    if request.param == "sqlite":
        return sqlite_template.copy_to(tmp_path / "exchange.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()

"""Fixtures shared by every tier: databases (SQLite and a real PostgreSQL), clocks, staging.

PostgreSQL is required, never skipped: when it cannot be reached the tests that need it
fail with the reason. Each test gets a fresh database cloned from a migrated template.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine

from exchange.db.engine import make_engine
from exchange.db.migrate import upgrade
from exchange.domain.clock import FakeClock

PG_ADMIN_URL = os.environ.get("EXCHANGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_admin() -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is required for these tests and is unreachable at {PG_ADMIN_URL}: {exc}",
            pytrace=False,
        )


def _pg_url(database: str) -> str:
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    return f"{base}/{database}".replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    name = f"exchange_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    engine = make_engine(_pg_url(name))
    upgrade(engine)
    engine.dispose()
    yield name
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test."""
    name = f"exchange_t_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    yield _pg_url(name)
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def other_pg_url(pg_template: str) -> Iterator[str]:
    """A second fresh, migrated PostgreSQL database for one test (a staging database of its
    own, EXCHANGE_STAGING_URL)."""
    name = f"exchange_s_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    yield _pg_url(name)
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database with no tables (for migration tests)."""
    name = f"exchange_e_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _pg_url(name)
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A migrated database URL, once for SQLite and once for PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'exchange.db'}"
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        return url
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()

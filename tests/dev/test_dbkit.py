"""The test database kit (exchange/dev/dbkit.py): a database handed out is as clean as a fresh
migration, whatever the test before it did with it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import current_revision, head_revision
from exchange.dev.dbkit import PgKit, SqliteTemplate, database_url
from exchange.dev.testing import price_row, stage

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def kit() -> Iterator[PgKit]:
    """A kit of the module's own (not the session's): these tests dirty databases on purpose.
    Its pool hands out the database given back last first."""
    own = PgKit()
    yield own
    own.close()


def connect(kit: PgKit, name: str) -> psycopg.Connection[object]:
    return psycopg.connect(database_url(kit.admin_url, name, driver=False), autocommit=True)


def test_a_reused_database_has_no_rows_and_its_sequences_start_again(kit: PgKit) -> None:
    name = kit.acquire()
    engine = make_engine(kit.url(name))
    stage(engine, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    engine.dispose()
    kit.release(name)

    again = kit.acquire()

    assert name == again  # reused, not cloned
    engine = make_engine(kit.url(again))
    with transaction(engine) as connection:
        assert 0 == connection.execute(text("SELECT count(*) FROM staging_intents")).scalar()
    stage(engine, [price_row("SKU-3", 1)])
    with transaction(engine) as connection:
        assert 1 == connection.execute(text("SELECT min(id) FROM staging_intents")).scalar()
    assert head_revision(engine) == current_revision(engine)
    engine.dispose()


def test_a_connection_left_open_in_a_transaction_does_not_reach_the_next_test(
    kit: PgKit,
) -> None:
    name = kit.acquire()
    left = connect(kit, name)
    left.autocommit = False
    left.execute("LOCK TABLE staging_intents IN ACCESS EXCLUSIVE MODE")  # held, never committed
    kit.release(name)

    again = kit.acquire()  # would wait for the lock (and time out) without terminating it

    assert name == again
    assert left.closed or left.broken or _is_gone(left)
    with connect(kit, again) as fresh:
        assert (0,) == fresh.execute("SELECT count(*) FROM staging_intents").fetchone()


def _is_gone(connection: psycopg.Connection[object]) -> bool:
    try:
        connection.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE lock_order (id int PRIMARY KEY)",
        "ALTER TABLE cml_packages RENAME TO cml_packages_gone",
        "ALTER TABLE staging_intents ALTER COLUMN aggregate TYPE TEXT",
        "ALTER TABLE staging_intents DROP COLUMN source_ref",
        "CREATE INDEX extra ON messages (created_at)",
        "CREATE SEQUENCE stray",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "CREATE VIEW v AS SELECT 1 AS one",
        "UPDATE alembic_version SET version_num = '0011'",
        "INSERT INTO alembic_version VALUES ('9999')",
    ],
)
def test_a_database_whose_schema_a_test_changed_is_replaced_by_a_fresh_clone(
    kit: PgKit, change: str
) -> None:
    name = kit.acquire()
    with connect(kit, name) as connection:
        connection.execute(change)
    kit.release(name)

    again = kit.acquire()

    assert name != again
    with connect(kit, again) as connection:
        assert kit._state(connection) == kit._clean
    dropped = kit.admin().execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
    assert dropped.fetchone() is None


def test_database_settings_a_test_changed_are_not_handed_on(kit: PgKit) -> None:
    name = kit.acquire()
    kit.admin().execute(f"ALTER DATABASE \"{name}\" SET statement_timeout = '1ms'")
    kit.release(name)

    assert name != kit.acquire()


def test_an_empty_database_has_no_tables_and_is_dropped_with_the_kit() -> None:
    kit = PgKit()
    name = kit.create_empty()
    with connect(kit, name) as connection:
        tables = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
    assert (0,) == tables

    kit.close()

    with psycopg.connect(kit.admin_url, autocommit=True) as admin:
        assert (
            admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            is None
        )


def test_each_sqlite_copy_is_a_migrated_database_of_its_own(tmp_path: Path) -> None:
    template = SqliteTemplate(tmp_path / "tpl")
    first = template.copy_to(tmp_path / "a.db")
    second = template.copy_to(tmp_path / "b.db")
    engine = make_engine(first)
    stage(engine, [price_row("SKU-1", 1)])
    assert head_revision(engine) == current_revision(engine)
    engine.dispose()

    with sqlite3.connect(tmp_path / "b.db") as other:
        assert (0,) == other.execute("SELECT count(*) FROM staging_intents").fetchone()
    assert second.endswith("b.db")
    with pytest.raises(FileExistsError):
        template.copy_to(tmp_path / "a.db")

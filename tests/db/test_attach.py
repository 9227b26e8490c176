"""``transaction(attach=...)`` on SQLite: the file is readable inside the transaction, and no
pooled connection keeps it attached afterwards, whether the transaction commits, rolls back
or the detach itself fails."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from exchange.db.engine import make_engine, transaction


def attached(engine: Engine) -> list[str]:
    """The databases attached to any of ``engine``'s pooled connections."""
    held = [engine.raw_connection() for _ in range(max(engine.pool.checkedin(), 1))]  # type: ignore[attr-defined]
    try:
        return [
            row[1]
            for c in held
            for row in c.cursor().execute("PRAGMA database_list")
            if row[1] not in ("main", "temp")
        ]
    finally:
        for c in held:
            c.close()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Engine, Path]:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (n INTEGER)")
        db.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
    engine = make_engine(f"sqlite:///{tmp_path / 'main.db'}")
    with transaction(engine) as connection:
        connection.execute(text("CREATE TABLE copied (n INTEGER)"))
    return engine, other


def test_the_attached_file_is_read_in_the_transaction_and_detached_after_a_commit(
    files: tuple[Engine, Path],
) -> None:
    engine, other = files
    with transaction(engine, attach=("extra", other)) as connection:
        connection.execute(text("INSERT INTO copied SELECT n FROM extra.t"))
    with transaction(engine, read_only=True) as connection:
        assert connection.execute(text("SELECT count(*) FROM copied")).scalar() == 3
    assert attached(engine) == []
    engine.dispose()


def test_it_is_detached_after_a_rollback(files: tuple[Engine, Path]) -> None:
    engine, other = files
    with pytest.raises(RuntimeError), transaction(engine, attach=("extra", other)) as connection:
        connection.execute(text("INSERT INTO copied SELECT n FROM extra.t"))
        raise RuntimeError("abandoned")
    with transaction(engine, read_only=True) as connection:
        assert connection.execute(text("SELECT count(*) FROM copied")).scalar() == 0
    assert attached(engine) == []
    engine.dispose()


def test_a_connection_that_cannot_detach_is_discarded_not_pooled(
    files: tuple[Engine, Path],
) -> None:
    """A statement still reading the attached file keeps it locked, so DETACH fails: the
    transaction's commit stands and the connection is closed instead of pooled."""
    engine, other = files
    reading: list[Any] = []
    with transaction(engine, attach=("extra", other)) as connection:
        connection.execute(text("INSERT INTO copied SELECT n FROM extra.t"))
        driver: Any = connection.connection.driver_connection
        cursor = driver.execute("SELECT n FROM extra.t")
        cursor.fetchone()  # left unfinished
        reading.append(cursor)
    assert attached(engine) == []
    with transaction(engine, read_only=True) as connection:
        assert connection.execute(text("SELECT count(*) FROM copied")).scalar() == 3
    engine.dispose()

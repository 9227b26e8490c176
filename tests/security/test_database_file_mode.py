"""The SQLite database is readable by the service's user only (issue 21 follow-up): it holds
the operators' password hashes, their sessions and the key that signs cookies. A new file is
created 0600 whatever the umask (and SQLite gives its -wal and -shm files the same mode); an
older file left 0644 is made 0600 by ``exchange migrate``. Checked on the real files' modes."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from exchange.cli import app
from exchange.db.engine import make_engine

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX file modes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def migrate(database: Path) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env = {**base, "EXCHANGE_DATABASE_URL": f"sqlite:///{database}"}
    result = CliRunner().invoke(app, ["migrate"], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_new_sqlite_database_and_its_wal_files_are_created_0600(tmp_path: Path) -> None:
    database = tmp_path / "exchange.db"
    with umask(0o022):  # the usual one: files 0644 unless asked otherwise
        engine = make_engine(f"sqlite:///{database}")  # every command's engine, migrate's too
        try:
            with engine.connect() as connection:  # WAL: -wal and -shm while it is open
                assert mode(database) == 0o600  # from its first moment, not chmod'ed later
                connection.execute(text("CREATE TABLE t (a)"))
                connection.commit()
                companions = [database.with_name(database.name + s) for s in ("-wal", "-shm")]
                assert {p.name: mode(p) for p in companions} == {
                    "exchange.db-wal": 0o600,
                    "exchange.db-shm": 0o600,
                }
        finally:
            engine.dispose()


def test_migrate_makes_an_older_world_readable_database_private(tmp_path: Path) -> None:
    database = tmp_path / "exchange.db"
    with umask(0o022):
        old = sqlite3.connect(database)  # as an older release left it: 0644, in WAL mode
        old.execute("PRAGMA journal_mode=WAL")
        old.execute("CREATE TABLE kept (a)")
        old.commit()
        try:
            companions = [database.with_name(database.name + s) for s in ("", "-wal", "-shm")]
            assert [mode(p) for p in companions] == [0o644] * 3
            said = migrate(database)
            assert [mode(p) for p in companions] == [0o600] * 3
            assert f"{database}: made readable by this user only (0600)" in said
            assert "(0600)" not in migrate(database)  # said once, when it changed something
        finally:
            old.close()

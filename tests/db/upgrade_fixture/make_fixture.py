"""Write the upgrade fixture of issue 31 (item 4): the one-target service's database, made with
main's code as it stood just before the channels schema change (migration head 0023: made
first at 0021, made again at 0023, the last code that writes no channel).

    .venv/bin/python tests/db/upgrade_fixture/make_fixture.py

writes, beside this script:

- ``pre_channels.sqlite3``: the SQLite database (one file, no WAL);
- ``pre_channels.pg.sql``: a plain-SQL dump of the same data built on PostgreSQL
  (``pg_dump --no-owner --no-privileges``; ``EXCHANGE_TEST_PG`` names the server, as for the
  tests), loaded with ``psql -f`` into an empty database;
- ``manifest.json``: what each holds (``tests/support/upgrade_data.py``: ``snapshot``),
  with the versions it was made with.

What the data is and how it is made: ``tests/support/upgrade_data.py``. Its test:
``tests/db/test_upgrade_fixture.py``. Run it again only on the commit the fixture describes;
after the channels issue's first migration the files are history, not something to remake.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import psycopg  # noqa: E402
import sqlalchemy  # noqa: E402
from upgrade_data import build, differences, snapshot, summary  # noqa: E402

import exchange  # noqa: E402
from exchange.db.engine import make_engine  # noqa: E402
from exchange.db.migrate import current_revision, upgrade  # noqa: E402
from exchange.dev.dbkit import database_url, pg_admin_url  # noqa: E402

SQLITE = HERE / "pre_channels.sqlite3"
PG_DUMP = HERE / "pre_channels.pg.sql"
MANIFEST = HERE / "manifest.json"


def _git_commit() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _made(url: str, workdir: Path) -> tuple[dict[str, object], str | None]:
    engine = make_engine(url)
    try:
        upgrade(engine)
        build(url, engine, workdir)
        return snapshot(engine), current_revision(engine)
    finally:
        engine.dispose()


def make_sqlite(workdir: Path) -> tuple[dict[str, object], str | None]:
    SQLITE.unlink(missing_ok=True)
    made = _made(f"sqlite:///{SQLITE}", workdir)
    with contextlib.closing(sqlite3.connect(SQLITE)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA journal_mode=DELETE")
        connection.execute("VACUUM")
    for suffix in ("-wal", "-shm"):
        SQLITE.with_name(SQLITE.name + suffix).unlink(missing_ok=True)
    return made


def make_postgres(workdir: Path) -> tuple[dict[str, object], str | None, dict[str, str]]:
    admin = pg_admin_url()
    name = f"exkit_fixture_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        made, revision = _made(database_url(admin, name), workdir)
        with psycopg.connect(database_url(admin, name, driver=False)) as connection:
            server = connection.execute("SHOW server_version").fetchone()
        client = subprocess.run(
            ["pg_dump", "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        server_version = str(server[0]) if server else "?"
        if server_version.split()[0].split(".")[0] not in client:
            raise SystemExit(f"pg_dump ({client}) does not match the server ({server_version})")
        dump = subprocess.run(
            [
                "pg_dump",
                "--no-owner",
                "--no-privileges",
                "--format=plain",
                database_url(admin, name, driver=False),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        PG_DUMP.write_text(dump, encoding="utf-8")
        return made, revision, {"pg_dump": client, "postgresql_server": server_version}
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="exchange-fixture-") as scratch:
        lite, lite_revision = make_sqlite(Path(scratch) / "sqlite")
        pg, pg_revision, versions = make_postgres(Path(scratch) / "pg")
    manifest = {
        "made_with": {
            "exchange": exchange.__version__,
            "commit": _git_commit(),
            "alembic_revision": {"sqlite": lite_revision, "postgresql": pg_revision},
            "python": sys.version.split()[0],
            "sqlalchemy": sqlalchemy.__version__,
            "sqlite": sqlite3.sqlite_version,
            **versions,
        },
        "summary": {"sqlite": summary(lite), "postgresql": summary(pg)},
        "sqlite": lite,
        "postgresql": pg,
    }
    MANIFEST.write_text(
        json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    apart = differences(summary(lite), summary(pg))
    print(json.dumps(manifest["summary"]["sqlite"], ensure_ascii=False))
    if apart:
        print("SQLite and PostgreSQL differ:", *apart, sep="\n  ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

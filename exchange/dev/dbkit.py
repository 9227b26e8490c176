"""Databases for the tests and the benchmarks: the one place that makes, resets and drops them.

Making a database is the suite's largest cost, so it is done as seldom as the promise allows:

- SQLite: the migrations run once into a template file; each test gets a byte copy of it
  (a copy costs about a millisecond, a migration 140 ms).
- PostgreSQL: a process keeps a pool of migrated databases. One handed out is first reset
  (the backends still connected to it are terminated, every table but ``alembic_version`` is
  emptied, every sequence restarted, and the rows the migrations write themselves, the one
  channel of migration 0024 as the template registered it, written back) and then proven clean
  against the template: the same schema (tables, columns, defaults, constraints, indexes,
  sequences, triggers, functions, views, grants, database settings), rows in the same tables
  (those of the migrations only), the same sequences used, the template's
  ``alembic_version``. A database that fails the proof (a test altered its schema) is dropped
  and replaced by a fresh clone of the template. Rows are deleted rather than truncated:
  TRUNCATE makes new files for every table and index (0.3-0.4 s for this schema), DELETE of a
  few rows takes milliseconds.
- Where migrations are the subject, a test gets a database made for it (``create_empty``):
  nothing of the pool.

Names carry the host and the process (``exkit_<host>_<pid>_…``) so that databases left by a
killed run on this host are dropped by the next one, and never those of a live process.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from exchange.db.channels import register
from exchange.db.engine import make_engine
from exchange.db.migrate import DEFAULT_CHANNEL, upgrade
from exchange.domain.policy import DEFAULT_KINDS

if TYPE_CHECKING:
    import psycopg

DEFAULT_PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PREFIX = "exkit"
# A reset waits this long for a lock a finished test's connection still holds, then fails
# loudly instead of hanging the run.
LOCK_TIMEOUT = "10s"


def pg_admin_url() -> str:
    """The maintenance database of the test server (``EXCHANGE_TEST_PG``)."""
    return os.environ.get("EXCHANGE_TEST_PG", DEFAULT_PG_ADMIN_URL)


def database_url(admin_url: str, database: str, *, driver: bool = True) -> str:
    """The URL of ``database`` on the server of ``admin_url`` (SQLAlchemy's psycopg form
    unless ``driver`` is false)."""
    base = f"{admin_url.rsplit('/', 1)[0]}/{database}"
    if driver:
        return base.replace("postgresql://", "postgresql+psycopg://", 1)
    return base


def _host_tag() -> str:
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- SQLite ----------------------------------------------------------------------------------


class SqliteTemplate:
    """A migrated SQLite file made once in ``directory``; ``copy_to`` gives a test its own."""

    _shared: SqliteTemplate | None = None

    def __init__(self, directory: Path) -> None:
        self._path = directory / "template.db"
        self._made = False

    @classmethod
    def shared(cls) -> SqliteTemplate:
        """The process's template, in a directory removed when the process exits."""
        if cls._shared is None:
            directory = Path(tempfile.mkdtemp(prefix="exkit-sqlite-"))
            atexit.register(shutil.rmtree, directory, True)
            cls._shared = cls(directory)
        return cls._shared

    def _make(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        migrate_sqlite(self._path)
        self._made = True

    def copy_to(self, path: Path) -> str:
        """A migrated database at ``path`` (which must not exist); its SQLAlchemy URL."""
        if not self._made:
            self._make()
        if path.exists():
            raise FileExistsError(f"{path} exists: a test's database is always a new file")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._path, path)
        return f"sqlite:///{path}"


def sqlite_copy(path: Path) -> str:
    """A migrated SQLite database at ``path`` (a copy of the process's template); its URL."""
    return SqliteTemplate.shared().copy_to(path)


def migrate(engine: Engine) -> None:
    """Migrate to head and register the one channel as ``exchange migrate`` does with the
    default configuration (contract 13, "The registry"): ``api``, taking the default kinds,
    so that intake gives their messages a delivery there."""
    upgrade(engine)
    register(engine, [_DefaultChannel()], datetime.now(UTC))


@dataclass(frozen=True)
class _DefaultChannel:
    """The channel of the default configuration (no ``EXCHANGE_CHANNELS``, target ``api``)."""

    name: str = DEFAULT_CHANNEL
    target: str = DEFAULT_CHANNEL
    takes: tuple[str, ...] = tuple(DEFAULT_KINDS)


def migrate_sqlite(path: Path) -> str:
    """Migrate the SQLite file ``path`` to head, leaving one self-contained file (no WAL)."""
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    try:
        migrate(engine)
    finally:
        engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise RuntimeError(
            f"{wal} still holds pages after the checkpoint: the copy would lose them"
        )
    return url


# -- PostgreSQL ------------------------------------------------------------------------------

# Everything a test could change in a database's schema, as sorted text: two databases with
# the same digest have the same tables, columns (order, type, default, identity), constraints,
# indexes, sequences and their parameters, triggers, functions, views, grants and settings.
_FINGERPRINT = r"""
WITH ns AS (
    SELECT oid, nspname, nspacl FROM pg_namespace
    WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
), parts(line) AS (
    SELECT concat_ws(' ', 'schema', nspname, nspacl) FROM ns
    UNION ALL
    SELECT concat_ws(' ', 'rel', ns.nspname, c.relname, c.relkind, c.relpersistence, c.relacl,
                     c.relrowsecurity)
    FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT concat_ws(' ', 'col', a.attrelid::regclass, a.attnum, a.attname,
                     format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,
                     a.attgenerated, pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN ns ON ns.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT concat_ws(' ', 'con', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
    FROM pg_constraint c JOIN ns ON ns.oid = c.connamespace
    UNION ALL
    SELECT concat_ws(' ', 'idx', pg_get_indexdef(i.indexrelid))
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN ns ON ns.oid = c.relnamespace
    UNION ALL
    SELECT concat_ws(' ', 'seq', s.seqrelid::regclass, s.seqtypid, s.seqstart, s.seqincrement,
                     s.seqmin, s.seqmax, s.seqcycle)
    FROM pg_sequence s
    UNION ALL
    SELECT concat_ws(' ', 'trg', pg_get_triggerdef(t.oid)) FROM pg_trigger t
    WHERE NOT t.tgisinternal
    UNION ALL
    SELECT concat_ws(' ', 'fn', p.oid::regprocedure, md5(p.prosrc))
    FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
    UNION ALL
    SELECT concat_ws(' ', 'view', c.oid::regclass, pg_get_viewdef(c.oid))
    FROM pg_class c JOIN ns ON ns.oid = c.relnamespace WHERE c.relkind IN ('v', 'm')
    UNION ALL
    SELECT concat_ws(' ', 'rule', r.rulename, r.ev_class::regclass) FROM pg_rewrite r
    JOIN pg_class c ON c.oid = r.ev_class JOIN ns ON ns.oid = c.relnamespace
    WHERE c.relkind <> 'v'
    UNION ALL
    SELECT concat_ws(' ', 'policy', p.polname, p.polrelid::regclass) FROM pg_policy p
    UNION ALL
    SELECT concat_ws(' ', 'type', t.typname, t.typtype)
    FROM pg_type t JOIN ns ON ns.oid = t.typnamespace
    UNION ALL
    SELECT concat_ws(' ', 'ext', extname, extversion) FROM pg_extension
    UNION ALL
    SELECT concat_ws(' ', 'setting', s.setrole, s.setconfig) FROM pg_db_role_setting s
    JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()
)
SELECT md5(string_agg(line, E'\n' ORDER BY line)) FROM parts
"""

_TABLES = r"""
SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT LIKE 'pg\_%'
  AND n.nspname <> 'information_schema' AND c.relname <> 'alembic_version'
"""

_FOREIGN_KEYS = """
SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint
WHERE contype = 'f' AND conrelid <> confrelid
"""

_USED_SEQUENCES = """
SELECT coalesce(array_agg(format('%I.%I', schemaname, sequencename) ORDER BY 1), '{}')
FROM pg_sequences WHERE last_value IS NOT NULL
"""


class DirtyDatabase(Exception):
    """A database of the pool that cannot be proven equal to a fresh clone of the template."""


class PgKit:
    """One process's PostgreSQL test databases: a migrated template, a pool of clones reset
    per use, and empty databases for the tests whose subject is the migrations."""

    def __init__(self, admin_url: str | None = None) -> None:
        self.admin_url = admin_url or pg_admin_url()
        self._tag = f"{PREFIX}_{_host_tag()}_{os.getpid()}_{uuid.uuid4().hex[:4]}"
        self._admin: psycopg.Connection[Any] | None = None
        self._template: str | None = None
        self._free: list[str] = []
        self._made: set[str] = set()
        self._count = 0
        # Learnt from the template once: the order rows can be deleted in (children first),
        # and what a clean database looks like.
        self._delete_order: list[str] = []
        self._clean: tuple[Any, ...] = ()
        self._seed: list[tuple[str, str]] = []  # (table, its rows as JSON) a migration wrote
        self._seed_sequences: list[tuple[str, int]] = []

    # The server ------------------------------------------------------------------------------

    def admin(self) -> psycopg.Connection[Any]:
        """An autocommit connection to the maintenance database (kept for the process)."""
        import psycopg

        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5)
            self._drop_stale()
        return self._admin

    def url(self, database: str) -> str:
        return database_url(self.admin_url, database)

    def _name(self, kind: str) -> str:
        self._count += 1
        return f"{self._tag}_{kind}{self._count}"

    def _drop_stale(self) -> None:
        """Databases a killed run of this host left behind (its process is gone)."""
        assert self._admin is not None
        host = f"{PREFIX}_{_host_tag()}_"
        rows = self._admin.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (host,)
        ).fetchall()
        for (name,) in rows:
            pid = name[len(host) :].split("_", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def drop(self, database: str) -> None:
        self.admin().execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        self._made.discard(database)

    def terminate_backends(self, database: str) -> None:
        """End every other session on ``database`` and wait for them to be gone (a test that
        left a connection open must not hold a lock or a row into the next test)."""
        self.admin().execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )

    # Databases where the migrations are the subject -----------------------------------------

    def create_empty(self) -> str:
        """A new database with no tables (what ``CREATE DATABASE`` gives)."""
        name = self._name("e")
        self.admin().execute(f'CREATE DATABASE "{name}"')
        self._made.add(name)
        return name

    # The template and the pool ---------------------------------------------------------------

    @property
    def template(self) -> str:
        """The migrated template database, made on first use."""
        if self._template is None:
            name = self._name("tpl")
            self.admin().execute(f'CREATE DATABASE "{name}"')
            self._made.add(name)
            engine = make_engine(self.url(name))
            try:
                migrate(engine)
            finally:
                engine.dispose()
            with self._connect(name) as connection:
                self._learn(connection)
            self._template = name
        return self._template

    def _connect(self, database: str) -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(
            database_url(self.admin_url, database, driver=False),
            autocommit=True,
            connect_timeout=5,
        )

    def _learn(self, connection: psycopg.Connection[Any]) -> None:
        tables = [row[0] for row in connection.execute(_TABLES).fetchall()]
        parents: dict[str, set[str]] = {table: set() for table in tables}
        for child, parent in connection.execute(_FOREIGN_KEYS).fetchall():
            parents.setdefault(child, set()).add(parent)
        order: list[str] = []
        placed: set[str] = set()
        # Children before parents: a table goes once no remaining table references it.
        while len(order) < len(tables):
            ready = sorted(
                table
                for table in tables
                if table not in placed
                and not any(table in parents[other] for other in tables if other not in placed)
            )
            if not ready:
                raise RuntimeError(f"foreign keys form a cycle among {sorted(parents)}")
            order += ready
            placed.update(ready)
        self._delete_order = order
        self._clean = self._state(connection)
        # What the migrations write themselves (the one channel, migration 0024) is part of a
        # fresh database: kept, to be written back after each reset, parents first.
        nonempty = set(self._clean[1])
        self._seed = []
        for table in reversed(order):
            if table in nonempty:
                rows = connection.execute(f"SELECT json_agg(t) FROM {table} t").fetchone()
                self._seed.append((table, json.dumps(rows[0] if rows else [])))
        self._seed_sequences = connection.execute(
            "SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences "
            "WHERE last_value IS NOT NULL"
        ).fetchall()

    def _state(self, connection: psycopg.Connection[Any]) -> tuple[Any, ...]:
        """What the proof compares: schema digest, tables with rows, used sequences, the
        migration revision."""
        digest = connection.execute(_FINGERPRINT).fetchone()
        exists = ", ".join(
            f"CASE WHEN EXISTS (SELECT FROM {table}) THEN '{table}' END"
            for table in self._delete_order
        )
        nonempty = connection.execute(f"SELECT array_remove(ARRAY[{exists}]::text[], NULL)")
        used = connection.execute(_USED_SEQUENCES).fetchone()
        revision = connection.execute(
            "SELECT array_agg(version_num ORDER BY version_num) FROM alembic_version"
        ).fetchone()
        return (
            digest[0] if digest else None,
            tuple(nonempty.fetchone()[0]),  # type: ignore[index]
            tuple(used[0]) if used else (),
            tuple(revision[0] or ()) if revision else (),
        )

    def _reset(self, database: str) -> None:
        """Empty ``database`` and prove it equal to a fresh clone; DirtyDatabase if not."""
        import psycopg

        self.terminate_backends(database)
        deletes = "".join(f"DELETE FROM {table};" for table in self._delete_order)
        try:
            with self._connect(database) as connection:
                connection.execute(
                    f"SET lock_timeout = '{LOCK_TIMEOUT}'; BEGIN; {deletes} COMMIT;"
                    "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, "
                    "start_value, false) FROM pg_sequences WHERE last_value IS NOT NULL"
                )
                for table, rows in self._seed:
                    connection.execute(
                        f"INSERT INTO {table} OVERRIDING SYSTEM VALUE "
                        f"SELECT * FROM json_populate_recordset(NULL::{table}, %s::json)",
                        (rows,),
                    )
                for sequence, value in self._seed_sequences:
                    connection.execute("SELECT setval(%s::regclass, %s, true)", (sequence, value))
                state = self._state(connection)
        except psycopg.Error as exc:  # a table renamed or dropped by the test, a lock held
            raise DirtyDatabase(f"{database}: {exc}") from exc
        if state != self._clean:
            raise DirtyDatabase(f"{database} differs from the template: {state} != {self._clean}")

    def _clone(self) -> str:
        name = self._name("t")
        self.admin().execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self._made.add(name)
        return name

    def acquire(self) -> str:
        """A migrated database no one else uses, proven equal to a fresh clone of the
        template; give it back with ``release``."""
        template = self.template
        while self._free:
            name = self._free.pop()
            try:
                self._reset(name)
                return name
            except DirtyDatabase:
                self.drop(name)  # a test changed more than rows: a new clone replaces it
        name = self._clone()
        with self._connect(name) as connection:
            if self._state(connection) != self._clean:
                raise DirtyDatabase(f"a fresh clone of {template} differs from it")
        return name

    def release(self, database: str) -> None:
        self._free.append(database)

    def close(self) -> None:
        """Drop every database this kit made."""
        if self._admin is None:
            return
        for name in sorted(self._made):
            with contextlib.suppress(Exception):
                self.drop(name)
        self._admin.close()
        self._admin = None
        self._template = None
        self._free.clear()


@contextlib.contextmanager
def pg_database(admin_url: str | None = None, *, migrated: bool = True) -> Iterator[str]:
    """One PostgreSQL database for a script (a benchmark, the soak): migrated unless told
    otherwise, dropped afterwards even when the script fails. Its SQLAlchemy URL."""
    kit = PgKit(admin_url)
    try:
        url = kit.url(kit.create_empty())
        if migrated:
            engine = make_engine(url)
            try:
                migrate(engine)
            finally:
                engine.dispose()
        yield url
    finally:
        kit.close()

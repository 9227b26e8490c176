"""Engines and transactions for SQLite and PostgreSQL.

SQLite: every write transaction is ``BEGIN IMMEDIATE`` (the claim of a batch is serialised
by the database), WAL journal, a busy timeout, and a file database's pool gives out the
connection given back last (its page cache stays valid: see ``make_engine``). PostgreSQL:
psycopg 3, pre-ping so that a restarted server costs one failed cycle at most, and a connect
timeout so that a server that does not answer fails a cycle instead of hanging it.

A database fault is never retried inside ``transaction``: it becomes ``DatabaseUnavailable``,
the cycle fails (one log line) and the next cycle is the retry. That is the one place the
decision lives. For SQLite another writer holding its lock makes ``BEGIN IMMEDIATE`` wait up
to the busy timeout (``SQLITE_BUSY_TIMEOUT_S``); a lock held longer fails the cycle the same
way ("is busy"), and nothing is lost: work leased by a failed cycle waits for its lease to
expire and is taken over with the same message_id (docs/guarantees.md).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool

from exchange.errors import DatabaseUnavailable
from exchange.secrets import mask_secrets, safe_url, secret_forms, url_secrets

SQLITE_BUSY_TIMEOUT_S = 30
PG_CONNECT_TIMEOUT_S = 10
log = logging.getLogger(__name__)


def normalise_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, *, busy_timeout: float = SQLITE_BUSY_TIMEOUT_S, **kwargs: Any) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        parsed = make_url(url)
        dialect: Any = parsed.get_dialect()  # its get_pool_class: the pool create_engine picks
        pool = kwargs.get("poolclass") or dialect.get_pool_class(parsed)
        if issubclass(pool, QueuePool):
            # Each transaction takes the connection the last one gave back (a file database's
            # pool; a memory one has one connection a thread). In WAL mode a connection drops
            # its whole page cache when another connection wrote since its last transaction:
            # the default FIFO order handed two pooled connections out in turn, so every claim
            # and record of a worker with two channels read the database from the file again
            # (issue 31 item 9: an extra channel cost more than the first at 100,000 prices).
            kwargs.setdefault("pool_use_lifo", True)
        engine = create_engine(
            url,
            connect_args={"timeout": busy_timeout, "check_same_thread": False},
            **kwargs,
        )
        _configure_sqlite(engine, busy_timeout)
        return engine
    connect_args = {"connect_timeout": PG_CONNECT_TIMEOUT_S, **kwargs.pop("connect_args", {})}
    if "connect_timeout" in make_url(url).query:  # one given in the URL wins
        del connect_args["connect_timeout"]
    engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args, **kwargs)
    event.listen(engine, "do_execute", _unprepared_when_asked)
    return engine


# A statement with this execution option set to True is sent unprepared on PostgreSQL, so the
# server plans it for its parameters' values every time (an unnamed statement is never given a
# generic plan); every other statement is prepared by psycopg from its sixth execution and may
# then keep a generic plan. One round trip, where ``SET LOCAL plan_cache_mode`` around the
# statement cost two more (issue 35). SQLite ignores it.
PLANNED_FOR_VALUES = "exchange_planned_for_values"


def _unprepared_when_asked(
    cursor: Any, statement: str, parameters: Any, context: Any
) -> bool | None:
    if context is not None and context.execution_options.get(PLANNED_FOR_VALUES):
        cursor.execute(statement, parameters, prepare=False)
        return True
    return None  # the dialect executes it as usual


# A SQLite database holds the operators' password hashes, their sessions and the key that signs
# cookies (and 1C's prices): readable by the service's user only, whatever the umask. SQLite
# gives its -wal and -shm files the database file's mode.
PRIVATE_MODE = 0o600
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def sqlite_file(engine: Engine) -> Path | None:
    """The file of a SQLite engine's database; None for PostgreSQL, memory or a ``file:`` URI."""
    name = engine.url.database or ""
    if engine.dialect.name != "sqlite" or name in ("", ":memory:") or name.startswith("file:"):
        return None
    return Path(name)


def _create_private(path: Path) -> None:
    """Creates ``path`` empty (SQLite takes an empty file as a new database) with
    ``PRIVATE_MODE`` when it does not exist, so that it is never world-readable even for a
    moment; otherwise, or when it cannot be created, leaves SQLite to open it or say why not."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    except OSError:  # it exists, or its folder does not: SQLite's own answer follows
        return
    os.close(fd)


def make_private(engine: Engine) -> list[Path]:
    """``exchange migrate``'s step for a SQLite database created before files were made
    private: its file and companions that this user owns and others may read or write become
    ``PRIVATE_MODE``; returns those changed. A file another user owns is left as it is."""
    path = sqlite_file(engine)
    if path is None or not hasattr(os, "getuid"):  # Windows: the folder's ACL decides
        return []
    changed = []
    for suffix in SQLITE_COMPANIONS:
        companion = path.with_name(path.name + suffix)
        try:
            status = companion.stat()
        except FileNotFoundError:
            continue
        if status.st_uid == os.getuid() and stat.S_IMODE(status.st_mode) & 0o077:
            companion.chmod(stat.S_IMODE(status.st_mode) & PRIVATE_MODE)
            changed.append(companion)
    return changed


def _configure_sqlite(engine: Engine, busy_timeout: float) -> None:
    path = sqlite_file(engine)

    @event.listens_for(engine, "do_connect")
    def _before_connect(*_: Any) -> None:
        if path is not None:
            _create_private(path)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # We emit BEGIN ourselves (below), so the driver must not.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
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
def transaction(
    engine: Engine, *, read_only: bool = False, attach: tuple[str, Path] | None = None
) -> Iterator[Connection]:
    """One short transaction. Connection failures become ``DatabaseUnavailable``.

    ``attach`` (SQLite only): ``(schema, file)``, a database file attached to the connection
    before the transaction begins and detached after it ended (SQLite refuses both inside a
    transaction), so its statements can read ``schema.table``. A pooled connection never keeps
    it: a connection that cannot detach is discarded, not returned to the pool."""
    try:
        raw = engine.connect()
    except DBAPIError as exc:  # refused, unknown host, bad password, not a database file…
        raise DatabaseUnavailable(describe_db_error(engine, exc)) from exc
    try:
        with raw:
            if attach is not None:
                _attach(raw, *attach)
            try:
                connection = raw.execution_options(read_only=True) if read_only else raw
                with connection.begin():
                    yield connection
            finally:
                if attach is not None:
                    _detach(raw, attach[0])
    except OperationalError as exc:
        raise DatabaseUnavailable(describe_db_error(engine, exc)) from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(describe_db_error(engine, exc)) from exc
        raise


def _attach(raw: Connection, schema: str, path: Path) -> None:
    if raw.dialect.name != "sqlite" or not schema.isidentifier():
        raise ValueError(f"cannot attach {schema!r}: SQLite only, a plain name")
    # On the driver's connection: SQLAlchemy's own execute would begin the transaction first.
    driver: Any = raw.connection.driver_connection
    driver.execute(f"ATTACH DATABASE ? AS {schema}", (str(path),))


def _detach(raw: Connection, schema: str) -> None:
    driver: Any = raw.connection.driver_connection
    try:
        driver.execute(f"DETACH DATABASE {schema}")
    except Exception as exc:  # the transaction's outcome stands; the connection goes
        log.warning("could not detach %s (%s): the connection is discarded", schema, exc)
        raw.invalidate()  # closed, never back in the pool with the attachment


def describe_db_error(engine: Engine, exc: DBAPIError) -> str:
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
    # Drivers sometimes repeat the connection string or its parameters: never show a password,
    # whether it came in the userinfo or as ?password=, in whatever quoting.
    url = engine.url.render_as_string(hide_password=False)
    forms = sorted(
        {form for secret in url_secrets(url) for form in secret_forms(secret)},
        key=lambda f: (-len(f), f),
    )
    reason = mask_secrets(reason, forms)
    reason = re.sub(r"password=\S+", "password=***", reason)
    if getattr(exc.orig, "sqlstate", None) in ("40001", "40P01"):  # PostgreSQL chose a victim
        return f"database {safe_url(str(engine.url))} rolled a transaction back: {reason}"
    if "database is locked" in reason:  # SQLite: another writer kept its lock too long
        return (
            f"database {safe_url(str(engine.url))} is busy: {reason} (another connection "
            "held a write lock longer than the busy timeout)"
        )
    return f"database {safe_url(str(engine.url))} is unreachable: {reason}"


def ping(engine: Engine) -> None:
    with transaction(engine, read_only=True) as connection:
        connection.execute(text("SELECT 1"))

"""New staging rows wake the workers at once on PostgreSQL (issue 23, item 6: LISTEN/NOTIFY).

Two senders, one channel: the trigger that ``exchange migrate`` puts on ``staging_intents``
in the service's own PostgreSQL database (migration 0015: 1C's inserts), and ``serve``'s
intakes, which announce after their commit (``announce_staged``: that also covers staging in a
database of its own, where there is no trigger). A worker (``Listener``) keeps one connection
with ``LISTEN`` open and starts its next cycle as soon as a notification arrives; the poll
stays beside it (a missed notification costs one poll interval, never a row).

SQLite has no notification (issue 35, item 4): a worker (``DataVersionWatch``) keeps one
connection of its own to the file where ``staging_intents`` is and asks it ``PRAGMA
data_version`` every ``CHECK_EVERY_S``, a read of the shared WAL index that changes only when
another connection committed. The worker's own commits are other connections too (its pool,
its heartbeat after every cycle), so a change alone would wake a cycle whose heartbeat wakes the
next: a change is a wake-up only when ``max(id)`` of ``staging_intents`` grew with it (one seek
in the primary key; ids grow: ``AUTOINCREMENT``), which is what 1C's INSERT and ``serve``'s
intake do and what taking rows in or recording outcomes never does. The poll stays beside it.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from sqlalchemy import Engine, text

from exchange.db.engine import is_postgres, sqlite_file, transaction
from exchange.i18n import Lang, _, number

log = logging.getLogger(__name__)

CHANNEL = "exchange_staging"
RECONNECT_S = 5.0  # a lost listening connection is opened again after this; the poll goes on
# SQLite: how often the watching connection asks whether another connection committed. 0.15 s
# keeps an idle row's wait well under half a second; each check is a few microseconds of CPU
# (bench: the `wake` section measures the idle worker's share of a core).
CHECK_EVERY_S = 0.15


def announce_staged(engine: Engine) -> None:
    """Tell the listening workers that rows were staged (after the staging commit). Nothing on
    SQLite."""
    if is_postgres(engine):
        with transaction(engine) as connection:
            connection.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})


def how_workers_wake(
    engine: Engine, staging_engine: Engine | None, poll_interval: float, lang: Lang = "en"
) -> str:
    """One sentence for ``exchange migrate``: whether new rows wake the workers or they poll."""
    poll = f"{poll_interval:g}" if lang == "en" else number(poll_interval, lang, 3)
    check = f"{CHECK_EVERY_S:g}" if lang == "en" else number(CHECK_EVERY_S, lang, 3)
    if not is_postgres(engine):
        if _watched_file(engine, staging_engine) is None:
            return _(
                "workers look for new staging rows every {poll} s (the poll): staging_intents "
                "is not in a SQLite file they can watch",
                lang,
            ).format(poll=poll)
        return _(
            "SQLite: a row committed to staging_intents wakes the workers within {check} s "
            "(PRAGMA data_version); the poll every {poll} s stays beside it",
            lang,
        ).format(check=check, poll=poll)
    if staging_engine is not None and staging_engine is not engine:
        return _(
            "staging_intents is in another database: workers look for 1C's rows every {poll} s "
            "(the poll); rows staged by serve wake them at once",
            lang,
        ).format(poll=poll)
    return _(
        "new staging rows wake the workers at once (a trigger on staging_intents, NOTIFY)", lang
    )


class Listener:
    """``LISTEN exchange_staging`` on the service's PostgreSQL database; ``wake()`` is called
    for each notification (many in a row are one wake-up to the caller's event)."""

    def __init__(self, engine: Engine, wake: Callable[[], None]) -> None:
        self._url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._wake = wake

    async def run(self) -> None:
        """Listen until cancelled; a lost connection is one log line and a retry."""
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    log.debug("listening for new staging rows")
                    async for _ in connection.notifies():
                        self._wake()
            except psycopg.Error as exc:
                # The message is psycopg's, without the URL; the poll carries on meanwhile.
                log.warning(
                    "not listening for new staging rows (%s): polling; again in %g s",
                    type(exc).__name__,
                    RECONNECT_S,
                )
            await asyncio.sleep(RECONNECT_S)


class DataVersionWatch:
    """SQLite: ``wake()`` is called when another connection committed rows to
    ``staging_intents`` (``PRAGMA data_version`` changed and ``max(id)`` grew); commits that
    add no staging row (the worker's own records and heartbeats) wake nothing."""

    def __init__(self, path: Path, wake: Callable[[], None], *, every: float | None = None) -> None:
        self._path = path
        self._wake = wake
        self._every = CHECK_EVERY_S if every is None else every
        self._connection: sqlite3.Connection | None = None
        self._version: int | None = None
        self._newest: int | None = None
        self.checks = 0  # checks done (tests wait on it instead of the clock)

    async def run(self) -> None:
        """Watch until cancelled; a check that fails (the file busy or gone) is one log line
        and a new connection after ``RECONNECT_S``; the poll carries on meanwhile."""
        try:
            while True:
                try:
                    self.check()
                except sqlite3.Error as exc:
                    self.close()
                    log.warning(
                        "not watching for new staging rows (%s): polling; again in %g s",
                        type(exc).__name__,
                        RECONNECT_S,
                    )
                    await asyncio.sleep(RECONNECT_S)
                    continue
                await asyncio.sleep(self._every)
        finally:
            self.close()

    def check(self) -> None:
        """One look (a few microseconds when nothing changed): wakes when a row was staged
        since the last look. The first look only takes the starting point."""
        connection = self._connect()
        version = connection.execute("PRAGMA data_version").fetchone()[0]
        self.checks += 1
        if version == self._version:
            return
        self._version = version
        newest = connection.execute("SELECT max(id) FROM staging_intents").fetchone()[0] or 0
        grew = self._newest is not None and newest > self._newest
        self._newest = newest  # followed down too: a table without AUTOINCREMENT reuses ids
        if grew:
            self._wake()

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            # mode=rw: never creates a file (migrate made it private); autocommit: each look
            # is a read of its own, no snapshot held between looks; timeout 0: a look never
            # waits for a lock (the next one comes in CHECK_EVERY_S).
            self._connection = sqlite3.connect(
                f"{self._path.resolve().as_uri()}?mode=rw",
                uri=True,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
            )
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._version = None  # a new connection starts its own count


class Watch(Protocol):
    async def run(self) -> None: ...


def _watched_file(engine: Engine, staging_engine: Engine | None) -> Path | None:
    """The SQLite file where staging_intents is, when the service's database is SQLite."""
    if is_postgres(engine):
        return None
    source = staging_engine if staging_engine is not None else engine
    return sqlite_file(source)


def watch(engine: Engine, staging_engine: Engine | None, wake: Callable[[], None]) -> Watch | None:
    """What wakes a worker when rows are staged: LISTEN on PostgreSQL, the data_version watch
    on a SQLite file; None where only the poll can tell (an in-memory database)."""
    if is_postgres(engine):
        return Listener(engine, wake)
    path = _watched_file(engine, staging_engine)
    return None if path is None else DataVersionWatch(path, wake)


__all__ = [
    "CHANNEL",
    "CHECK_EVERY_S",
    "DataVersionWatch",
    "Listener",
    "announce_staged",
    "how_workers_wake",
    "watch",
]

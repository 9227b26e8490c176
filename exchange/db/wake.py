"""New staging rows wake the workers at once on PostgreSQL (issue 23, item 6: LISTEN/NOTIFY).

Two senders, one channel: the trigger that ``exchange migrate`` puts on ``staging_intents``
in the service's own PostgreSQL database (migration 0015: 1C's inserts), and ``serve``'s
intakes, which announce after their commit (``announce_staged``: that also covers staging in a
database of its own, where there is no trigger). A worker (``Listener``) keeps one connection
with ``LISTEN`` open and starts its next cycle as soon as a notification arrives; the poll
stays beside it (a missed notification costs one poll interval, never a row). On SQLite there
is no notification: the poll is the only clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sqlalchemy import Engine, text

from exchange.db.engine import is_postgres, transaction

log = logging.getLogger(__name__)

CHANNEL = "exchange_staging"
RECONNECT_S = 5.0  # a lost listening connection is opened again after this; the poll goes on


def announce_staged(engine: Engine) -> None:
    """Tell the listening workers that rows were staged (after the staging commit). Nothing on
    SQLite."""
    if is_postgres(engine):
        with transaction(engine) as connection:
            connection.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})


def how_workers_wake(engine: Engine, staging_engine: Engine | None, poll_interval: float) -> str:
    """One sentence for ``exchange migrate``: whether new rows wake the workers or they poll."""
    if not is_postgres(engine):
        return f"SQLite: workers look for new staging rows every {poll_interval:g} s (the poll)"
    if staging_engine is not None and staging_engine is not engine:
        return (
            "staging_intents is in another database: workers look for 1C's rows every "
            f"{poll_interval:g} s (the poll); rows staged by serve wake them at once"
        )
    return "new staging rows wake the workers at once (a trigger on staging_intents, NOTIFY)"


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


def listens(engine: Engine) -> bool:
    return is_postgres(engine)


__all__ = ["CHANNEL", "Listener", "announce_staged", "how_workers_wake", "listens"]

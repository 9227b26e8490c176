"""Issue 31, item 9: on a SQLite file database, one thread's transactions one after another
(a worker's claims and records, every channel's loop on the event loop) keep to the connection
the last one gave back. In WAL mode a connection drops its whole page cache when another
connection committed since its last transaction (``PRAGMA data_version`` tells it): handed out
in turn, two pooled connections (the second one left by a heartbeat's thread) made every claim
and record of a worker with two channels read its pages from the file again."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from exchange.db.engine import make_engine, transaction


def test_one_thread_s_transactions_find_their_connection_s_page_cache_valid(
    tmp_path: Path,
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'exchange.db'}")
    try:
        with transaction(engine) as connection:
            connection.execute(text("CREATE TABLE t (x INTEGER)"))
        # Two connections in the pool, as a heartbeat written in a thread while the event
        # loop's transaction ran leaves it.
        first, second = engine.connect(), engine.connect()
        first.close()
        second.close()
        # connection -> the data_version it read last (its own commits leave it as it is)
        last_seen: dict[int, int] = {}
        reset = []
        for n in range(6):
            with transaction(engine) as connection:
                driver = id(connection.connection.driver_connection)
                version = connection.execute(text("PRAGMA data_version")).scalar_one()
                if driver in last_seen and last_seen[driver] != version:
                    reset.append(n)  # another connection committed: SQLite drops the cache
                last_seen[driver] = version
                connection.execute(text("INSERT INTO t VALUES (:n)"), {"n": n})
        assert reset == []
        assert len(last_seen) == 1  # every transaction ran on one connection
    finally:
        engine.dispose()


def test_a_memory_database_keeps_its_pool_of_one_connection_a_thread() -> None:
    """The order applies to a file database's pool; a memory database (one connection a
    thread) opens as before."""
    engine = make_engine("sqlite://")
    try:
        with transaction(engine) as connection:
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()

"""How long a worker's row is kept (contract 15: "old rows cleared after a day").

A worker's row says what it last reported (``workers``: its heartbeat, its pause, its
breaker, its pace) and whether it stopped cleanly; ``exchange status`` and the dashboard show
every row younger than ``WORKERS_KEPT``, live, silent or stopped, so that a worker killed with
``kill -9`` never vanishes from them. Older rows go: at every worker's start and clean stop,
and with ``exchange prune``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection

from exchange.db.schema import workers

WORKERS_KEPT = timedelta(days=1)


def clear_old_workers(connection: Connection, now: datetime) -> int:
    """Removes the rows of workers that have not reported for ``WORKERS_KEPT``."""
    result = connection.execute(workers.delete().where(workers.c.heartbeat_at < now - WORKERS_KEPT))
    return int(result.rowcount or 0)

"""How long a worker's row is kept (contract 15: "old rows cleared after a day").

A worker's row says what it last reported (``workers``: its heartbeat, its pause, its
breaker, its pace) and whether it stopped cleanly; ``exchange status`` and the dashboard show
every row younger than ``WORKERS_KEPT``, live, silent or stopped, so that a worker killed with
``kill -9`` never vanishes from them. Older rows go: at every worker's start and clean stop,
and with ``exchange prune``.

A row that stopped cleanly goes sooner once a later one of its channel has stopped too and
``STOPPED_KEPT`` has passed (words31 item 3: many short runs, each under a new worker id, piled
up as rows of stopped workers): the later stop says how delivery went since, so the older
row holds nothing back any more (``ops.status.holding`` reads only rows no later worker of
their channel superseded), and the last stop, the one ``status`` names, stays. The history
and the metrics never read a stopped worker's row.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, exists, or_

from exchange.db.schema import workers

WORKERS_KEPT = timedelta(days=1)
# How long a stopped worker's row stays shown after a later worker of its channel stopped.
STOPPED_KEPT = timedelta(minutes=15)


def clear_old_workers(connection: Connection, now: datetime) -> int:
    """Removes the rows of workers that have not reported for ``WORKERS_KEPT``, and those that
    stopped more than ``STOPPED_KEPT`` before a later worker of their channel (a process's own
    rows, of no channel, are one channel here) stopped too; how many went."""
    later = workers.alias("later")
    superseded = exists().where(
        later.c.worker_id != workers.c.worker_id,
        later.c.channel.is_not_distinct_from(workers.c.channel),
        later.c.stopped_at > workers.c.stopped_at,
    )
    result = connection.execute(
        workers.delete().where(
            or_(
                workers.c.heartbeat_at < now - WORKERS_KEPT,
                workers.c.stopped_at.is_not(None)
                & (workers.c.stopped_at < now - STOPPED_KEPT)
                & superseded,
            )
        )
    )
    return int(result.rowcount or 0)

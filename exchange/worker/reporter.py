"""The reporter: what the worker tells about itself in its ``workers`` row (contract 15).

The row holds the process's part (its id, when it started, its broker's health) and what its
delivery loop says about the site (a pause, the breaker, the pace): the loop hands that part in
(``LoopValues``), the reporter writes the row, counts the live workers the loop shares the site
with, and marks the row stopped on a clean stop.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.dialects import postgresql, sqlite

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import workers
from exchange.db.worker_rows import clear_old_workers
from exchange.domain.clock import Clock, Monotonic
from exchange.intake.sources.common import Source
from exchange.settings import Settings
from exchange.worker.common import SHARE_EVERY, recent_seconds

# What a loop tells about the site at ``now`` (its pause, its breaker, its pace), read on the
# event loop (the pace lives there).
LoopValues = Callable[[datetime], dict[str, Any]]


class Reporter:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        clock: Clock,
        monotonic: Monotonic,
        *,
        started_at: datetime,
        source: Source | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.clock = clock
        self.monotonic = monotonic
        self.worker_id = settings.worker_id
        self.started_at = started_at
        self.source = source
        self.loops: list[LoopValues] = []  # each loop's part of the row (``process`` adds them)
        self.reported_at = -math.inf  # the last heartbeat (monotonic)

    def due(self) -> bool:
        """Whether a long cycle reports (and counts the others) now: every SHARE_EVERY."""
        return self.monotonic.now() - self.reported_at >= SHARE_EVERY

    def heartbeat(self) -> None:
        self.write(self.values())

    async def report(self) -> None:
        """A heartbeat off the event loop (``runner.reporting``'s every REPORT_EVERY_S); the
        first of a run also clears the rows of workers silent for a day."""
        values = self.values()
        first = self.reported_at == -math.inf
        await asyncio.to_thread(self.write, values)
        if first:
            await asyncio.to_thread(self._clear_old_workers, values["heartbeat_at"])

    def _clear_old_workers(self, now: datetime) -> None:
        with transaction(self.engine) as connection:
            clear_old_workers(connection, now)

    def values(self) -> dict[str, Any]:
        """What the worker tells about itself; read on the event loop (the pace lives there)."""
        now = self.clock.now()
        values: dict[str, Any] = {
            "worker_id": self.worker_id,
            "started_at": self.started_at,
            "heartbeat_at": now,
            # A start clears a stop (contract 15): the shipped configuration fixes the worker
            # id, so every restart reuses the row a clean stop marked.
            "stopped_at": None,
        }
        for loop in self.loops:
            values.update(loop(now))
        values["source"] = json.dumps(self.source.health.as_json()) if self.source else None
        return values

    def write(self, values: dict[str, Any]) -> None:
        self.reported_at = self.monotonic.now()
        with transaction(self.engine) as connection:
            dialect_insert = postgresql.insert if is_postgres(connection) else sqlite.insert
            statement = dialect_insert(workers).values(values)
            connection.execute(
                statement.on_conflict_do_update(
                    index_elements=["worker_id"],
                    set_={k: statement.excluded[k] for k in values if k != "worker_id"},
                )
            )

    def live_workers(self, now: datetime) -> int:
        """Workers that reported recently (this one included): they share the rate cap."""
        since = now - timedelta(seconds=recent_seconds(self.settings))
        with transaction(self.engine) as connection:
            others = connection.execute(
                select(func.count())
                .select_from(workers)
                .where(
                    workers.c.heartbeat_at >= since,
                    workers.c.worker_id != self.worker_id,
                    workers.c.stopped_at.is_(None),
                )
            ).scalar_one()
        return 1 + int(others)

    def retire(self, now: datetime) -> None:
        """A clean stop: the worker's row is marked stopped (``stopped_at``: ``status`` and the
        dashboard show it stopped, with when, never silent; its next start clears the mark).
        Its last word about the site (a refused token, an open breaker) stays on the row:
        ``ops.status.holding`` reads it while no other worker is live. Rows of workers silent
        for a day go (``clear_old_workers``)."""
        with transaction(self.engine) as connection:
            connection.execute(
                workers.update()
                .where(workers.c.worker_id == self.worker_id)
                .values(stopped_at=now, heartbeat_at=now)
            )
            clear_old_workers(connection, now)

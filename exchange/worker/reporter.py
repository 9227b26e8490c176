"""The reporter: what the worker tells about itself in its ``workers`` row (contract 15).

The process's row holds its part (its id, when it started, its broker's health). What a
delivery loop says about its site (a pause, the breaker, the pace) the loop hands in
(``LoopValues``, through ``add_loop``): with the one channel of a configuration without
EXCHANGE_CHANNELS it is written on the process's row, as it always was; with
EXCHANGE_CHANNELS each loop has a row of its own, ``<worker id>/<channel>`` (contract 13), its
``channel`` column naming it. The reporter writes the rows, counts the live workers a loop
shares its site with (the loops of the same channel), and marks the rows stopped on a clean
stop.
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
        # Each loop's part: on the process's row (``split`` False), or on a row of its own.
        self.split = settings.channels is not None
        self.loops: list[LoopRow] = []  # ``add_loop``
        self.reported_at = -math.inf  # the last heartbeat (monotonic)

    def add_loop(self, channel: str) -> LoopRow:
        """A delivery loop of ``channel`` reports through the returned row (its part set
        as ``told`` once the loop is built)."""
        row = LoopRow(self, channel)
        self.loops.append(row)
        return row

    def due(self) -> bool:
        """Whether a long cycle reports (and counts the others) now: every SHARE_EVERY."""
        return self.monotonic.now() - self.reported_at >= SHARE_EVERY

    def heartbeat(self) -> None:
        for values in self.rows():
            self.write(values)

    def rows(self) -> list[dict[str, Any]]:
        """Every row this process writes: its own, then each loop's when they have their own."""
        process = self.values()
        if not self.split:
            return [process]
        return [process, *(loop.values() for loop in self.loops)]

    async def report(self) -> None:
        """A heartbeat off the event loop (``runner.reporting``'s every REPORT_EVERY_S); the
        first of a run also clears the rows of workers silent for a day."""
        rows = self.rows()
        first = self.reported_at == -math.inf
        for values in rows:
            await asyncio.to_thread(self.write, values)
        if first:
            await asyncio.to_thread(self._clear_old_workers, rows[0]["heartbeat_at"])

    def _clear_old_workers(self, now: datetime) -> None:
        with transaction(self.engine) as connection:
            clear_old_workers(connection, now)

    def values(self) -> dict[str, Any]:
        """What the worker tells about itself (with its loop's part unless the loops have rows
        of their own); read on the event loop (the pace lives there)."""
        now = self.clock.now()
        values = self._row(self.worker_id, now)
        if not self.split:
            for loop in self.loops:
                values.update(loop.told(now))
        values["source"] = json.dumps(self.source.health.as_json()) if self.source else None
        return values

    def _row(self, worker_id: str, now: datetime) -> dict[str, Any]:
        return {
            "worker_id": worker_id,
            "started_at": self.started_at,
            "heartbeat_at": now,
            # A start clears a stop (contract 15): the shipped configuration fixes the worker
            # id, so every restart reuses the row a clean stop marked.
            "stopped_at": None,
        }

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

    def live_workers(self, now: datetime, channel: str | None = None) -> int:
        """Workers that reported recently (this one included): they share the rate cap.
        ``channel``: the loops of that channel (rows of their own), else every row but this
        process's."""
        since = now - timedelta(seconds=recent_seconds(self.settings))
        own = self.worker_id if channel is None else loop_row_id(self.worker_id, channel)
        query = (
            select(func.count())
            .select_from(workers)
            .where(
                workers.c.heartbeat_at >= since,
                workers.c.worker_id != own,
                workers.c.stopped_at.is_(None),
            )
        )
        if channel is not None:
            query = query.where(workers.c.channel == channel)
        with transaction(self.engine) as connection:
            others = connection.execute(query).scalar_one()
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
                .where(workers.c.worker_id.in_(self.row_ids()))
                .values(stopped_at=now, heartbeat_at=now)
            )
            clear_old_workers(connection, now)

    def row_ids(self) -> list[str]:
        """The ids of the rows this process writes."""
        if not self.split:
            return [self.worker_id]
        return [self.worker_id, *(loop.row_id for loop in self.loops)]


def loop_row_id(worker_id: str, channel: str) -> str:
    """A delivery loop's own row (contract 13): ``<worker id>/<channel>``."""
    return f"{worker_id}/{channel}"


class LoopRow:
    """Where one loop's words about its site go: its own row ``<worker id>/<channel>`` when
    the loops have rows of their own, else the process's row; and who shares its site."""

    def __init__(self, reporter: Reporter, channel: str) -> None:
        self.reporter = reporter
        self.channel = channel
        self.told: LoopValues = lambda now: {}
        self.row_id = (
            loop_row_id(reporter.worker_id, channel) if reporter.split else reporter.worker_id
        )

    def values(self) -> dict[str, Any]:
        """The row this loop reports on (the process's, with its part, when not its own)."""
        if not self.reporter.split:
            return self.reporter.values()
        now = self.reporter.clock.now()
        values = self.reporter._row(self.row_id, now)
        values.update(self.told(now))
        values["channel"] = self.channel
        return values

    def write(self, values: dict[str, Any]) -> None:
        self.reporter.write(values)

    def live_workers(self, now: datetime) -> int:
        """The live workers delivering to this loop's site, this one included."""
        return self.reporter.live_workers(now, self.channel if self.reporter.split else None)

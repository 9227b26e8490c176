"""A worker's take-in within a cycle that a backlog keeps going (issue 23): rows staged while
the backlog drains are taken in every poll interval; the take-in coalesces the aggregates it
brought messages for at once, and sweeps the whole queue (coalescing, the gap check) only as
often as ``coalesce.sweep_due`` lets it, so that a take-in with nothing new costs the same
whatever the backlog. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.testing import (
    FakeSite,
    fast_settings,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.domain.clock import FakeClock, FakeMonotonic
from exchange.queue import coalesce

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

BACKLOG = 150  # three batches of 50
GAP = 60.0


class StagingSite(FakeSite):
    """Accepts every price; on the first request, runs ``first`` (stages rows, moves the
    clock), then waits ``pause`` seconds, so that the worker's next take-in is due."""

    def __init__(self, first: Any, pause: float) -> None:
        super().__init__()
        self.first = first
        self.pause = pause
        self.requests = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            self.requests += 1
            if self.requests == 1:
                self.first()
                await asyncio.sleep(self.pause)
        answered: httpx.Response = self(request)
        return answered


def one_cycle(
    engine: Engine,
    db_url: str,
    clock: FakeClock,
    site: StagingSite,
    monotonic: FakeMonotonic | None = None,
) -> None:
    settings = fast_settings(
        db_url, "https://site.test", batch_size=50, concurrency=1, gap_timeout=GAP
    )
    worker = bootstrap.worker(
        settings,
        engine,
        clock=clock,
        monotonic=monotonic,
        transport=httpx.MockTransport(site.handle),
    )

    async def run() -> None:
        try:
            await worker.cycle()
        finally:
            await worker.aclose()

    asyncio.run(run())


def ends(engine: Engine, aggregate: str) -> dict[int, tuple[str, str | None]]:
    with transaction(engine, read_only=True) as c:
        return {
            version: (state, reason)
            for version, state, reason in c.execute(
                select(messages.c.version, messages.c.state, messages.c.reason).where(
                    messages.c.aggregate == aggregate, ~messages.c.rejected
                )
            )
        }


def test_a_correction_taken_in_mid_cycle_cancels_its_older_version_without_a_sweep(
    engine: Engine, db_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sweep is due within the cycle (its share made negligible); a newer version of a
    price still waiting deep in the backlog is staged during the first batch. The take-in
    that brings it cancels the older version (``superseded``) within the same cycle, and the
    whole queue was swept once, at the cycle's start."""
    monkeypatch.setattr(coalesce, "SWEEP_SHARE", 1e-12)
    sweeps: list[int | None] = []
    real = coalesce.coalesce

    def spy(connection: Any, kinds: Any, now: Any, *, since: int | None = None) -> int:
        sweeps.append(since)
        return real(connection, kinds, now, since=since)

    monkeypatch.setattr(coalesce, "coalesce", spy)
    last = f"SKU-{BACKLOG - 1:03d}"
    stage(engine, [price_row(f"SKU-{n:03d}", 1) for n in range(BACKLOG)])
    site = StagingSite(lambda: stage(engine, [price_row(last, 2, "222.00")]), pause=0.05)
    one_cycle(engine, db_url, clock, site)

    assert ends(engine, last) == {1: ("cancelled", "superseded"), 2: ("delivered", None)}
    assert site.applied[("price", last)] == [2]
    assert sweeps[0] is None, "the cycle's start sweeps the whole queue"
    assert len(sweeps) == 2 and sweeps[1] is not None, "then only the take-in's aggregates"


def test_a_gap_is_quarantined_within_a_cycle_a_backlog_keeps_going(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    """A posting waits for a missing predecessor while a backlog drains; during the first
    batch the gap's timeout passes. The sweep within the same cycle quarantines it
    (``sequence-gap``): a long drain does not hold the gap check back until it ends. (The
    worker's monotonic clock is the fake clock's: the timeout's minute passes on both, so the
    cycle start's sweep, however long a loaded machine makes it, reads as taking no time and
    the sweep is due at the first take-in after the minute; ``sweep_due``'s share of the
    cost is tested on its own.)"""
    stage(engine, [price_row(f"SKU-{n:03d}", 1) for n in range(BACKLOG)])
    stage(engine, [posting_row("DOC-1", 2)])  # version 1 never comes
    site = StagingSite(lambda: clock.advance(GAP + 1), pause=0.0)
    one_cycle(engine, db_url, clock, site, FakeMonotonic(clock))

    assert ends(engine, "DOC-1") == {2: ("quarantined", "sequence-gap")}
    assert site.requests == BACKLOG, "the backlog went on"

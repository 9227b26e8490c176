"""Review ymdup34 (docs/guarantees.md: "two items of one product are never in flight on a
channel at once, even with several workers on PostgreSQL"; contract 14): two workers on one
database, each taking the same Yandex Market delivery in turn. Each worker kept what it had
seen of the delivery in its memory (Yandex's 200; "not applied in time") and trusted it over
the delivery's receipt, which the other worker had moved on since: the worker that had sent
the price read it back once more after the other had found it not applied, charging that one
failure twice, and each then sent the same price (Yandex logged two identical updates 1.1 s
apart). The delivery's receipt, as the claim hands it back, is what counts: one attempt is
charged a failure, and a price Yandex took is read back, never sent again by the other worker.
Against the simulator, on SQLite and PostgreSQL; the test chooses which worker cycles."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from marketsims import YM_BUSINESS, YM_KEY, ym_settings
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, history, messages
from exchange.dev.simclock import SimClock
from exchange.dev.testing import price_row, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.worker import Worker

SKU = "A-009"
APPLY_TIMEOUT = 3.0  # real seconds after Yandex's 200 that a price not shown is "not applied"
# (1 s was shorter than one loaded cycle: in CI's pre-check the sender read its own update back
# as not applied inside the cycle that sent it, so the failure was charged to it, not to B)


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    """Yandex on a clock nobody moves: it takes every update and applies none (an older
    update landed after it, say), so each read-back finds the price not shown."""
    switches = YmSwitches(apply_delay=60)
    simulator = YmSimulator(YM_KEY, YM_BUSINESS, clock=SimClock(0), switches=switches)
    simulator.start()
    simulator.set_live(SKU, Decimal(1600))
    yield simulator
    simulator.stop()


class _Wire(httpx.AsyncBaseTransport):
    """Counts the updates (``offer-prices/updates``) sent to Yandex."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.updates = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.updates += request.url.path.endswith("/offer-prices/updates")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def workers(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, wire: _Wire, *names: str
) -> list[Worker]:
    out = []
    for n, name in enumerate(names):
        settings = ym_settings(
            db_url,
            ym,
            tmp_path,
            ym_price_types={"retail": "value"},
            ym_apply_timeout=str(APPLY_TIMEOUT),
            retry_base_delay="1.5",
            retry_max_delay="1.5",
            max_attempts="10",
        ).model_copy(update={"worker_id": name})
        out.append(bootstrap.worker(settings, engine, rng=random.Random(n), transport=wire))
    return out


def events(engine: Engine) -> list[tuple[str, str | None, int | None]]:
    """The delivery's ends of attempts, in order: (event, worker, attempt)."""
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(history.c.event, history.c.worker, history.c.attempt)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.aggregate == SKU, history.c.channel_id.is_not(None))
            .order_by(history.c.id)
        )
        return [(str(e), w, a) for e, w, a in rows]


async def until(worker: Worker, done: Callable[[], bool], seconds: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while not done():
        assert loop.time() < ends, "the worker never got there"
        await worker.cycle()
        await asyncio.sleep(0.02)


def next_end_by(engine: Engine, name: str) -> Callable[[], bool]:
    """The next attempt ``name`` ends (from now on): its outcome recorded on the delivery (a
    wait in the words of the one before writes no history row, review rev36a), so read from
    the delivery's last change, the worker being the only one cycling."""

    def changed() -> tuple[Any, ...]:
        with transaction(engine, read_only=True) as connection:
            return tuple(
                connection.execute(
                    select(deliveries.c.updated_at, deliveries.c.locked_by)
                    .join(messages, messages.c.id == deliveries.c.message_pk)
                    .where(messages.c.aggregate == SKU)
                ).one()
            )

    before = len(events(engine))
    then = changed()
    return lambda: (
        any(w == name for _, w, _ in events(engine)[before:])
        or ((now := changed()) != then and now[1] is None)
    )


def charged_failures(engine: Engine) -> list[tuple[str | None, int | None]]:
    return [(w, a) for e, w, a in events(engine) if e == "retry-scheduled"]


def run(scenario: Callable[[], Any], *all_workers: Worker) -> None:
    async def go() -> None:
        try:
            await scenario()
        finally:
            for w in all_workers:
                await w.target.aclose()

    asyncio.run(go())


def test_one_failure_found_by_one_worker_is_charged_once_and_the_other_sends_once(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Promise: one attempt charged per failure, one send per attempt, whichever worker takes
    the delivery. A sends 1610 (Yandex takes it); B, taking the delivery once
    ``ym_apply_timeout`` passed, finds it not shown: one failure, charged. A takes it next: it
    sends it again (its memory of its own 200 is older than B's finding), and B, taking it
    after, reads A's new update back, never sends it a third time."""
    wire = _Wire()
    a, b = workers(db_url, engine, ym, tmp_path, wire, "w1", "w2")

    async def scenario() -> None:
        stage(engine, [price_row(SKU, 21, "1610")])
        await until(a, lambda: wire.updates == 1)
        await until(b, lambda: len(charged_failures(engine)) == 1)
        assert [("w2", 1)] == charged_failures(engine), events(engine)
        assert 1 == wire.updates, (
            "B found it not applied: sent again on its next attempt",
            events(engine),
        )
        await until(a, next_end_by(engine, "w1"))
        assert [("w2", 1)] == charged_failures(engine), (
            "A read its own old 200 back and charged B's one failure a second time",
            events(engine),
        )
        assert 2 == wire.updates, "A sent it again, as B's finding says"
        await until(b, next_end_by(engine, "w2"))
        assert 2 == wire.updates, ("B sent A's update a second time", events(engine))

    run(scenario, a, b)


def test_a_worker_that_found_a_price_not_applied_reads_back_what_another_sent_since(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Promise: never two sends of one attempt. C's 1610 is taken; B finds it not applied
    (charged: sent again on the next attempt); A, which never saw it, sends it again and
    Yandex takes it; B, taking it next, reads A's update back: its own "not applied" was of
    C's update, not of A's."""
    wire = _Wire()
    a, b, c = workers(db_url, engine, ym, tmp_path, wire, "w1", "w2", "w3")

    async def scenario() -> None:
        stage(engine, [price_row(SKU, 21, "1610")])
        await until(c, lambda: wire.updates == 1)
        await until(b, lambda: len(charged_failures(engine)) == 1)
        await until(a, lambda: wire.updates == 2)
        assert "awaiting-outcome" == events(engine)[-1][0], events(engine)
        await until(b, next_end_by(engine, "w2"))
        assert 2 == wire.updates, ("B sent A's update a second time", events(engine))
        assert [("w2", 1)] == charged_failures(engine), events(engine)

    run(scenario, a, b, c)

"""Review-wb finding 1 end to end: under ``sku_source = article`` two 1C offers (sizes) sharing
one Артикул are one Wildberries good (one vendor code, one ``nmID``, one price: research §2.1).
Worker A gave the article to OFF-S; worker B, a new process that never sent it, is given OFF-M:
the database says the article is OFF-S's, and OFF-M ends ``invalid-for-channel``, never uploaded
over OFF-S's price: whether OFF-S's price was delivered, or its upload was answered 504 and waits
to be tried again (its task may have been made: the good is held). SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from marketsims import wb_sim
from onegood import BothClaimedFirst, ReadBeforeTheOthersClaim, articles, lease_later
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.wb_store import DbWbStore
from exchange.dev.testing import fast_settings, one_channel_messages, price_row, stage
from exchange.dev.wbsim import WbSimulator
from exchange.worker import Worker

messages = one_channel_messages()
UPLOAD = "/api/v2/upload/task"


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    with wb_sim([("ART-1", 1000)], processing_delay=0.0) as sim:
        yield sim


class Gateway(httpx.AsyncBaseTransport):
    """Every upload reaches WB (it makes the task); with ``failing``, its answer is a gateway's
    504 (research §2.1: what WB did is not said)."""

    def __init__(self, failing: bool) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.failing = failing

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if self.failing and request.url.path == UPLOAD:
            await response.aread()
            await response.aclose()
            return httpx.Response(504, text="<html>504 Gateway Time-out</html>", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def make_worker(db_url: str, engine: Engine, sim: WbSimulator, name: str, failing: bool) -> Worker:
    settings = fast_settings(
        db_url,
        None,
        target="wildberries",
        wb_api_url=sim.url,
        wb_token=sim.token(),
        sku_source="article",
        max_attempts=10,
        retry_base_delay=30.0,
        retry_max_delay=30.0,
    ).model_copy(update={"worker_id": name})
    return bootstrap.worker(settings, engine, rng=random.Random(1), transport=Gateway(failing))


def state(engine: Engine, aggregate: str) -> tuple[str, str | None] | None:
    with transaction(engine, read_only=True) as connection:
        found = connection.execute(
            select(messages.c.state, messages.c.reason).where(messages.c.aggregate == aggregate)
        ).one_or_none()
    return None if found is None else (str(found[0]), found[1])


async def cycles_until(worker: Worker, done: Callable[[], Any], seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends and not done():
        await worker.cycle()
        await asyncio.sleep(0.02)


def one_good_two_workers(
    db_url: str, engine: Engine, sim: WbSimulator, failing: bool
) -> tuple[Worker, Worker, int]:
    """OFF-S and OFF-M sharing the article ART-1 (one good: its ``nmID``), and two workers on
    one database: ``failing``, the first's uploads answered 504."""
    articles(engine, {"OFF-S": "ART-1", "OFF-M": "ART-1"})
    good = sim.by_vendor_code("ART-1")
    assert good is not None
    first = make_worker(db_url, engine, sim, "worker-a", failing)
    return first, make_worker(db_url, engine, sim, "worker-b", False), good.nm_id


@pytest.mark.parametrize("first_ends", ["delivered", "delayed after a 504"])
def test_another_workers_sku_holds_the_article_the_second_sku_is_invalid(
    db_url: str, engine: Engine, wb: WbSimulator, first_ends: str
) -> None:
    """Promise: the first SKU sent for a Wildberries good keeps it across workers and restarts;
    another SKU naming the same good is ``invalid-for-channel`` (its words name both SKUs and the
    article), and WB never gets its price."""
    failing = first_ends != "delivered"
    first, second, nm_id = one_good_two_workers(db_url, engine, wb, failing)

    async def scenario() -> None:
        try:
            stage(engine, [price_row("OFF-S", 1, "900.00")])
            wanted = ("delayed",) if failing else ("delivered",)
            await cycles_until(first, lambda: (state(engine, "OFF-S") or ("",))[0] in wanted)
            stage(engine, [price_row("OFF-M", 1, "950.00")])
            await cycles_until(second, lambda: state(engine, "OFF-M") not in (None, ("new", None)))
            await cycles_until(
                second, lambda: (state(engine, "OFF-M") or ("",))[0] == "quarantined"
            )
        finally:
            await first.target.aclose()
            await second.target.aclose()

    asyncio.run(scenario())

    assert ("delivered" if not failing else "delayed") == (state(engine, "OFF-S") or ("",))[0]
    assert ("quarantined", "invalid-for-channel") == state(engine, "OFF-M")
    assert 950 not in wb.applied.get(nm_id, []), "OFF-M's price never went"
    assert 1 == wb.requests[UPLOAD], "only OFF-S's upload"


def test_two_workers_claiming_both_skus_of_a_good_at_once_send_exactly_one(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise (issue 32): two workers that claimed both SKUs of one Wildberries good at the
    same moment (each sees the other's in flight) agree on which keeps it: exactly one, the
    SKU claimed first, goes; the other is ``invalid-for-channel`` (never both quarantined,
    never both uploaded)."""
    race = BothClaimedFirst(monkeypatch)
    first, second, nm_id = one_good_two_workers(db_url, engine, wb, False)

    async def scenario() -> None:
        try:
            await race.run(
                first,
                second,
                lambda: stage(engine, [price_row("OFF-S", 1, "900.00")]),
                lambda: stage(engine, [price_row("OFF-M", 1, "950.00")]),
            )
            for worker in (first, second):
                await cycles_until(
                    worker,
                    lambda: all(
                        (state(engine, s) or ("",))[0] in ("delivered", "quarantined")
                        for s in ("OFF-S", "OFF-M")
                    ),
                )
        finally:
            await first.target.aclose()
            await second.target.aclose()

    asyncio.run(scenario())

    assert race.met, "both workers claimed their SKU before either read the other's"
    assert ("delivered", None) == state(engine, "OFF-S")
    assert ("quarantined", "invalid-for-channel") == state(engine, "OFF-M")
    assert [900] == wb.applied.get(nm_id, [])
    assert 1 == wb.requests[UPLOAD], "only OFF-S's upload"


def test_a_worker_that_read_the_holders_before_the_others_upload_never_uploads_its_sku_too(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise (contract 14, issue 32): one SKU a Wildberries good, whatever the workers'
    interleaving. Worker B claims OFF-M and reads the holders before worker A's claim of
    OFF-S is in (A's claim began earlier); A claims OFF-S, reads the holders (OFF-M only
    claimed, leased after its own: A ranks OFF-S first) and the tasks in flight (none yet);
    B stores its task and uploads; A goes on. Exactly one upload reaches WB: A finds B's
    task at its own row's write (one good at a time across workers), and OFF-S ends
    ``invalid-for-channel``."""
    race = ReadBeforeTheOthersClaim(monkeypatch, first_at=(DbWbStore, "tasks"))
    first, second, nm_id = one_good_two_workers(db_url, engine, wb, False)

    async def scenario() -> None:
        try:
            await race.run(
                first,
                second,
                lambda: stage(engine, [price_row("OFF-S", 1, "900.00")]),
                lambda: stage(engine, [price_row("OFF-M", 1, "950.00")]),
                lambda: lease_later(engine, "OFF-M"),
            )
            for worker in (first, second):
                await cycles_until(
                    worker,
                    lambda: all(
                        (state(engine, s) or ("",))[0] in ("delivered", "quarantined")
                        for s in ("OFF-S", "OFF-M")
                    ),
                )
        finally:
            await first.target.aclose()
            await second.target.aclose()

    asyncio.run(scenario())

    assert race.first_read.is_set(), "A read the holders and the tasks before B's upload"
    assert 1 == wb.requests[UPLOAD], "exactly one SKU of the good was uploaded"
    assert [950] == wb.applied.get(nm_id, [])
    assert ("delivered", None) == state(engine, "OFF-M")
    assert ("quarantined", "invalid-for-channel") == state(engine, "OFF-S")

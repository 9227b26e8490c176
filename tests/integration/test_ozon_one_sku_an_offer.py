"""One 1C SKU an Ozon offer (contract 14, docs/marketplaces.md "One item per SKU"): under
``sku_source = article`` two 1C products sharing one Артикул name one Ozon ``offer_id`` and
would overwrite each other's price there. The first SKU sent keeps the offer; the other is
``invalid-for-channel`` naming both SKUs and the article, never sent (review ozon, item 1:
both went in one request and both were "delivered"; Ozon held the second's price). Staging ->
the real worker -> the Ozon simulator over HTTP, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim
from onegood import ReadBeforeTheOthersClaim, articles, lease_later
from sqlalchemy import Engine, select
from test_ozon_end_to_end import cycles, make_worker

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.ozonsim import IMPORT_PRICES, OzonSimulator
from exchange.dev.testing import price_row, run_worker, stage
from exchange.domain.clock import FakeClock
from exchange.words import detail_words
from exchange.worker import Worker

SKUS = ("aaaa-1111", "aaaa-4444")


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def ended(engine: Engine, sku: str) -> tuple[str, str | None, str | None]:
    with transaction(engine, read_only=True) as connection:
        state, reason, error = connection.execute(
            select(deliveries.c.state, deliveries.c.reason, deliveries.c.last_error)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .where(messages.c.aggregate == sku)
        ).one()
    return state, reason, error


def test_two_skus_sharing_an_article_in_one_batch_the_first_keeps_the_offer(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Both SKUs staged at once: one item with offer_id ART-100 goes, the other SKU is
    ``invalid-for-channel`` naming both and the article; Ozon holds the first one's price."""
    articles(engine, {"aaaa-1111": "ART-100", "aaaa-4444": "ART-100"})
    worker = make_worker(db_url, engine, site, FakeClock(), tmp_path, sku_source="article")

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("aaaa-1111", 1, "1501.00"), price_row("aaaa-4444", 1, "1777.00")])
        await cycles(w)

    run_worker(worker, scenario)

    assert ("delivered", None) == ended(engine, "aaaa-1111")[:2]
    state, reason, error = ended(engine, "aaaa-4444")
    assert ("quarantined", "invalid-for-channel") == (state, reason), error
    for named in ("'aaaa-1111'", "'aaaa-4444'", "'ART-100'"):
        assert error is not None and named in error, error
    assert error is not None and "одно предложение Ozon" in detail_words(error)
    assert Decimal("1501") == site.price("ART-100")
    assert 1 == site.requests[IMPORT_PRICES]


def test_the_other_sku_of_an_article_is_refused_after_a_restart(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """The first SKU was delivered by a worker before a restart; the restarted worker (no
    memory of its own) is given the other SKU of the article: the channel's deliveries say
    who keeps the offer, and the second is never sent over the first's price."""
    articles(engine, {"aaaa-1111": "ART-100", "aaaa-4444": "ART-100"})
    clock = FakeClock()

    async def first(w: Worker) -> None:
        stage(engine, [price_row("aaaa-1111", 1, "1501.00")])
        await cycles(w)

    async def second(w: Worker) -> None:
        stage(engine, [price_row("aaaa-4444", 1, "1777.00")])
        await cycles(w)

    run_worker(make_worker(db_url, engine, site, clock, tmp_path, sku_source="article"), first)
    run_worker(make_worker(db_url, engine, site, clock, tmp_path, sku_source="article"), second)

    assert ("delivered", None) == ended(engine, "aaaa-1111")[:2]
    assert ("quarantined", "invalid-for-channel") == ended(engine, "aaaa-4444")[:2]
    assert Decimal("1501") == site.price("ART-100")
    assert 1 == site.requests[IMPORT_PRICES]


def test_a_worker_that_read_the_holders_before_the_others_mark_never_sends_its_sku_too(
    db_url: str,
    engine: Engine,
    site: OzonSimulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Promise (contract 14, issue 32): one SKU an Ozon offer, whatever the workers'
    interleaving, as on Wildberries and Yandex Market. Worker B claims aaaa-4444 and reads
    the holders before worker A's claim of aaaa-1111 is in (A's claim began earlier); A
    claims, reads (B's SKU only claimed, leased after its own: A ranks its own first); B
    marks and sends; A goes on. Exactly one SKU reaches Ozon: A finds B's mark at its own
    (``SentTimes.reserve``, one offer at a time across workers) and aaaa-1111 ends
    ``invalid-for-channel`` with the words one batch gives (both SKUs, the article)."""
    articles(engine, {"aaaa-1111": "ART-100", "aaaa-4444": "ART-100"})
    race = ReadBeforeTheOthersClaim(monkeypatch)
    clock = FakeClock()
    first = make_worker(db_url, engine, site, clock, tmp_path, sku_source="article", worker_id="a")
    second = make_worker(db_url, engine, site, clock, tmp_path, sku_source="article", worker_id="b")

    def done() -> bool:
        return all(ended(engine, s)[0] in ("delivered", "quarantined") for s in SKUS)

    async def scenario() -> None:
        try:
            await race.run(
                first,
                second,
                lambda: stage(engine, [price_row("aaaa-1111", 1, "1501.00")]),
                lambda: stage(engine, [price_row("aaaa-4444", 1, "1777.00")]),
                lambda: lease_later(engine, "aaaa-4444"),
            )
            for worker in (first, second):
                for _ in range(20):
                    if done():
                        break
                    await worker.cycle()
        finally:
            await first.target.aclose()
            await second.target.aclose()

    asyncio.run(scenario())

    assert race.first_read.is_set(), "A read the holders before B marked"
    assert 1 == site.requests[IMPORT_PRICES], "exactly one SKU of the offer was sent"
    assert Decimal("1777") == site.price("ART-100")
    assert ("delivered", None) == ended(engine, "aaaa-4444")[:2]
    state, reason, error = ended(engine, "aaaa-1111")
    assert ("quarantined", "invalid-for-channel") == (state, reason), error
    for named in ("'aaaa-1111'", "'aaaa-4444'", "'ART-100'"):
        assert error is not None and named in error, error

"""The wildberries target keeps one 1C SKU a Wildberries good, and never raises out of ``send``
for its own store (review-wb finding 1), against the Wildberries simulator over HTTP.

Under ``sku_source = article`` the sizes of one 1C product (two offers) share the Артикул: one
vendor code, one ``nmID``, which WB prices whole (research §2.1: an upload names an ``nmID`` and
one ``price``; §2.6 item 4: an ``nmID`` twice refuses the whole upload, "Duplicate item Nos.").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator

import pytest
from conformance import price
from sqlalchemy import Engine
from test_wildberries import make, nm, roomy, send, uploaded

from exchange.db.wb_store import DbWbStore
from exchange.dev.wbsim import Switches, WbSimulator
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.marketplace.articles import MemoryArticles
from exchange.targets.wildberries.store import MemoryWbStore, Task
from exchange.targets.wildberries.target import WildberriesTarget

# Two sizes of one 1C product share the article ART-1; SKU-2 is a good of its own.
ARTICLES = MemoryArticles({"OFF-S": "ART-1", "OFF-M": "ART-1", "SKU-2": "SKU-2"})


@pytest.fixture
def sim() -> Iterator[WbSimulator]:
    simulator = WbSimulator(switches=Switches(processing_delay=0.0))
    simulator.start()
    simulator.add_good("ART-1", price=1000)
    simulator.add_good("SKU-2", price=1000)
    yield roomy(simulator)
    simulator.stop()


def by_article(sim: WbSimulator, store: object, **kw: object) -> WildberriesTarget:
    return make(
        sim,
        store,
        sku_source="article",
        articles=ARTICLES,
        clock=sim.clock.datetime,
        poll_at_once=True,
        **kw,
    )


def test_two_skus_of_one_article_in_one_batch_the_first_goes_the_other_is_invalid(
    sim: WbSimulator, engine: Engine
) -> None:
    """Promise: two 1C SKUs naming one nmID never crash the batch (the store's two rows for one
    nmID raised UniqueViolation, and the batch was claimed and failed forever): the first SKU
    keeps the good and is delivered, the other is ``invalid-for-channel`` naming both SKUs and
    the article, and the unrelated good of the batch goes (SQLite and PostgreSQL)."""
    store = DbWbStore(engine, "wb")
    found = send(
        by_article(sim, store),
        price("OFF-S", 1, "900.00"),
        price("OFF-M", 1, "950.00"),
        price("SKU-2", 1, "700.00"),
    )

    verdicts = [c.verdict for c in found]
    assert [Verdict.DELIVERED, Verdict.TERMINAL, Verdict.DELIVERED] == verdicts, found
    assert Reason.INVALID_FOR_CHANNEL == found[1].reason
    for named in ("'OFF-S'", "'OFF-M'", "'ART-1'"):
        assert named in found[1].detail, found[1].detail
    assert [[(nm(sim, "ART-1"), 900, None), (nm(sim, "SKU-2"), 700, None)]] == uploaded(sim)
    assert 900 == sim.goods[nm(sim, "ART-1")].price
    assert {} == store.tasks([nm(sim, "ART-1"), nm(sim, "SKU-2")])


def test_a_later_batch_of_the_other_sku_of_an_article_is_invalid(sim: WbSimulator) -> None:
    """Promise: the first SKU sent for a vendor code keeps it across batches of one worker
    (batches go at once, ``batches_at_once``): the other SKU's later batch is never uploaded."""
    t = by_article(sim, MemoryWbStore())

    async def scenario() -> list[Classification]:
        try:
            first = await t.send([price("OFF-S", 1, "900.00")])
            second = await t.send([price("OFF-M", 1, "950.00")])
            again = await t.send([price("OFF-S", 2, "920.00")])
            return first + second + again
        finally:
            await t.aclose()

    found = asyncio.run(scenario())

    assert [Verdict.DELIVERED, Verdict.TERMINAL, Verdict.DELIVERED] == [c.verdict for c in found]
    assert "'OFF-S' and 'OFF-M'" in found[1].detail
    assert [900, 920] == sim.applied[nm(sim, "ART-1")]


class Holders:
    """The database's word (``DbSentTimes.offer_holders``): another worker already gave the
    article ART-1 to SKU OFF-S."""

    def __init__(self, held: dict[str, list[str]]) -> None:
        self.held = held
        self.asked: list[tuple[list[str], bool]] = []

    def offer_holders(
        self,
        offers: Iterable[str],
        prefixes: Iterable[str],
        leaving_out: Iterable[str] = (),
        *,
        by_article: bool = False,
    ) -> dict[str, list[str]]:
        wanted = list(offers)
        self.asked.append((wanted, by_article))
        return {o: self.held[o] for o in wanted if o in self.held}


def test_another_workers_sku_on_the_article_makes_this_one_invalid(sim: WbSimulator) -> None:
    """Promise: the rule holds across workers and restarts: a worker whose own memory is empty
    asks the database which SKUs the channel gave the article, and OFF-M, whose article another
    worker's OFF-S holds, is ``invalid-for-channel`` and never uploaded."""
    holders = Holders({"ART-1": ["OFF-S"]})
    (found,) = send(by_article(sim, MemoryWbStore(), holders=holders), price("OFF-M", 1, "950.00"))

    assert Reason.INVALID_FOR_CHANNEL == found.reason, found
    assert "'OFF-S' and 'OFF-M'" in found.detail and "'ART-1'" in found.detail
    assert [] == uploaded(sim)
    assert [(["ART-1"], True)] == holders.asked


class FailingStore(MemoryWbStore):
    def put_tasks(self, tasks: Iterable[Task]) -> None:
        raise RuntimeError("the database is gone")


def test_a_store_failure_is_every_goods_answer_never_raised(sim: WbSimulator) -> None:
    """Promise: a failure of the service's own store never escapes ``send`` (a batch whose send
    raises stays claimed and fails forever, nothing quarantined): each good is tried again,
    charged, and nothing was uploaded without its row."""
    found = send(make(sim, FailingStore()), price("SKU-2", 1, "700.00"))

    assert [Verdict.TEMPORARY] == [c.verdict for c in found], found
    assert "RuntimeError" in found[0].detail
    assert [] == uploaded(sim)

"""docs/marketplaces.ru.md, «Задача, которая может примениться поздно»: an upload whose answer
was lost holds its good until WB shows that price. Where WB shows it:

- in its price quarantine (research §2.4: a price a third or less of the old one is held
  there, listed at ``/api/v2/quarantine/goods`` with its ``newPrice``, and the catalogue keeps
  the old price): the upload has landed, into the quarantine. A newer price goes at once (as
  over a withheld price: research §2.4, another price sent releases the quarantine), and the
  lost version's history says it landed there, withheld, and what replaced it (review
  wblost34 finding 1: the newer price waited an hour for a catalogue that never shows it, and
  nothing told the seller that WB's cabinet held the lost price); the lost version's own
  attempt finds it withheld;
- in its catalogue, before a newer price replaced it: the lost version's history says buyers
  saw it (review wblost34 finding 2: it read "superseded" alone, as if it never reached WB).

The real worker, the Wildberries simulator over HTTP, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from marketsims import wb_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, history, messages
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.dev.wbsim import WbSimulator
from exchange.targets.wildberries import target as wb_target
from exchange.words import detail_words
from exchange.worker import Worker

OLD = 1000


class AnswerLost(httpx.AsyncBaseTransport):
    """The first upload reaches WB, which makes its task, but its answer never comes back
    (``ReadTimeout``: it came after the client's timeout); meanwhile ``meanwhile`` runs (1C's
    next price comes in). Then WB answers as usual."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lost = False
        self.meanwhile = meanwhile

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and not self.lost:
            self.lost = True
            await response.aread()
            await response.aclose()
            await asyncio.to_thread(self.meanwhile)
            raise httpx.ReadTimeout("timed out", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def wb() -> Iterator[WbSimulator]:
    with wb_sim([("SKU-1", OLD)], processing_delay=0.3) as sim:
        yield sim


def story(engine: Engine) -> list[tuple[int, str, str]]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.version, history.c.event, history.c.detail)
            .join(messages, messages.c.id == history.c.message_pk)
            .order_by(history.c.id)
        )
        return [(v, e, d or "") for v, e, d in rows]


def states(engine: Engine) -> dict[int, str]:
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(messages.c.version, deliveries.c.state).join(
                messages, messages.c.id == deliveries.c.message_pk
            )
        )
        return {v: s for v, s in rows}


def lost_then_newer(
    engine: Engine, db_url: str, wb: WbSimulator, lost: int, newer: int | None
) -> list[tuple[int, str, str]]:
    """SKU-1 at ``lost`` (its upload's answer lost), then, once that attempt has ended, 1C's
    ``newer`` (None: none): the worker runs until the last version settles, 20 s at most."""
    settings = fast_settings(
        db_url, None, target="wildberries", wb_api_url=wb.url, wb_token=wb.token()
    )

    def meanwhile() -> None:
        if newer is not None:
            stage(engine, [price_row("SKU-1", 2, f"{newer}.00")])

    worker: Worker = bootstrap.worker(
        settings, engine, transport=AnswerLost(meanwhile), rng=random.Random(3)
    )
    stage(engine, [price_row("SKU-1", 1, f"{lost}.00")])
    last = 1 if newer is None else 2

    async def scenario(w: Worker) -> None:
        ends = time.monotonic() + 20
        while time.monotonic() < ends:
            await w.cycle()
            if states(engine).get(last) in ("delivered", "withheld"):
                return
            await asyncio.sleep(0.05)

    run_worker(worker, scenario)
    return story(engine)


def test_a_newer_price_goes_at_once_over_a_lost_upload_wb_holds_in_its_price_quarantine(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wb_target, "REPLAY_WAIT", 0.5)  # a read of the catalogue a second
    good = wb.by_vendor_code("SKU-1")
    assert good is not None

    seen = lost_then_newer(engine, db_url, wb, 300, 1200)

    assert "delivered" == states(engine).get(2), seen
    assert 1200 == wb.goods[good.nm_id].price
    assert good.nm_id not in wb.quarantine, "the newer price released WB's quarantine"
    # The newer price's history says why it went.
    went = [d for v, _, d in seen if v == 2 and "price quarantine listed" in d]
    assert went, [d for v, _, d in seen if v == 2]
    # The lost version's history says it landed in WB's price quarantine and what replaced it.
    found = [d for v, e, d in seen if v == 1 and e == "lost-send-found"]
    assert found, [(e, d) for v, e, d in seen if v == 1]
    assert (
        f"Wildberries' price quarantine listed 300.00 for nmID {good.nm_id}: the upload of "
        "300.00 whose answer was lost had landed there, withheld" in found[0]
    ), found
    assert "superseded by" in found[0], found
    said = detail_words(found[0])
    assert "карантин" in said and "потерян" in said, said


def test_a_lost_upload_wb_holds_in_its_price_quarantine_is_withheld(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wb_target, "REPLAY_WAIT", 0.5)
    good = wb.by_vendor_code("SKU-1")
    assert good is not None

    seen = lost_then_newer(engine, db_url, wb, 300, None)

    assert "withheld" == states(engine).get(1), seen
    held = [d for v, e, d in seen if v == 1 and e == "withheld"]
    assert "price quarantine lists 300.00" in held[0], held
    assert "Карантин цен" in detail_words(held[0])


def test_a_lost_upload_buyers_saw_says_so_when_a_newer_price_replaces_it(
    db_url: str, engine: Engine, wb: WbSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wb_target, "REPLAY_WAIT", 0.5)
    good = wb.by_vendor_code("SKU-1")
    assert good is not None

    seen = lost_then_newer(engine, db_url, wb, 1500, 1600)

    assert "delivered" == states(engine).get(2), seen
    assert [1500, 1600] == wb.applied[good.nm_id]
    found = [d for v, e, d in seen if v == 1 and e == "lost-send-found"]
    assert found, [(e, d) for v, e, d in seen if v == 1]
    assert (
        f"Wildberries' catalogue showed 1500 for nmID {good.nm_id}: the upload of 1500.00 "
        "whose answer was lost had landed, buyers saw it" in found[0]
    ), found
    said = detail_words(found[0])
    assert "покупател" in said, said

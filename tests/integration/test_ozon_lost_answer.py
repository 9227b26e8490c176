"""Ozon: after a send whose answer was lost, the product's next send waits for Ozon to show it.

Research §1.5: "Two racing updates: no documented ordering guarantee"; §1.4: the import answers
synchronously, but a request the service gave up on (a timeout, a connection cut) may still be
applied. Contract 13: never a version at or below the one delivered over a newer one; §1.3:
identical requests may get the account restricted. So the product's next send, the same price
or a newer one, reads Ozon's prices (``/v5/product/info/prices``) until Ozon shows the lost
one (then that version is delivered without a request) or the bound passes
(docs/marketplaces.md, "A send whose answer was lost")."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from marketsims import ozon_sim
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.dev.ozonsim import IMPORT_PRICES, INFO_PRICES, OzonSimulator
from exchange.dev.testing import drain, fast_settings, price_row, run_worker, stage
from exchange.domain.clock import FakeClock
from exchange.domain.verdicts import Verdict
from exchange.targets.marketplace import late
from exchange.targets.ozon.target import LOST_HOLD
from exchange.words import detail_words
from exchange.worker import Worker

LANDS_WITHIN = 20.0  # real seconds a stalled import may take to land on a loaded machine


@pytest.fixture
def site() -> Iterator[OzonSimulator]:
    with ozon_sim(time_scale=0) as simulator:
        yield simulator


def _worker(
    db_url: str, engine: Engine, site: OzonSimulator, clock: FakeClock, tmp: Path
) -> Worker:
    key = tmp / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=site.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price"},
        max_attempts=20,
        breaker_threshold=1000,
        http_timeout=0.3,
    )
    return bootstrap.worker(settings, engine, clock=clock, rng=random.Random(3))


def _state(engine: Engine, version: int) -> tuple[str, str | None]:
    with transaction(engine, read_only=True) as connection:
        state, detail = connection.execute(
            select(deliveries.c.state, deliveries.c.last_error)
            .join(messages, deliveries.c.message_pk == messages.c.id)
            .where(messages.c.aggregate == "SKU-1", messages.c.version == version)
        ).one()
    return state, detail


async def _cycles(worker: Worker, clock: FakeClock, count: int, step: float) -> None:
    for _ in range(count):
        await worker.cycle()
        clock.advance(step)
        await asyncio.sleep(0.01)


async def _landed(site: OzonSimulator, landed: Callable[[], bool]) -> None:
    """Until the stalled import has landed (``landed``), at most LANDS_WITHIN real seconds:
    Ozon sleeps ``stall`` on it, then applies it, and a loaded machine stretches both (a full
    run once found the price unchanged 0.5 s after the stall, the margin it had then)."""
    started = time.monotonic()
    while not landed():
        assert time.monotonic() - started < LANDS_WITHIN, "the stalled import never landed"
        await asyncio.sleep(0.05)


def test_a_send_ozon_stalled_on_never_lands_over_the_newer_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozonlate finding 1: Ozon stalls on the import of 1100 (it sleeps, then applies
    it); the request times out. Ozon answers at once again, and 1C's 1200 comes. The old code
    sent 1100 again and then 1200, both answered, and then Ozon applied the stalled 1100:
    Ozon ended on 1100 while 1200 was "delivered". Now nothing of the product goes until
    Ozon shows 1100; then 1200 goes, and Ozon ends on 1C's newest."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)
    stall = 1.5  # real seconds Ozon sleeps on the request before applying it

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "1000.00")])
        await drain(w)
        assert site.price("SKU-1") == Decimal("1000")
        site.faults.delay = stall
        stage(engine, [price_row("SKU-1", 2, "1100.00")])
        await w.cycle()  # ReadTimeout after 0.3 s: no answer, Ozon still on it
        site.faults.delay = 0.0
        await _cycles(w, clock, 4, 2.0)  # v2 due again
        stage(engine, [price_row("SKU-1", 3, "1200.00")])
        await _cycles(w, clock, 4, 2.0)
        await _landed(site, lambda: site.price("SKU-1") in (Decimal("1100"), Decimal("1200")))
        await _cycles(w, clock, 12, 10.0)  # the waits' reads (every 30 s) see 1100
        # Shown, 1100 may still be another sender's: 1200 waits out the bound (review
        # ozlost38 H4), then goes.
        assert site.price("SKU-1") == Decimal("1100"), site.updates("SKU-1")
        clock.advance(LOST_HOLD)
        await _cycles(w, clock, 2, 1.0)
        assert site.price("SKU-1") == Decimal("1200"), site.updates("SKU-1")
        assert _state(engine, 3)[0] == "delivered"
        updates = [u["price"] for u in site.updates("SKU-1")]
        assert updates[-2:] == [Decimal("1100"), Decimal("1200")], updates
        # The lost send has landed, once: 1C's next price goes at once, never waiting for
        # Ozon to show 1100 again.
        stage(engine, [price_row("SKU-1", 4, "1300.00")])
        await _cycles(w, clock, 2, 1.0)

    run_worker(worker, scenario)

    assert _state(engine, 4)[0] == "delivered"
    assert site.price("SKU-1") == Decimal("1300")


def test_a_lost_send_shown_by_another_senders_price_still_holds_the_newer_one(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozlost38 H4: 750 delivered; another program sets 800 in Ozon; 1C's 800 goes and
    Ozon stalls on it (its answer lost, applied later). The old code read Ozon showing 800,
    took it for the lost send landed and let 1C's 900 go at once; the stalled 800 landed after
    it: Ozon ended on 800 while 900 was "delivered". Seeing the lost prices proves nothing of
    the request still on its way: the newer price waits until LOST_HOLD from the lost send,
    and Ozon ends on 1C's newest."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)
    stall = 2.0  # real seconds Ozon sleeps on the request before applying it

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "750.00")])
        await drain(w)
        site.promote("SKU-1", Decimal("800"))  # another program's price
        before = len(site.charged("SKU-1"))  # the stalled 800 changes no price: counted
        site.faults.delay = stall
        stage(engine, [price_row("SKU-1", 2, "800.00")])
        await w.cycle()  # ReadTimeout after 0.3 s: no answer, Ozon still on it
        site.faults.delay = 0.0
        stage(engine, [price_row("SKU-1", 3, "900.00")])
        await _cycles(w, clock, 4, 2.0)
        early.append(_state(engine, 3))
        await _landed(site, lambda: len(site.charged("SKU-1")) > before)
        await _cycles(w, clock, 4, 10.0)
        clock.advance(LOST_HOLD)
        await _cycles(w, clock, 4, 10.0)

    early: list[tuple[str, str | None]] = []  # 900 while the lost 800 may land
    run_worker(worker, scenario)

    assert site.price("SKU-1") == Decimal("900"), site.updates("SKU-1")
    assert _state(engine, 3)[0] == "delivered"
    ((state, detail),) = early
    assert state == "delayed", (state, detail)
    assert "may still apply after a newer one" in (detail or ""), detail


def test_a_dropped_answer_leads_to_one_import_and_the_price_delivered_from_the_read(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review ozonlate finding 2: Ozon applies 1100 and cuts the connection, for a while. The
    old code sent the identical import again and again (ten in 40 s, each "no answer, not
    charged", each counted by Ozon against the product's 10 an hour, §1.3 warns about
    identical requests). Now one import; the next attempts read Ozon's prices, and once Ozon
    answers, 1100 is delivered from the read, without another import."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "1000.00")])
        await drain(w)
        before = site.requests[IMPORT_PRICES]
        site.faults.drop_after = True  # applies, then cuts the connection: reads too
        stage(engine, [price_row("SKU-1", 2, "1100.00")])
        await _cycles(w, clock, 10, 4.0)
        assert site.requests[IMPORT_PRICES] - before == 1
        site.faults.drop_after = False
        await _cycles(w, clock, 6, 10.0)
        assert site.requests[IMPORT_PRICES] - before == 1, "delivered from the read"

    run_worker(worker, scenario)

    state, _ = _state(engine, 2)
    assert state == "delivered"
    assert site.price("SKU-1") == Decimal("1100")
    assert site.requests[INFO_PRICES] >= 1


def test_a_lost_send_ozon_never_applied_goes_again_once_its_wait_is_over(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """The bound (LOST_HOLD from the send): a lost send Ozon never shows (here: Ozon's own
    pricing strategy moved the price at once, research §1.6.5) is taken for never applied once
    the bound has passed, and the price goes again, once."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "1000.00")])
        await drain(w)
        before = site.requests[IMPORT_PRICES]
        site.faults.drop_after = True
        stage(engine, [price_row("SKU-1", 2, "1100.00")])
        await w.cycle()
        site.faults.drop_after = False
        site.promote("SKU-1", Decimal("900"))
        await _cycles(w, clock, 5, 10.0)
        assert site.requests[IMPORT_PRICES] - before == 1
        assert _state(engine, 2)[0] == "delayed"
        clock.advance(LOST_HOLD)
        await _cycles(w, clock, 4, 10.0)
        assert site.requests[IMPORT_PRICES] - before == 2

    run_worker(worker, scenario)

    assert _state(engine, 2)[0] == "delivered"
    assert site.price("SKU-1") == Decimal("1100")


@pytest.mark.parametrize("status", [504, 500])
def test_a_5xx_import_ozon_applies_later_never_lands_over_the_newer_price(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path, status: int
) -> None:
    """Review ozon34 finding 1: a gateway answers 504 (its page) at once, or Ozon 500
    "Internal error", and the import of 500 reaches Ozon later (a 5xx says nothing of the
    outcome: an HTTP fact; §1.5: no order between racing updates). The old code retried 500
    and sent 1C's 600 at once; then the 5xx'd 500 landed: Ozon held 500 while 600 was
    "delivered". Now a 5xx is a lost answer: nothing of the product goes until Ozon shows
    500 (or the hold passes); then 600 goes, and Ozon ends on 1C's newest."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)
    later = 3.0  # real seconds until the gateway hands the request on to Ozon

    async def scenario(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "400.00")])
        await drain(w)
        before = site.requests[IMPORT_PRICES]
        site.faults.late_status, site.faults.late_after = status, later
        stage(engine, [price_row("SKU-1", 2, "500.00")])
        started = time.monotonic()
        await w.cycle()  # the 5xx at once; Ozon has not seen the request yet
        site.faults.late_status = None
        assert site.requests[IMPORT_PRICES] - before == 1
        assert _state(engine, 2)[0] == "delayed"
        stage(engine, [price_row("SKU-1", 3, "600.00")])
        await _cycles(w, clock, 6, 2.0)
        if time.monotonic() - started < later:
            assert site.requests[IMPORT_PRICES] - before == 1, "nothing sent while it may land"
        # The gateway hands the request on to Ozon ``later`` seconds after it came (a timer: on
        # a loaded machine, later still): wait for Ozon to apply it, not for a guess of when
        # (the full CI pre-check: the cycles ran out before Ozon showed 500, and 600 waited)
        deadline = time.monotonic() + later + 15.0
        while site.price("SKU-1") != Decimal("500") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await _cycles(w, clock, 12, 10.0)  # the waits' reads (every 30 s) see 500
        clock.advance(LOST_HOLD)  # shown, 500 may be another sender's: 600 waits the bound
        await _cycles(w, clock, 2, 1.0)

    run_worker(worker, scenario)

    assert _state(engine, 3)[0] == "delivered"
    assert site.price("SKU-1") == Decimal("600"), site.updates("SKU-1")
    assert [u["price"] for u in site.updates("SKU-1")][-2:] == [Decimal("500"), Decimal("600")]


def test_the_wait_for_a_lost_send_and_its_end_are_said_in_russian() -> None:
    """The words a person reads in ``find`` and the workbench's history (Russian first)."""
    lost = late.LostSend(1767225600.0, {"price": Decimal("1100.00")})
    waits = late.waits("Ozon", lost, "Ozon shows price 1000", 1767225630.0, LOST_HOLD, 30.0)
    assert waits.verdict is Verdict.AWAITING and waits.again_in == 30.0
    assert detail_words(waits.detail) == (
        "Ozon ещё может применить отправку price 1100.00 от 2026-01-01 00:00:00 UTC, ответ на "
        "которую потерян; Ozon показывает price 1000: товар ждёт, пока Ozon её не покажет, но "
        "не дольше чем до 2026-01-01 00:10:00 UTC, попытка не засчитана"
    )
    unread = late.waits(
        "Ozon", lost, "its prices could not be read (Ozon: HTTP 500)", 1767225630.0, 600, 30
    )
    assert "его цены прочитать не удалось (Ozon: HTTP 500)" in detail_words(unread.detail)
    assert detail_words(
        "Ozon shows price 1100.00: the send whose answer was lost has landed; not sent again"
    ) == (
        "Ozon показывает price 1100.00: отправка, ответ на которую был потерян, применилась; "
        "повторно не отправляется"
    )


def test_another_worker_waits_for_the_lost_send_as_well(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """The lost send is kept in the database (its deliveries' receipts), not in one worker's
    memory: a worker started after it (a restart, another ``run``) waits for it too."""
    clock = FakeClock()
    first = _worker(db_url, engine, site, clock, tmp_path)

    async def lose(w: Worker) -> None:
        stage(engine, [price_row("SKU-1", 1, "1000.00")])
        await drain(w)
        site.faults.delay = 1.0
        stage(engine, [price_row("SKU-1", 2, "1100.00")])
        await w.cycle()  # times out: Ozon is still on it
        site.faults.delay = 0.0

    run_worker(first, lose)
    second = _worker(db_url, engine, site, clock, tmp_path)
    before = site.requests[IMPORT_PRICES]

    async def wait(w: Worker) -> None:
        await _cycles(w, clock, 3, 2.0)
        assert site.requests[IMPORT_PRICES] == before, "nothing sent while it may land"
        await asyncio.sleep(1.2)  # Ozon applies the stalled 1100
        await _cycles(w, clock, 6, 10.0)

    run_worker(second, wait)

    assert _state(engine, 2)[0] == "delivered"
    assert site.requests[IMPORT_PRICES] == before, "delivered from the read"
    assert site.price("SKU-1") == Decimal("1100")


def test_a_lost_first_send_waits_on_no_price_yet_never_on_ozons_price_0(
    db_url: str, engine: Engine, site: OzonSimulator, tmp_path: Path
) -> None:
    """Review words34 item 2: a product never priced reads price "0" on Ozon (§1.4's
    read-back; the simulator's too), and Ozon holds no price 0 the service gave it (the channel
    refuses a zero price). While the first send of 1000, whose answer was lost, may still land,
    the wait says "Ozon shows no price yet" («у Ozon цены ещё нет»), never "price 0"; and the 0
    does not show the lost 1000: the price waits, then is delivered once Ozon shows 1000."""
    clock = FakeClock()
    worker = _worker(db_url, engine, site, clock, tmp_path)
    site.add("SKU-1")  # in the seller's catalogue, never priced
    stall = 5.0  # real seconds Ozon sleeps on the request before applying it

    async def scenario(w: Worker) -> None:
        before = site.requests[IMPORT_PRICES]
        site.faults.delay = stall
        stage(engine, [price_row("SKU-1", 1, "1000.00")])
        started = time.monotonic()
        await w.cycle()  # ReadTimeout after 0.3 s: Ozon still on it
        site.faults.delay = 0.0
        await _cycles(w, clock, 4, 2.0)  # due again: reads Ozon's "0"
        assert time.monotonic() - started < stall, "read before Ozon applied it"
        state, detail = _state(engine, 1)
        assert state == "delayed", detail
        assert detail is not None and "Ozon shows no price yet" in detail, detail
        assert "price 0" not in detail and "price none" not in detail, detail
        assert "у Ozon цены ещё нет" in detail_words(detail), detail_words(detail)
        # Ozon applies the stalled request (its sleep began when the request reached it,
        # later than ``started`` on a loaded machine): wait for Ozon, not for a guess of it
        deadline = time.monotonic() + stall + 10.0
        while site.price("SKU-1") != Decimal("1000") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await _cycles(w, clock, 6, 10.0)
        assert site.requests[IMPORT_PRICES] - before == 1, "delivered from the read"

    run_worker(worker, scenario)

    assert _state(engine, 1)[0] == "delivered", _state(engine, 1)
    assert site.price("SKU-1") == Decimal("1000")


def test_a_newer_price_held_while_the_lost_prices_are_shown_is_said_in_russian() -> None:
    """Review ozlost38 H4's wait: true words (the shown prices may be another sender's, the
    lost send may still apply), Russian first."""
    lost = late.LostSend(1767225600.0, {"price": Decimal("800.00")})
    held = late.holds("Ozon", lost, 1767225630.0, LOST_HOLD)
    assert held.verdict is Verdict.AWAITING and held.again_in == 570.0
    assert held.error_class == late.LOST_SEND
    assert detail_words(held.detail) == (
        "Ozon показывает price 800.00 — цены отправки от 2026-01-01 00:00:00 UTC, ответ на "
        "которую потерян; эта отправка ещё может примениться после более новой: товар ждёт до "
        "2026-01-01 00:10:00 UTC, попытка не засчитана"
    )

"""Review 32's Yandex Market findings, a worker against the simulator on SQLite and PostgreSQL:
a dependent price refused before sending goes as none, never as the delivered one 1C replaced
(review 32o A; Ozon shares the item), a price Yandex accepted but never showed is sent again,
never read back for good, and a read-only Api-Key is told in Yandex Market's own words."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from marketsims import ym_settings
from sqlalchemy import Engine, select
from ym_pair import row, states

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.simclock import SimClock
from exchange.dev.testing import fast_settings, one_channel_messages, run_worker, stage
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.worker import Worker

messages = one_channel_messages()
WAITING = ("new", "delayed", "in_progress")


@pytest.fixture
def ym() -> Iterator[YmSimulator]:
    # A minute lasts a second: Yandex applies an accepted price half a real second later.
    simulator = YmSimulator(
        "ym-key-1234", 1001, clock=SimClock(60), switches=YmSwitches(apply_delay=30)
    )
    simulator.start()
    yield simulator
    simulator.stop()


def settings_for(db_url: str, ym: YmSimulator, tmp_path: Path, **more: str) -> Any:
    return ym_settings(
        db_url, ym, tmp_path, ym_price_types={"retail": "value", "old": "discountBase"}, **more
    )


async def until_settled(worker: Worker, engine: Engine, seconds: float = 8.0) -> None:
    loop = asyncio.get_running_loop()
    ends = loop.time() + seconds
    while loop.time() < ends:
        await worker.cycle()
        if not any(s in WAITING for s, _ in states(engine).values()):
            return
        await asyncio.sleep(0.05)


def test_a_price_refused_beside_a_new_one_leaves_the_delivered_discount_in_the_update(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """A delivered discount base (1600); one take-in then brings a discount base Yandex cannot
    take (kopecks: refused before sending, ``invalid-for-channel``) and a new price. 1C
    replaced 1600, so the update carries the price without a discount base (Yandex drops a
    discount an update leaves out, research §3.1, §3.6.2), never beside the replaced 1600, a
    discount 1C no longer gives (review 32o A; as the pair rule's split and a later take-in
    do). Changed from review 32's reading (the delivered one carried), which the same SKU's
    next price then contradicted. (A discount base of 0 ends it too:
    test_a_discount_base_of_0_ends_the_discount.)"""
    settings = settings_for(db_url, ym, tmp_path, ym_apply_timeout="4")
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-0", "retail", 1, "1500"), row("Y-0", "old", 1, "1600")])
        await until_settled(w, engine)
        stage(engine, [row("Y-0", "old", 2, "1600.5"), row("Y-0", "retail", 2, "1390")])
        await until_settled(w, engine)

    run_worker(worker, scenario)
    found = states(engine)
    assert ("delivered", None) == found[("Y-0/retail", 2)]
    assert ("quarantined", "invalid-for-channel") == found[("Y-0/old", 2)]
    assert ("delivered", None) == found[("Y-0/old", 1)]
    live = ym.live("Y-0")
    assert live is not None and Decimal("1390") == live.value, live
    assert not live.discount_base, "the replaced discount base never went with the new price"


def test_a_discount_base_of_0_ends_the_discount(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Research §3.1 (``discountBase`` only "если предоставляете скидку") and §3.6.2 (an
    update without it removes it): 1C's old price cleared to 0 beside a new price is no
    discount. Both are delivered and Yandex shows the new price with nothing struck through
    (review ymfix finding 3: it was invalid-for-channel and Yandex kept the discount)."""
    settings = settings_for(db_url, ym, tmp_path, ym_apply_timeout="4")
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-0", "retail", 1, "1500"), row("Y-0", "old", 1, "1600")])
        await until_settled(w, engine)
        stage(engine, [row("Y-0", "old", 2, "0"), row("Y-0", "retail", 2, "1600")])
        await until_settled(w, engine)

    run_worker(worker, scenario)
    found = states(engine)
    assert ("delivered", None) == found[("Y-0/retail", 2)]
    assert ("delivered", None) == found[("Y-0/old", 2)]
    live = ym.live("Y-0")
    assert live is not None and (Decimal("1600"), None) == (live.value, live.discount_base)


def test_a_price_never_shown_is_sent_again_and_never_opens_the_breaker(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Yandex accepts the price but never shows it (and a read-back without offerIds would be
    refused, as review 32's fake refused it): after ym_apply_timeout the price is sent again,
    charged; the breaker stays closed, as Yandex answered every request well (review 32
    finding 7: it was read back every few tenths of a second, released uncharged, for good)."""
    ym.switches.apply_delay = 100_000
    ym.switches.read_without_ids = "refuse"
    settings = settings_for(
        db_url, ym, tmp_path, ym_apply_timeout="0.5", max_attempts="10", breaker_threshold="2"
    )
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    opened: list[bool] = []

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Z-3", "retail", 1, "1210")])
        loop = asyncio.get_running_loop()
        ends = loop.time() + 6
        while loop.time() < ends and ym.requests["offer-prices/updates"] < 2:
            await w.cycle()
            opened.append(w.loop.breaker.is_open())
            await asyncio.sleep(0.05)

    run_worker(worker, scenario)
    assert ym.requests["offer-prices/updates"] >= 2, "not applied in time: sent again"
    assert not any(opened), "an offer late is never the cabinet down"
    (state, _) = states(engine)[("Z-3/retail", 1)]
    assert state in WAITING


def test_a_read_only_key_is_told_where_yandex_market_sets_its_access_once_in_each_language(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """A read-only Api-Key (research §3.2: 403 on the updates, reads accepted): the pause says
    where the Yandex Market cabinet sets the key's access, never WooCommerce's or Bitrix's
    settings, says "read but not write" once, and the Russian words hold no English sentence
    of the service's own (review 32 finding 5)."""
    from exchange.domain.pause import PauseCause
    from exchange.ops.attention import pause_words

    ym.scope = "pricing:read-only"
    settings = settings_for(db_url, ym, tmp_path, ym_apply_timeout="4")
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))
    stage(engine, [row("SKU-1", "retail", 1, "100")])

    async def scenario(w: Worker) -> None:
        for _ in range(20):
            await w.cycle()
            if w.loop.pause_cause is not None and w.loop.write_refused:
                return
            await asyncio.sleep(0.02)

    run_worker(worker, scenario)
    assert PauseCause.YM_READ_ONLY_KEY is worker.loop.pause_cause
    note = worker.loop.paused_reason or ""
    ru, en = (pause_words(PauseCause.YM_READ_ONLY_KEY.value, note, lang) for lang in ("ru", "en"))
    assert "API и модули" in ru and "APIs and modules" in en
    for said in (ru, en):
        assert not any(w in said for w in ("WooCommerce", "Bitrix", "Битрикс")), said
    assert 0 == en.count("read but not write") and 1 == en.count("for reading but not"), en
    yandex = "FORBIDDEN Token does not have any of the scopes to access the API method"
    ours = ru.replace(yandex, "")  # Yandex's own words are quoted as they are
    assert "read" not in ours and "Api-Key's" not in ours, ru


class _Bodies(httpx.AsyncBaseTransport):
    """Every request's JSON body, as sent over real HTTP."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[tuple[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.sent.append((request.url.path, json.loads(body or b"{}")))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_ozon_shares_the_item_a_refused_old_price_never_takes_the_delivered_one_out(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """The same shared item (exchange/targets/marketplace/items.py) for Ozon: an old price in
    another currency (refused before sending) beside a new price; 1C replaced the delivered
    1200, so the import carries old_price "0" (Ozon's none, research §1.6.3), never the
    replaced 1200 beside 1100 (review 32o A)."""
    from exchange.dev.ozonsim import OzonSimulator
    from exchange.dev.testing import drain
    from exchange.domain.clock import FakeClock

    site = OzonSimulator("836741", "ozon-key", time_scale=0)
    site.start()
    key = tmp_path / "ozon.key"
    key.write_text("ozon-key", encoding="utf-8")
    settings = fast_settings(
        db_url,
        None,
        target="ozon",
        ozon_api_url=site.url,
        ozon_client_id="836741",
        ozon_api_key_file=str(key),
        ozon_price_types={"retail": "price", "old": "old_price"},
    )
    clock = FakeClock()
    bodies = _Bodies()
    worker = bootstrap.worker(settings, engine, clock=clock, transport=bodies, rng=random.Random(3))
    refused = row("SKU-1", "old", 2, "1300.00")
    refused["payload"] = refused["payload"].replace('"RUB"', '"USD"')  # type: ignore[union-attr]

    async def scenario(w: Worker) -> None:
        stage(engine, [row("SKU-1", "retail", 1, "1000.00"), row("SKU-1", "old", 1, "1200.00")])
        await drain(w)
        clock.advance(60)
        stage(engine, [refused, row("SKU-1", "retail", 2, "1100.00")])
        await drain(w)

    try:
        run_worker(worker, scenario)
    finally:
        site.stop()
    imports = [b["prices"] for p, b in bodies.sent if p.endswith("/v1/product/import/prices")]
    assert 2 == len(imports), imports
    [item] = imports[1]
    assert ("1100.00", "0") == (item["price"], item.get("old_price")), item
    assert ("quarantined", "invalid-for-channel") == states(engine)[("SKU-1/old", 2)]


def test_a_value_waiting_for_1cs_next_package_goes_with_its_discount_base_in_one_update(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path
) -> None:
    """Review 32d on Yandex Market (the shared item, exchange/targets/marketplace/items.py):
    the offer shows 1000 with discountBase 1200. 1C's first package sets value 1500, which
    beside 1200 breaks Yandex's rule (discountBase above value, §3.1): it waits, not charged,
    for 1C's next package, which sets discountBase 1800. One update carries 1500/1800 and both
    deliveries end delivered: the offer never goes live at 1000 beside 1800, a discount 1C
    never gave."""
    settings = settings_for(db_url, ym, tmp_path, ym_apply_timeout="4")
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-1", "retail", 1, "1000"), row("Y-1", "old", 1, "1200")])
        await until_settled(w, engine)
        stage(engine, [row("Y-1", "retail", 2, "1500")])
        for _ in range(20):
            await w.cycle()
            if states(engine).get(("Y-1/retail", 2), ("",))[0] == "delayed":
                break
        assert ("delayed", None) == states(engine)[("Y-1/retail", 2)], "waits, not refused"
        stage(engine, [row("Y-1", "old", 2, "1800")])
        await until_settled(w, engine)

    run_worker(worker, scenario)
    found = states(engine)
    assert ("delivered", None) == found[("Y-1/retail", 2)]
    assert ("delivered", None) == found[("Y-1/old", 2)]
    went = [(p.value, p.discount_base) for p in ym.applied("Y-1")]
    assert [(Decimal("1000"), Decimal("1200")), (Decimal("1500"), Decimal("1800"))] == went


def test_a_new_discount_base_waits_for_the_persons_decision_on_the_quarantined_value(
    db_url: str, engine: Engine, ym: YmSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review ozonpair, item 1, on Yandex Market (research §3.1: a discount of 5-99 %): 1500
    with the discount base 1600 is live; 1C's value 1590 alone beside 1600 is no discount
    Yandex takes, and no discount base comes within the grace, so it is quarantined for the
    person. 1C's discount base 2000 that follows waits for that decision (never 1500 with
    2000, a pair 1C never stated), and the retry of 1590 sends both in one update."""
    from exchange.ops import quarantine
    from exchange.targets.marketplace import items

    monkeypatch.setattr(items, "COMPANION_GRACE", 1.0)  # 1C's next package: none in a second
    settings = settings_for(db_url, ym, tmp_path, ym_apply_timeout="4")
    worker = bootstrap.worker(settings, engine, rng=random.Random(3))

    def message_id(aggregate: str, version: int) -> str:
        with transaction(engine, read_only=True) as connection:
            return str(
                connection.execute(
                    select(messages.c.message_id).where(
                        messages.c.aggregate == aggregate, messages.c.version == version
                    )
                ).scalar_one()
            )

    async def scenario(w: Worker) -> None:
        stage(engine, [row("Y-0", "retail", 1, "1500"), row("Y-0", "old", 1, "1600")])
        await until_settled(w, engine)
        stage(engine, [row("Y-0", "retail", 2, "1590")])
        await until_settled(w, engine)
        assert states(engine)[("Y-0/retail", 2)] == ("quarantined", "invalid-for-channel")
        stage(engine, [row("Y-0", "old", 2, "2000")])
        await until_settled(w, engine, 2.0)
        assert states(engine)[("Y-0/old", 2)] == ("delayed", None), "never 1500 with 2000"
        with transaction(engine) as connection:
            quarantine.retry(
                connection,
                [message_id("Y-0/retail", 2)],
                quarantine.Filters(),
                operator="test",
                note=None,
                now=w.clock.now(),
                dry_run=False,
            )
        await until_settled(w, engine)

    run_worker(worker, scenario)
    found = states(engine)
    assert found[("Y-0/retail", 2)] == ("delivered", None)
    assert found[("Y-0/old", 2)] == ("delivered", None)
    shown = [(p.value, p.discount_base) for p in ym.applied("Y-0")]
    assert shown[-1] == (Decimal("1590"), Decimal("2000")), shown
    assert (Decimal("1500"), Decimal("2000")) not in shown, shown

"""The Target conformance suite: every target passes the same promises (targets/base.py).

The shop API of contract 5, with single requests and with the batch API (5b), WooCommerce and
1C-Bitrix (contract 10), each against its simulator over HTTP, and RabbitMQ (contract 12)
against the real broker. Every answer class, how a batch travels, health, credentials read
again, and closing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from typing import TypeVar

import httpx
import pytest
from conformance import Shop, price
from rabbitmq_shop import RabbitMqShop

from exchange.dev.bitrixsim import PATH as BITRIX_PATH
from exchange.dev.bitrixsim import BitrixSimulator
from exchange.dev.ozonsim import OzonSimulator, rpc_status
from exchange.dev.simclock import SimClock
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.wbsim import Limits, Switches, WbSimulator
from exchange.dev.woosim import WooSimulator
from exchange.dev.ymsim import YmSimulator, YmSwitches
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage, PacedTarget, Target
from exchange.targets.bitrix.target import BitrixTarget
from exchange.targets.ozon.target import OzonTarget
from exchange.targets.shop_api.client import SiteClient
from exchange.targets.shop_api.target import ShopApiTarget
from exchange.targets.wildberries.budget import Budget
from exchange.targets.wildberries.store import MemoryWbStore
from exchange.targets.wildberries.target import WildberriesTarget
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget
from exchange.targets.yandex_market.target import YandexMarketTarget

TOKEN = "test-token"
T = TypeVar("T")


class ShopApiShop:
    """The shop API (contract 5) on the site simulator."""

    def __init__(self, batch_size: int) -> None:
        self.batching = batch_size > 1
        self.versioned = True
        self.atomic = False
        self.connected = False
        self.batch_size = batch_size
        self.token: str | None = TOKEN
        self.site = SiteSimulator(token=TOKEN, faults=Faults(), batch_enabled=self.batching)
        self.site.start()

    def target(self) -> Target:
        client = SiteClient(self.site.url, self.token, timeout=2.0, concurrency=4)
        return ShopApiTarget(client, batch_size=self.batch_size, token=lambda: self.token)

    def applied(self, sku: str) -> list[int]:
        return self.site.applied_versions("price", sku)

    def refuse_credentials(self, refused: bool) -> None:
        self.token = "a-replaced-token" if refused else TOKEN

    def fail_temporarily(self, sku: str) -> None:
        self.site.faults.poison.add(sku)

    def reject(self, sku: str) -> None:
        self.site.faults.reject.add(sku)

    def answer_unreadably(self, on: bool) -> None:
        self.site.faults.answer_fault = "redirect" if on else None

    def go_down(self) -> None:
        self.site.stop()

    def limit_rate(self, per_second: float) -> bool:
        self.site.faults.rate_limit = per_second
        return True

    def answered(self) -> int | None:
        return None  # the site simulator counts update requests only (not health)

    def lose_session(self, how: str) -> bool:
        return False  # a token on every request, no session

    def close(self) -> None:
        self.site.stop()


class WooShop:
    """WooCommerce (contract 10) on its simulator."""

    batching = True
    versioned = False
    atomic = False
    connected = False

    def __init__(self) -> None:
        self.site = WooSimulator(key="ck_k", secret="cs_s")
        self.site.start()
        self.secret = "cs_s"
        self.ids = MemorySkuIds()

    def target(self) -> Target:
        return WooCommerceTarget(
            self.site.url,
            lambda: ("ck_k", self.secret),
            self.ids,
            price_fields={"retail": "regular_price", "sale": "sale_price"},
            timeout=2.0,
        )

    def applied(self, sku: str) -> list[int]:
        return [int(Decimal(p)) for p in self.site.history(sku)]

    def refuse_credentials(self, refused: bool) -> None:
        self.secret = "cs_replaced" if refused else "cs_s"

    def fail_temporarily(self, sku: str) -> None:
        self.site.faults.poison.add(sku)

    def reject(self, sku: str) -> None:
        self.site.faults.reject.add(sku)

    def answer_unreadably(self, on: bool) -> None:
        self.site.faults.answer_fault = "redirect" if on else None

    def go_down(self) -> None:
        self.site.stop()

    def limit_rate(self, per_second: float) -> bool:
        self.site.faults.rate_limit = per_second
        return True

    def answered(self) -> int | None:
        return sum(self.site.statuses.values())

    def lose_session(self, how: str) -> bool:
        return False  # the key on every request, no session

    def close(self) -> None:
        self.site.stop()


class BitrixShop:
    """1C-Bitrix's exchange (contract 10) on its simulator: windows-1251 and zipped, chunks of
    1 KB, or UTF-8 and plain."""

    batching = True
    versioned = False
    atomic = True
    connected = False

    def __init__(self, *, zip: bool, utf8: bool) -> None:
        self.site = BitrixSimulator(
            "exchange", "secret", zip=zip, utf8=utf8, file_limit=1024, step_size=2
        )
        self.site.start()
        self.password = "secret"

    def target(self) -> Target:
        return BitrixTarget(
            self.site.url + BITRIX_PATH,
            "exchange",
            lambda: self.password,
            catalog_id="catalog-1",
            price_types={"retail": "Розничная", "sale": "Акционная"},
            max_import_steps=50,
            timeout=2.0,
        )

    def applied(self, sku: str) -> list[int]:
        return [int(Decimal(p)) for p in self.site.history(sku)]

    def refuse_credentials(self, refused: bool) -> None:
        self.password = "replaced" if refused else "secret"

    def fail_temporarily(self, sku: str) -> None:
        self.site.faults.poison.add(sku)

    def reject(self, sku: str) -> None:
        self.site.faults.reject.add(sku)

    def answer_unreadably(self, on: bool) -> None:
        self.site.faults.answer_fault = "html" if on else None

    def lose_session(self, how: str) -> bool:
        self.site.faults.lose_session, self.site.faults.session_lost_as = 1, how
        return True

    def go_down(self) -> None:
        self.site.stop()

    def limit_rate(self, per_second: float) -> bool:
        self.site.faults.rate_limit = per_second
        return True

    def answered(self) -> int | None:
        return sum(self.site.statuses.values())

    def close(self) -> None:
        self.site.stop()


class _AllBut:
    """A catalogue of every offer but some."""

    def __init__(self, missing: set[str]) -> None:
        self.missing = missing

    def __contains__(self, offer: object) -> bool:
        return offer not in self.missing


class _Unreadable(httpx.AsyncBaseTransport):
    """A proxy in front of the marketplace that answers a redirect to a sign-in page when on."""

    def __init__(self) -> None:
        self.on = False
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.on:
            return httpx.Response(302, headers={"Location": "/sign-in"})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class YandexMarketShop:
    """Yandex Market (contract 14) on its simulator, a price shown as soon as it is accepted
    (``apply_delay`` 0: the read-back's waiting has tests of its own, test_yandex_market.py)."""

    batching = True
    versioned = False
    atomic = False
    connected = False

    def __init__(self) -> None:
        self.site = YmSimulator(
            "ym-key",
            1001,
            clock=SimClock(0, start=1_790_000_000.0),
            switches=YmSwitches(apply_delay=0),
        )
        self.site.catalogue = _AllBut(set())  # type: ignore[assignment]
        self.site.start()
        self.key = "ym-key"
        self.proxy = _Unreadable()

    def target(self) -> Target:
        return YandexMarketTarget(
            self.site.url,
            1001,
            lambda: self.key,
            price_types={"retail": "value", "sale": "minimumForBestseller"},
            timeout=2.0,
            transport=self.proxy,
            # Shown at once here (apply_delay 0), so the first read-back is final: an offer it
            # does not list is unknown then, not read again for the default ten minutes.
            apply_timeout=0.0,
        )

    def applied(self, sku: str) -> list[int]:
        # Yandex keeps a price, not writes: the same price set again is one effect.
        values = [int(v) for v in self.site.history(sku)]
        return [v for n, v in enumerate(values) if n == 0 or values[n - 1] != v]

    def refuse_credentials(self, refused: bool) -> None:
        self.key = "a-replaced-key" if refused else "ym-key"

    def fail_temporarily(self, sku: str) -> None:
        pytest.skip(
            "Yandex Market answers no temporary failure for one offer: a 5xx is the whole "
            "request's (test_yandex_market.py covers it, and a price never shown)"
        )

    def reject(self, sku: str) -> None:
        self.site.catalogue.missing.add(sku)  # type: ignore[union-attr]

    def answer_unreadably(self, on: bool) -> None:
        self.proxy.on = on

    def go_down(self) -> None:
        self.site.stop()

    def limit_rate(self, per_second: float) -> bool:
        return False  # Yandex refuses with 420 for offers a minute (test_yandex_market.py)

    def answered(self) -> int | None:
        return sum(self.site.requests.values())

    def lose_session(self, how: str) -> bool:
        return False  # the key on every request, no session

    def close(self) -> None:
        self.site.stop()


class _FailingFor(httpx.AsyncBaseTransport):
    """Ozon has no temporary failure of one item: its "Internal error" (500) is the whole
    request's. The lever for a SKU: every request carrying it answers so (one SKU a request in
    this shop, ``max_items=1``)."""

    def __init__(self, skus: set[str]) -> None:
        self.skus = skus
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = request.content.decode()
        if any(f'"offer_id":"{sku}"' in body.replace(" ", "") for sku in self.skus):
            return httpx.Response(500, content=rpc_status(500, "Internal error"))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class OzonShop:
    """Ozon's Seller API (contract 14) on its simulator: one SKU a request (Ozon fails a
    request whole, never one item temporarily), retail as price and sale as min_price."""

    batching = False
    versioned = False
    atomic = False
    connected = False

    def __init__(self) -> None:
        self.site = OzonSimulator("836741", "ozon-key")
        self.site.start()
        self.key = "ozon-key"
        self.failing: set[str] = set()

    def target(self) -> Target:
        return OzonTarget(
            self.site.url,
            "836741",
            lambda: self.key,
            price_types={"retail": "price", "sale": "min_price"},
            timeout=2.0,
            transport=_FailingFor(self.failing),
            max_items=1,
        )

    def applied(self, sku: str) -> list[int]:
        return [int(Decimal(p)) for p in self.site.history(sku)]

    def refuse_credentials(self, refused: bool) -> None:
        self.key = "a-revoked-key" if refused else "ozon-key"

    def fail_temporarily(self, sku: str) -> None:
        self.failing.add(sku)

    def reject(self, sku: str) -> None:
        self.site.set_category_bounds(sku, Decimal(100_000), Decimal(200_000))

    def answer_unreadably(self, on: bool) -> None:
        self.site.faults.proxy_page = 200 if on else None

    def lose_session(self, how: str) -> bool:
        return False  # Client-Id and Api-Key on every request

    def go_down(self) -> None:
        self.site.stop()

    def limit_rate(self, per_second: float) -> bool:
        self.site.limits.rps = per_second
        return True

    def answered(self) -> int | None:
        return sum(self.site.requests.values())

    def close(self) -> None:
        self.site.stop()


class _Garbled(httpx.AsyncBaseTransport):
    """Every answer a page no target can read (a host's HTML error page with status 200),
    while ``on``; else the real transport."""

    def __init__(self, shop: WbShop) -> None:
        self.shop = shop
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.shop.garbled:
            return httpx.Response(200, text="<html><body>502 Bad Gateway</body></html>")
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


class WbShop:
    """Wildberries (contract 14) on its simulator: tasks processed at once, and the target
    looking at its task right after the upload (in production a later attempt does: the
    delivery waits ``AWAITING`` meanwhile, tests/targets/test_wildberries.py)."""

    batching = True
    versioned = False
    atomic = False
    connected = False
    one_price_per_sku = True  # Wildberries takes price only: the discount is the seller's

    def __init__(self) -> None:
        self.site = WbSimulator(switches=Switches(processing_delay=0.0))
        self.site.start()
        skus = [f"SKU-{n}" for n in range(12)] + ["SKU-A", "SKU-B", "SKU-R", "SKU-T", "VAR-3"]
        for sku in skus:
            self.site.add_good(sku, price=2)  # no version's price is a third of it or less
        self.token = self.good_token = self.site.token()
        self.garbled = False
        self.store = MemoryWbStore()
        self.budget = Budget()

    def target(self) -> Target:
        return WildberriesTarget(
            self.site.url,
            lambda: self.token,
            self.store,
            price_types={"retail": "price", "sale": None},
            timeout=2.0,
            poll_at_once=True,
            budget=self.budget,
            transport=_Garbled(self),
        )

    def applied(self, sku: str) -> list[int]:
        good = self.site.by_vendor_code(sku)
        return list(self.site.applied[good.nm_id]) if good is not None else []

    def refuse_credentials(self, refused: bool) -> None:
        self.token = "a-replaced-token" if refused else self.good_token

    def fail_temporarily(self, sku: str) -> None:
        good = self.site.by_vendor_code(sku)
        assert good is not None
        self.site.lock_for_sale(good.nm_id)  # research §2.4: a sale lock, temporary

    def reject(self, sku: str) -> None:
        good = self.site.by_vendor_code(sku)
        if good is not None:
            del self.site.goods[good.nm_id]  # not in the catalogue: unknown-sku

    def answer_unreadably(self, on: bool) -> None:
        self.garbled = on

    def go_down(self) -> None:
        self.site.stop()

    def limit_rate(self, per_second: float) -> bool:
        self.site.limits = Limits(period=1.0 / per_second, requests=1, burst=1)
        return True

    def answered(self) -> int | None:
        return sum(self.site.requests.values())

    def lose_session(self, how: str) -> bool:
        return False  # the token on every request, no session

    def close(self) -> None:
        self.site.stop()


SHOPS = {
    "ozon": OzonShop,
    "bitrix-cp1251-zip": lambda: BitrixShop(zip=True, utf8=False),
    "bitrix-utf8": lambda: BitrixShop(zip=False, utf8=True),
    "woocommerce": WooShop,
    "api-single": lambda: ShopApiShop(batch_size=1),
    "api-batch": lambda: ShopApiShop(batch_size=5),
    "rabbitmq": RabbitMqShop,
    "yandex-market": YandexMarketShop,
    "wildberries": WbShop,
}


@pytest.fixture(params=sorted(SHOPS))
def shop(request: pytest.FixtureRequest) -> Iterator[Shop]:
    shop = SHOPS[request.param]()
    try:
        yield shop
    finally:
        shop.close()


async def send_all(target: Target, messages: list[OutgoingMessage]) -> list[Classification]:
    """Send as the worker does: ``requests`` groups them, ``send`` judges each request; a
    message the shop accepted and shows later (``AWAITING``) is leased again, as the worker
    does once its wait has passed, until its answer is another."""
    answers: list[Classification] = []
    for request in target.requests(messages):
        got = await target.send(request)
        for _ in range(5):
            again = [m for m, a in zip(request, got, strict=True) if a.verdict is Verdict.AWAITING]
            if not again:
                break
            later = dict(zip((m.message_id for m in again), await target.send(again), strict=True))
            got = [later.get(m.message_id, a) for m, a in zip(request, got, strict=True)]
        answers += got
    return answers


def with_target(shop: Shop, scenario: Callable[[Target], Awaitable[T]]) -> T:
    """Run ``scenario`` with a fresh target in one event loop, closing the target after."""

    async def go() -> T:
        target = shop.target()
        try:
            return await scenario(target)
        finally:
            await target.aclose()

    return asyncio.run(go())


def deliver(shop: Shop, *messages: OutgoingMessage) -> list[Classification]:
    return with_target(shop, lambda target: send_all(target, list(messages)))


def verdicts(answers: list[Classification]) -> list[Verdict]:
    return [answer.verdict for answer in answers]


# -- how a batch travels -------------------------------------------------------------------------


def test_requests_keep_the_order_and_never_hold_two_messages_of_one_aggregate(shop: Shop) -> None:
    messages = [price(f"SKU-{n}", 1) for n in range(12)] + [price("SKU-0", 2)]

    async def plan(target: Target) -> list[list[OutgoingMessage]]:
        return target.requests(messages)

    requests = with_target(shop, plan)

    assert sorted(m.message_id for r in requests for m in r) == sorted(
        m.message_id for m in messages
    ), "every message in exactly one request"
    assert all(len({m.aggregate for m in r}) == len(r) for r in requests)
    if not shop.batching:
        assert all(len(r) == 1 for r in requests), "single requests"
    else:
        assert len(requests) < len(messages), "several messages travel together"


def test_send_answers_one_classification_per_message_in_the_order_given(shop: Shop) -> None:
    shop.reject("SKU-R")
    shop.fail_temporarily("SKU-T")
    messages = [price("SKU-A", 1), price("SKU-R", 1), price("SKU-T", 1), price("SKU-B", 1)]

    answers = deliver(shop, *messages)

    expected = [Verdict.DELIVERED, Verdict.TERMINAL, Verdict.TEMPORARY, Verdict.DELIVERED]
    applied_expected: tuple[list[int], ...] = ([1], [1], [], [])
    if shop.atomic:
        # A package refused for good is split until the refused SKU stands alone; a temporary
        # failure holds back the part it fell on, whole (SKU-B travels with SKU-T).
        expected[3], applied_expected = Verdict.TEMPORARY, ([1], [], [], [])
    assert expected == verdicts(answers)
    applied = tuple(shop.applied(sku) for sku in ("SKU-A", "SKU-B", "SKU-R", "SKU-T"))
    assert applied_expected == applied


def test_two_price_types_of_one_sku_in_one_request_are_each_delivered(shop: Shop) -> None:
    if getattr(shop, "one_price_per_sku", False):
        pytest.skip(
            "the shop takes one price per SKU (Wildberries: price; the discount is not ours)"
        )
    # WooCommerce answers a batch positionally (WC_REST_Controller::batch_items): the regular
    # and the sale price of one product are two results for one id, each read by its place.
    messages = [price("SKU-1", 1, "200.00"), price("SKU-1", 1, "150.07", price_type="sale")]

    answers = deliver(shop, *messages)

    assert [Verdict.DELIVERED, Verdict.DELIVERED] == verdicts(answers), answers


# -- every answer class ------------------------------------------------------------------------


def test_a_price_the_shop_applied_is_delivered_once_even_when_sent_again(shop: Shop) -> None:
    first = deliver(shop, price("SKU-1", 3))
    again = deliver(shop, price("SKU-1", 3))  # the same message: a retry after a timeout

    assert [Verdict.DELIVERED, Verdict.DELIVERED] == verdicts(first + again)
    assert [3] == shop.applied("SKU-1"), "one effect"


def test_an_older_version_than_the_shop_holds_is_stale_at_the_site_never_applied(
    shop: Shop,
) -> None:
    deliver(shop, price("SKU-1", 5))
    if not shop.versioned:
        # A shop without versions writes what it is sent (an absolute write): what keeps an
        # older price from landing is the queue alone, which never sends a version at or
        # below the delivered one (tests/integration/test_stale_sends.py, docs/guarantees.md).
        (written,) = deliver(shop, price("SKU-1", 4))
        assert (Verdict.DELIVERED, [5, 4]) == (written.verdict, shop.applied("SKU-1"))
        return

    (answer,) = deliver(shop, price("SKU-1", 4))

    assert (Verdict.STALE_AT_SITE, 5) == (answer.verdict, answer.site_version)
    assert [5] == shop.applied("SKU-1")


def test_a_temporary_failure_is_temporary(shop: Shop) -> None:
    shop.fail_temporarily("SKU-1")
    (answer,) = deliver(shop, price("SKU-1", 1))
    assert Verdict.TEMPORARY == answer.verdict
    assert [] == shop.applied("SKU-1")


def test_a_refusal_for_good_is_terminal(shop: Shop) -> None:
    shop.reject("SKU-1")
    (answer,) = deliver(shop, price("SKU-1", 1))
    assert Verdict.TERMINAL == answer.verdict


def test_refused_credentials_pause_delivery_and_are_read_again(shop: Shop) -> None:
    shop.refuse_credentials(True)

    async def scenario(
        target: Target,
    ) -> tuple[list[Classification], Classification, Classification]:
        refused = await target.send([price("SKU-1", 1)])
        health_refused = await target.health()
        shop.refuse_credentials(False)  # the operator fixed the secret
        target.reload_credentials()
        return refused, health_refused, await target.health()

    refused, health_refused, health_again = with_target(shop, scenario)

    assert [Verdict.PAUSE] == verdicts(refused)
    assert (Verdict.PAUSE, Verdict.DELIVERED) == (health_refused.verdict, health_again.verdict)
    assert [] == shop.applied("SKU-1")


def test_an_answer_no_target_can_read_is_unknown_never_temporary(shop: Shop) -> None:
    shop.answer_unreadably(True)
    (answer,) = deliver(shop, price("SKU-1", 1))
    if shop.connected:
        # The connection it came on ends: whether the message arrived is unknown, so it is
        # sent again (contract 12), and the shop applies it once.
        assert (Verdict.TEMPORARY, True) == (answer.verdict, answer.result_unknown), answer
        shop.answer_unreadably(False)
        assert [Verdict.DELIVERED] == verdicts(deliver(shop, price("SKU-1", 1)))
        assert [1] == shop.applied("SKU-1")
        return
    assert Verdict.UNKNOWN == answer.verdict


def test_a_shop_that_is_down_is_a_temporary_failure_not_sent(shop: Shop) -> None:
    shop.go_down()

    async def scenario(target: Target) -> tuple[list[Classification], Classification]:
        return await target.send([price("SKU-1", 1)]), await target.health()

    answers, health = with_target(shop, scenario)

    assert [Verdict.TEMPORARY] == verdicts(answers)
    assert not answers[0].result_unknown, "a refused connection sent nothing"
    assert Verdict.TEMPORARY == health.verdict


# -- health and closing ------------------------------------------------------------------------


def test_health_has_no_effect_on_the_shop(shop: Shop) -> None:
    health = with_target(shop, lambda target: target.health())
    assert Verdict.DELIVERED == health.verdict
    assert [] == shop.applied("SKU-1")


def test_closing_twice_is_harmless_and_leaves_nothing_open(shop: Shop) -> None:
    target = shop.target()

    async def scenario() -> None:
        await target.send([price("SKU-1", 1)])
        await target.aclose()
        await target.aclose()

    asyncio.run(scenario())  # filterwarnings=error: an unclosed session would fail the test


# -- the site's pace (contract 5c, issue 22 items 5 and 12) -----------------------------------


class CountingPacer:
    """A pace that lets every request go at once and counts the turns and their ends."""

    def __init__(self) -> None:
        self.turns = 0
        self.statuses: list[int | None] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def turn(self) -> float:
        self.turns += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return 0.0

    def done(self, sent_at: float, status: int | None, retry_after: str | None) -> None:
        self.in_flight -= 1
        self.statuses.append(status)


def test_every_request_a_target_makes_takes_a_turn_of_the_pace(shop: Shop) -> None:
    """Lookups, batches, read-backs, health checks, every step of an exchange: each request
    the shop answered took one turn of the pace and told it its status (contract 5c). A
    target whose send is one request is paced by the worker around it instead."""
    pacer = CountingPacer()

    async def scenario(target: Target) -> None:
        if not isinstance(target, PacedTarget):
            pytest.skip("one request per send: the worker paces it around send")
        target.pace_with(pacer)
        await target.health()
        await send_all(target, [price("SKU-1", 1), price("SKU-2", 1), price("VAR-3", 1)])

    with_target(shop, scenario)

    answered = shop.answered()
    assert answered is not None and answered > 2
    assert answered == pacer.turns == len(pacer.statuses)
    assert all(status is not None for status in pacer.statuses)
    assert 0 == pacer.in_flight


def test_a_429_with_retry_after_is_temporary_and_carries_it(shop: Shop) -> None:
    """A host's rate limiter (429, Retry-After: 1, its own HTML page on WooCommerce and
    Bitrix): every message of the refused request is temporary with the shop's Retry-After
    and its status, never terminal nor unknown."""
    if not shop.limit_rate(1.0):
        pytest.skip("a broker has no rate limiter answering 429")

    async def scenario(target: Target) -> list[Classification]:
        await target.health()  # the one request of this second (where health is limited)
        await send_all(target, [price("SKU-0", 1)])  # (or this one)
        return await send_all(target, [price("SKU-1", 1), price("SKU-2", 1)])

    answers = with_target(shop, scenario)

    assert [(Verdict.TEMPORARY, "1", 429)] * 2 == [
        (a.verdict, a.retry_after, a.http_status) for a in answers
    ]
    assert [] == shop.applied("SKU-1")


@pytest.mark.parametrize("how", ["message", "redirect", "form"])
def test_a_session_the_shop_lost_is_signed_in_again_and_nothing_is_lost(
    shop: Shop, how: str
) -> None:
    """The shop lost the session (its authorization message, a redirect to a sign-in page, the
    sign-in form with status 200): one new sign-in and the request again; delivered, nothing
    quarantined (contract 10)."""
    if not shop.lose_session(how):
        pytest.skip("the shop keeps no sessions")

    answers = deliver(shop, price("SKU-1", 1), price("SKU-2", 1))

    assert [Verdict.DELIVERED] * 2 == verdicts(answers)
    assert ([1], [1]) == (shop.applied("SKU-1"), shop.applied("SKU-2"))

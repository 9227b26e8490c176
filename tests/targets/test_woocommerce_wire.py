"""What the WooCommerce target puts on the wire (contract 10): at most 100 items a request,
prices as exact decimal strings, variations under their parent, the 413 the shop answers beyond
its limit, a read-back after a lost answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conformance import price

from exchange.dev.woosim import WooSimulator
from exchange.domain.verdicts import Verdict
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import MAX_ITEMS, WooCommerceTarget


@pytest.fixture
def shop() -> Iterator[WooSimulator]:
    simulator = WooSimulator("ck", "cs")
    simulator.start()
    yield simulator
    simulator.stop()


def target(shop: WooSimulator) -> WooCommerceTarget:
    return WooCommerceTarget(
        shop.url,
        lambda: ("ck", "cs"),
        MemorySkuIds(),
        price_fields={"retail": "regular_price"},
        timeout=2.0,
    )


def test_requests_hold_at_most_100_messages() -> None:
    plan = WooCommerceTarget(
        "http://127.0.0.1:1", lambda: ("k", "s"), MemorySkuIds(), price_fields={}, timeout=1
    )
    messages = [price(f"SKU-{n}", 1) for n in range(250)]

    sizes = [len(r) for r in plan.requests(messages)]

    asyncio.run(plan.aclose())
    assert [100, 100, 50] == sizes
    assert 100 == MAX_ITEMS


def test_the_shop_refuses_more_than_100_items_with_413_and_applies_none(
    shop: WooSimulator,
) -> None:
    import httpx

    body = {"update": [{"id": 1, "regular_price": "1.00"}] * 101}
    shop._is_ssl = True  # Basic is read only where PHP sees HTTPS (is_ssl)
    answer = httpx.post(f"{shop.url}/wp-json/wc/v3/products/batch", json=body, auth=("ck", "cs"))
    assert (413, "woocommerce_rest_request_entity_too_large") == (
        answer.status_code,
        answer.json()["code"],
    )
    assert "" == shop.price("PARENT-1")


def test_exact_decimal_strings_and_variations_under_their_parent(shop: WooSimulator) -> None:
    woo = target(shop)

    async def go() -> list[Verdict]:
        try:
            answers = await woo.send(
                [price("SKU-1", 1, "1234567890.123456789"), price("VAR-1", 1, "0.10")]
            )
            return [a.verdict for a in answers]
        finally:
            await woo.aclose()

    assert [Verdict.DELIVERED, Verdict.DELIVERED] == asyncio.run(go())
    assert ("1234567890.123456789", "0.10") == (shop.price("SKU-1"), shop.price("VAR-1"))
    assert 1 == shop.requests["POST products/<id>/variations/batch"]


def test_a_lost_answer_is_read_back_in_one_request(shop: WooSimulator) -> None:
    woo = target(shop)
    shop.faults.drop_after = True

    async def go() -> list[Verdict]:
        try:
            answers = await woo.send([price(f"SKU-{n}", 1) for n in range(30)])
            return [a.verdict for a in answers]
        finally:
            await woo.aclose()

    assert [Verdict.DELIVERED] * 30 == asyncio.run(go())
    assert (1, 1) == (shop.requests["POST products/batch"], shop.requests["GET products"] - 1)


def test_a_rate_limited_shop_is_temporary_with_its_retry_after(shop: WooSimulator) -> None:
    woo = target(shop)
    shop.faults.rate_limit = 1

    async def go() -> tuple[Verdict, str | None, int | None]:
        try:
            await woo.health()  # the one request of this second
            (answer,) = await woo.send([price("SKU-1", 1)])
            return answer.verdict, answer.retry_after, answer.http_status
        finally:
            await woo.aclose()

    assert (Verdict.TEMPORARY, "1", 429) == asyncio.run(go())


def test_a_regular_and_a_sale_price_of_one_product_in_one_batch_are_both_delivered_and_held(
    shop: WooSimulator,
) -> None:
    woo = WooCommerceTarget(
        shop.url,
        lambda: ("ck", "cs"),
        MemorySkuIds(),
        price_fields={"retail": "regular_price", "sale": "sale_price"},
        timeout=2.0,
    )

    async def go() -> list[Verdict]:
        try:
            answers = await woo.send(
                [price("SKU-1", 1, "200.00"), price("SKU-1", 1, "150.07", price_type="sale")]
            )
            return [a.verdict for a in answers]
        finally:
            await woo.aclose()

    assert [Verdict.DELIVERED, Verdict.DELIVERED] == asyncio.run(go())
    item = shop.by_sku("SKU-1")
    assert item is not None
    assert ("200.00", "150.07") == (item.regular_price, item.sale_price)
    assert 1 == shop.requests["POST products/batch"], "one batch, two items of one id"

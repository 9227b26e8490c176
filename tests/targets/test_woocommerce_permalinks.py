"""Plain permalinks (issue 33 item 15, contract 10): a shop whose /wp-json/ answers an HTML 404
is reached at ``?rest_route=/wc/v3/…`` (found once, kept), and an HTML 404 where neither address
is the REST API is configuration (delivery pauses, saying so), never a verdict on a SKU.

The simulator's plain permalinks follow WordPress's rest-api.php (exchange/dev/woosim.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from conformance import price

from exchange.dev.woosim import NOT_FOUND_PAGE, WooSimulator
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import NO_REST_API, WooCommerceTarget

KEY, SECRET = "ck_plain", "cs_plain"


@pytest.fixture
def plain_shop() -> Iterator[WooSimulator]:
    with WooSimulator(KEY, SECRET, pretty_permalinks=False) as shop:
        yield shop  # type: ignore[misc]


def target(url: str, transport: httpx.AsyncBaseTransport | None = None) -> WooCommerceTarget:
    return WooCommerceTarget(
        url,
        lambda: (KEY, SECRET),
        MemorySkuIds(),
        price_fields={"retail": "regular_price"},
        timeout=2.0,
        transport=transport,
    )


def send_all(woo: WooCommerceTarget, rounds: list[list[str]]) -> list[list[Classification]]:
    async def go() -> list[list[Classification]]:
        try:
            return [
                await woo.send([price(sku, n + 1, "7.50") for sku in skus])
                for n, skus in enumerate(rounds)
            ]
        finally:
            await woo.aclose()

    return asyncio.run(go())


def test_plain_permalinks_deliver_through_rest_route_found_once(
    plain_shop: WooSimulator,
) -> None:
    woo = target(plain_shop.url)
    seen: list[str] = []

    async def hook(request: httpx.Request) -> None:
        seen.append(str(request.url))

    woo._http.event_hooks["request"].append(hook)
    answers = send_all(woo, [["SKU-1", "SKU-2"], ["SKU-3"]])

    assert [[Verdict.DELIVERED] * 2, [Verdict.DELIVERED]] == [
        [a.verdict for a in r] for r in answers
    ]
    assert ("7.50", "7.50") == (plain_shop.price("SKU-1"), plain_shop.price("SKU-3"))
    assert 1 == sum("/wp-json/" in url for url in seen), "/wp-json/ tried once, then remembered"
    assert all("rest_route=" in url for url in seen[1:])


def test_permalinks_turned_back_on_keep_working(plain_shop: WooSimulator) -> None:
    woo = target(plain_shop.url)

    async def go() -> list[Verdict]:
        try:
            (first,) = await woo.send([price("SKU-1", 1, "1.00")])
            plain_shop.pretty_permalinks = True  # the owner turned pretty permalinks on
            (second,) = await woo.send([price("SKU-1", 2, "2.00")])
            return [first.verdict, second.verdict]
        finally:
            await woo.aclose()

    assert [Verdict.DELIVERED, Verdict.DELIVERED] == asyncio.run(go())
    assert "2.00" == plain_shop.price("SKU-1")


def test_an_html_404_at_both_addresses_pauses_with_permalinks_and_the_url_never_a_sku_verdict() -> (
    None
):
    """A URL that is not the shop's WordPress (a typo, a wrong subdirectory): every address
    answers the web server's HTML 404. No SKU is judged; delivery pauses and says what to
    check."""

    def not_wordpress(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, content=NOT_FOUND_PAGE, headers={"Content-Type": "text/html"})

    woo = target("https://shop.test/wrong", httpx.MockTransport(not_wordpress))
    ((first, second),) = send_all(woo, [["SKU-1", "SKU-2"]])

    assert (Verdict.PAUSE, NO_REST_API) == (first.verdict, first.error_class)
    assert (Verdict.PAUSE, NO_REST_API) == (second.verdict, second.error_class)
    assert "Permalinks" in first.detail and "https://shop.test/wrong" in first.detail
    assert first.reason is None


def test_health_says_the_same_so_delivery_resumes_by_itself_once_the_url_is_right() -> None:
    def not_wordpress(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, content=b"<html>404</html>")

    woo = target("https://shop.test", httpx.MockTransport(not_wordpress))

    async def go() -> Classification:
        try:
            return await woo.health()
        finally:
            await woo.aclose()

    judged = asyncio.run(go())
    assert (Verdict.PAUSE, NO_REST_API) == (judged.verdict, judged.error_class)


def test_a_json_404_about_an_item_is_still_the_shops_answer() -> None:
    """The REST API's own 404 (a WP_Error in JSON) is an answer about the request, not the
    address: read by the table every target shares, no second address tried; only its
    ``rest_no_route`` (WordPress without WooCommerce's routes) is about the shop."""

    def answer(code: str) -> httpx.MockTransport:
        return httpx.MockTransport(
            lambda request: httpx.Response(
                404, json={"code": code, "message": "…", "data": {"status": 404}}
            )
        )

    woo = target("https://shop.test", answer("woocommerce_rest_product_invalid_id"))
    ((judged,),) = send_all(woo, [["SKU-1"]])
    assert Verdict.TERMINAL == judged.verdict
    assert not woo.rest_route

    woo = target("https://shop.test", answer("rest_no_route"))
    ((judged,),) = send_all(woo, [["SKU-1"]])
    assert (Verdict.PAUSE, NO_REST_API) == (judged.verdict, judged.error_class)
    assert "WooCommerce active" in judged.detail

"""The WooCommerce simulator behaves as WooCommerce's source says (issue 22 item 12), in the
respects the target's tests lean on: routes as WordPress resolves them (a subdirectory install,
``?rest_route=`` with plain permalinks), the key's permissions by method, the query read as PHP
reads it, and the host's 429 with its HTML page. Each test names the source it follows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from exchange.dev.woosim import API, WooSimulator
from exchange.domain.verdicts import Verdict
from exchange.targets.woocommerce import auth
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget

KEY, SECRET = "ck_key_1", "cs_secret_1"


def signed(url: str, method: str = "GET") -> httpx.URL:
    """OAuth 1.0a as the target signs it (http://: the only scheme WooCommerce takes there)."""
    return auth.sign("oauth1", httpx.URL(url), method, KEY, SECRET)[0]


@pytest.fixture
def shop(request: pytest.FixtureRequest) -> Iterator[WooSimulator]:
    options = getattr(request, "param", {})
    simulator = WooSimulator(KEY, SECRET, **options)
    simulator.start()
    yield simulator
    simulator.stop()


def price_target(url: str) -> WooCommerceTarget:
    return WooCommerceTarget(
        url,
        lambda: (KEY, SECRET),
        MemorySkuIds(),
        price_fields={"retail": "regular_price"},
        timeout=2.0,
    )


def deliver(url: str) -> Verdict:
    from conformance import price

    target = price_target(url)

    async def go() -> Verdict:
        try:
            (answer,) = await target.send([price("SKU-1", 1, "9.90")])
            return answer.verdict
        finally:
            await target.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("shop", [{"base_path": "/shop"}], indirect=True)
def test_a_subdirectory_install_answers_under_its_home_and_the_target_delivers_there(
    shop: WooSimulator,
) -> None:
    """WC_REST_Authentication::route_from_request_uri strips the home's path (subdirectory
    installs); outside it there is no WordPress. A target given the home's URL delivers."""
    outside = httpx.get(signed(f"{shop.url}{API}/products?sku=SKU-1"))
    assert 404 == outside.status_code and "text/html" in outside.headers["content-type"]

    assert Verdict.DELIVERED == deliver(f"{shop.url}/shop")
    assert "9.90" == shop.price("SKU-1")


@pytest.mark.parametrize("shop", [{"pretty_permalinks": False}], indirect=True)
def test_with_plain_permalinks_only_rest_route_reaches_the_api(shop: WooSimulator) -> None:
    """Plain permalinks: /wp-json/ is WordPress's 404 page; the API answers at
    ``/?rest_route=/wc/v3/…``, signed like any query (route_from_request_uri, WP::parse_request;
    rest-api.php's rest_api_register_rewrites and get_rest_url). The target finds that address
    by itself: tests/targets/test_woocommerce_permalinks.py."""
    pretty = httpx.get(signed(f"{shop.url}{API}/products?sku=SKU-1"))
    assert 404 == pretty.status_code and "text/html" in pretty.headers["content-type"]

    plain = httpx.get(signed(f"{shop.url}/?rest_route=/wc/v3/products&sku=SKU-1"))
    assert 200 == plain.status_code, plain.text
    assert ["SKU-1"] == [item["sku"] for item in plain.json()]

    other = httpx.get(signed(f"{shop.url}/?rest_route=/wp/v2/users"))
    assert (404, "rest_no_route") == (other.status_code, other.json()["code"])


def test_the_keys_permissions_are_judged_by_method(shop: WooSimulator) -> None:
    """check_permissions: HEAD and GET need read, POST to PATCH and DELETE write, OPTIONS
    nothing; a write-only key may not even read, a read-only one may not write."""
    listing = f"{shop.url}{API}/products?sku=SKU-1"
    batch = f"{shop.url}{API}/products/batch"
    shop.faults.write_only_key = True
    read = httpx.get(signed(listing))
    assert 401 == read.status_code
    assert "does not have read permissions" in read.json()["message"]
    assert 200 == httpx.post(signed(batch, "POST"), json={"update": []}).status_code
    head = httpx.head(signed(listing, "HEAD"))
    assert 401 == head.status_code and b"" == head.content

    shop.faults.write_only_key, shop.faults.read_only_key = False, True
    assert 200 == httpx.head(signed(listing, "HEAD")).status_code
    assert 200 == httpx.request("OPTIONS", signed(listing, "OPTIONS")).status_code
    refused = httpx.request("PATCH", signed(batch, "PATCH"), json={"update": []})
    assert 401 == refused.status_code
    assert "does not have write permissions" in refused.json()["message"]


@pytest.mark.parametrize("shop", [{"is_ssl": True}], indirect=True)
def test_the_query_is_read_as_php_reads_it(shop: WooSimulator) -> None:
    """$_GET (php_default_treat_data): the last of a repeated name wins. (Signed by OAuth, a
    repeated name fails the signature, as on a real shop: the consumer signs both values,
    check_oauth_signature sees one; so the key travels in the query here, PHP seeing HTTPS.)"""
    keys = f"consumer_key={KEY}&consumer_secret={SECRET}"
    answer = httpx.get(f"{shop.url}{API}/products?sku=SKU-1&sku=SKU-2&per_page=5&{keys}")
    assert ["SKU-2"] == [item["sku"] for item in answer.json()]
    twice = httpx.get(signed(f"{shop.url}{API}/products?sku=SKU-1&sku=SKU-2"))
    assert 401 == twice.status_code and "signature" in twice.json()["message"]


def test_the_hosts_rate_limiter_answers_429_with_its_html_page_before_wordpress(
    shop: WooSimulator,
) -> None:
    """A hosting limiter (nginx limit_req) refuses before PHP runs: its own HTML page and
    Retry-After, whatever the key."""
    shop.faults.rate_limit, shop.faults.rate_burst = 1.0, 0.0
    assert 200 == httpx.get(signed(f"{shop.url}{API}/products?sku=SKU-1")).status_code
    refused = httpx.get(f"{shop.url}{API}/products?sku=SKU-1")
    assert (429, "1") == (refused.status_code, refused.headers["retry-after"])
    assert refused.headers["content-type"].startswith("text/html")
    with pytest.raises(json.JSONDecodeError):
        refused.json()


def test_every_regular_price_write_is_kept_with_its_time_the_same_price_again_included(
    shop: WooSimulator,
) -> None:
    """``writes()``: what a caller sent twice shows there, where ``history`` (the price's
    changes) cannot show it; ``since`` reads only what is new."""
    item = shop.add("SKU-W")
    url = signed(f"{shop.url}{API}/products/batch", "POST")
    for price in ("10.00", "10.00", "12.00"):
        update = {"update": [{"id": item.id, "regular_price": price}]}
        assert httpx.post(url, json=update).status_code == 200
        url = signed(f"{shop.url}{API}/products/batch", "POST")  # a nonce is used once
    writes = shop.writes()
    assert [(sku, price) for _at, sku, price in writes] == [
        ("SKU-W", "10.00"),
        ("SKU-W", "10.00"),
        ("SKU-W", "12.00"),
    ]
    assert writes[0][0] <= writes[1][0] <= writes[2][0]
    assert shop.history("SKU-W") == ["10.00", "12.00"]
    assert shop.writes(2) == writes[2:]

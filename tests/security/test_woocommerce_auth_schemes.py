"""WooCommerce authentication as the shop decides it (issue 22 item 2, contract 10): Basic and the
query form only where PHP sees HTTPS, OAuth 1.0a otherwise; the secret never crosses plain
http://; a wrong signature, an old timestamp and a used nonce refused as the shop refuses them;
EXCHANGE_WOO_AUTH=auto finds the scheme that works, remembers it and finds another after a 401;
`exchange check` names the scheme and, on a 401, whether the key or the transport is refused.

The simulator follows class-wc-rest-authentication.php (exchange/dev/woosim.py cites it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conformance import price
from oauthlib.oauth1 import SIGNATURE_HMAC_SHA1, SIGNATURE_TYPE_QUERY, Client
from securitytools import Pki, server_context

from exchange.dev.testing import fast_settings
from exchange.dev.woosim import WooSimulator
from exchange.domain.verdicts import Classification, Verdict
from exchange.ops.check import _check_woocommerce
from exchange.targets.woocommerce import auth
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget

KEY, SECRET = "ck_live", "cs_live"
PRODUCTS = "/wp-json/wc/v3/products"


@pytest.fixture
def http_shop() -> Iterator[WooSimulator]:
    with WooSimulator(KEY, SECRET) as shop:
        yield shop  # type: ignore[misc]


@pytest.fixture
def https_shop(pki: Pki) -> Iterator[WooSimulator]:
    shop = WooSimulator(KEY, SECRET)
    shop.ssl_context = server_context(pki.site_cert, pki.site_key)
    with shop:
        yield shop  # type: ignore[misc]


@pytest.fixture(autouse=True)
def nothing_remembered() -> Iterator[None]:
    auth._worked.clear()
    yield
    auth._worked.clear()


def target(shop: WooSimulator, pki: Pki | None = None, **kw: Any) -> WooCommerceTarget:
    import ssl

    verify = ssl.create_default_context(cafile=str(pki.ca)) if pki else None
    secret = kw.pop("secret", SECRET)
    return WooCommerceTarget(
        shop.url,
        lambda: (KEY, secret),
        MemorySkuIds(),
        price_fields={"retail": "regular_price"},
        timeout=2.0,
        verify=verify,
        **kw,
    )


def send(t: WooCommerceTarget, sku: str = "SKU-1", version: int = 1) -> Classification:
    async def go() -> Classification:
        try:
            (judged,) = await t.send([price(sku, version)])
            return judged
        finally:
            await t.aclose()

    return asyncio.run(go())


def signed(url: str, secret: str = SECRET, **kw: Any) -> str:
    client = Client(KEY, client_secret=secret, signature_type=SIGNATURE_TYPE_QUERY, **kw)
    uri, _, _ = client.sign(url, "GET")
    return uri


# -- the shop's rules (the simulator as the source says) -------------------------------------


def test_over_plain_http_the_shop_ignores_basic_and_the_query_form(
    http_shop: WooSimulator,
) -> None:
    basic = httpx.get(http_shop.url + PRODUCTS, auth=(KEY, SECRET))
    query = httpx.get(
        http_shop.url + PRODUCTS, params={"consumer_key": KEY, "consumer_secret": SECRET}
    )
    assert (401, "woocommerce_rest_cannot_view") == (basic.status_code, basic.json()["code"])
    assert (401, "woocommerce_rest_cannot_view") == (query.status_code, query.json()["code"])


def test_the_shop_verifies_the_oauth_signature_timestamp_and_nonce(
    http_shop: WooSimulator,
) -> None:
    url = http_shop.url + PRODUCTS + "?sku=a%2Cb&per_page=100"
    good = signed(url, signature_method=SIGNATURE_HMAC_SHA1)
    assert 200 == httpx.get(good).status_code
    replayed = httpx.get(good)
    assert "nonce has already been used" in replayed.json()["message"]
    wrong = httpx.get(signed(url, secret="cs_guess")).json()
    assert ("woocommerce_rest_authentication_error", True) == (
        wrong["code"],
        "signature does not match" in wrong["message"],
    )
    old = signed(url, timestamp=str(int(time.time()) - 16 * 60))
    assert "Invalid timestamp." == httpx.get(old).json()["message"]
    tampered = good.replace("per_page=100", "per_page=99")
    assert "signature does not match" in httpx.get(tampered).json()["message"]


def test_a_read_only_key_is_refused_a_write_as_check_permissions_refuses_it(
    http_shop: WooSimulator,
) -> None:
    http_shop.faults.read_only_key = True
    client = Client(KEY, client_secret=SECRET, signature_type=SIGNATURE_TYPE_QUERY)
    uri, _, _ = client.sign(http_shop.url + PRODUCTS + "/batch", "POST")
    answer = httpx.post(uri, json={"update": []})
    assert (401, "woocommerce_rest_authentication_error") == (
        answer.status_code,
        answer.json()["code"],
    )
    assert "does not have write permissions" in answer.json()["message"]


# -- the target ---------------------------------------------------------------------------


def test_auto_over_http_signs_with_oauth1_and_never_sends_the_secret(
    http_shop: WooSimulator,
) -> None:
    seen: list[httpx.Request] = []

    async def hook(request: httpx.Request) -> None:
        seen.append(request)

    t = target(http_shop)
    t._http.event_hooks["request"].append(hook)
    assert Verdict.DELIVERED == send(t).verdict
    assert {"oauth1"} == set(http_shop.auth_seen)
    assert seen and all(SECRET not in str(r.url) and "authorization" not in r.headers for r in seen)


def test_a_wrong_secret_over_oauth1_is_the_key_refused(http_shop: WooSimulator) -> None:
    judged = send(target(http_shop, secret="cs_old"))
    assert (Verdict.PAUSE, "KeyRefused") == (judged.verdict, judged.error_class)
    assert "refused the key" in judged.detail and "cs_old" not in judged.detail


def test_basic_forced_over_http_is_the_transport_refused(http_shop: WooSimulator) -> None:
    judged = send(target(http_shop, auth_setting="basic"))
    assert (Verdict.PAUSE, "TransportRefused") == (judged.verdict, judged.error_class)
    assert "OAuth 1.0a" in judged.detail and SECRET not in judged.detail


def test_auto_over_https_uses_basic_and_remembers_it(https_shop: WooSimulator, pki: Pki) -> None:
    assert Verdict.DELIVERED == send(target(https_shop, pki)).verdict
    assert Verdict.DELIVERED == send(target(https_shop, pki), version=2).verdict
    assert {"basic"} == set(https_shop.auth_seen)


def test_a_host_that_drops_the_authorization_header_gets_oauth1_not_the_query_form(
    https_shop: WooSimulator, pki: Pki
) -> None:
    assert Verdict.DELIVERED == send(target(https_shop, pki)).verdict
    https_shop.drops_authorization = True  # the host moved to FastCGI: Basic is lost
    assert Verdict.DELIVERED == send(target(https_shop, pki), version=2).verdict
    assert "oauth1" in https_shop.auth_seen and "query" not in https_shop.auth_seen
    before = https_shop.requests.copy()
    assert Verdict.DELIVERED == send(target(https_shop, pki), version=3).verdict
    assert {"GET products": 1, "POST products/batch": 1} == https_shop.requests - before, (
        "OAuth 1.0a was remembered: one lookup, one write, no Basic tried first"
    )


def _watched(t: WooCommerceTarget, seen: list[httpx.Request]) -> WooCommerceTarget:
    async def hook(request: httpx.Request) -> None:
        seen.append(request)

    t._http.event_hooks["request"].append(hook)
    return t


def _secret_in_url(request: httpx.Request) -> bool:
    return SECRET in str(request.url) or "consumer_secret" in request.url.params


@pytest.mark.parametrize(
    "shop_state",
    ["basic seen", "authorization dropped", "behind a tls proxy", "key unknown"],
)
def test_auto_over_https_never_puts_the_secret_in_a_url_even_after_a_restart(
    https_shop: WooSimulator, pki: Pki, shop_state: str
) -> None:
    """Issue 33 item 14: the real stand's access log held the secret five times; WooCommerce
    takes OAuth 1.0a over https (WC_REST_Authentication::authenticate), so auto never needs
    the query form, not when Basic is not seen, not after a restart."""
    https_shop.drops_authorization = shop_state == "authorization dropped"
    https_shop._is_ssl = False if shop_state == "behind a tls proxy" else None
    https_shop.faults.refuse_key = shop_state == "key unknown"
    seen: list[httpx.Request] = []
    for version in (1, 2):
        send(_watched(target(https_shop, pki), seen), version=version)
        auth._worked.clear()  # a restart: nothing remembered
        send(_watched(target(https_shop, pki), seen), version=version + 10)
    assert seen
    assert [] == [str(r.url) for r in seen if _secret_in_url(r)]
    assert "query" not in https_shop.auth_seen


def test_only_woo_auth_query_sends_the_secret_in_the_query(
    https_shop: WooSimulator, pki: Pki
) -> None:
    seen: list[httpx.Request] = []
    judged = send(_watched(target(https_shop, pki, auth_setting="query"), seen))
    assert Verdict.DELIVERED == judged.verdict
    assert seen and all(_secret_in_url(r) for r in seen)
    assert {"query"} == set(https_shop.auth_seen)


def test_auto_over_https_tries_basic_then_oauth1_for_https_then_for_http() -> None:
    assert ("basic", "oauth1", "oauth1-http") == auth.candidates("https://shop.test", "auto")
    assert ("oauth1",) == auth.candidates("http://127.0.0.1:8080", "auto")
    assert ("query",) == auth.candidates("https://shop.test", "query")


def test_behind_a_proxy_php_does_not_see_https_and_oauth1_signed_for_http_works(
    https_shop: WooSimulator, pki: Pki
) -> None:
    https_shop._is_ssl = False  # TLS ends at a proxy that does not tell PHP
    judged = send(target(https_shop, pki))
    assert Verdict.DELIVERED == judged.verdict, judged.detail
    assert {"oauth1"} == set(https_shop.auth_seen)


def test_check_names_the_scheme_that_works_and_which_side_a_401_refuses(
    https_shop: WooSimulator, pki: Pki
) -> None:
    settings = fast_settings(
        "sqlite:///unused.db",
        target="woocommerce",
        woo_url=https_shop.url,
        woo_key=KEY,
        woo_secret=SECRET,
        site_ca_bundle=pki.ca,
    )
    read, write = asyncio.run(_check_woocommerce(settings, None))
    assert read.passed and write.passed
    assert "HTTP Basic" in read.detail

    https_shop.faults.refuse_key = True  # the key was revoked in the shop
    read, _ = asyncio.run(_check_woocommerce(settings, None))
    assert not read.passed and "refused the key" in read.detail

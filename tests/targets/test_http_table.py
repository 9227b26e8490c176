"""One HTTP table for every target (contract 5's table, contract 10: "every target classifies
what the shop answers into the verdicts of section 5"): the same status, the same transport
failure, the same verdict, whichever target met it; a target's difference is said here by name.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable

import httpx
import pytest
from conformance import price

from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import Target
from exchange.targets.bitrix.target import BitrixTarget
from exchange.targets.shop_api.client import SiteClient
from exchange.targets.shop_api.target import ShopApiTarget
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget

D, T, X, P, U = (
    Verdict.DELIVERED,
    Verdict.TEMPORARY,
    Verdict.TERMINAL,
    Verdict.PAUSE,
    Verdict.UNKNOWN,
)
# Contract 5: the status a shop answers to a write, and what it means.
TABLE = {
    200: D,
    301: U,
    400: X,
    401: P,
    403: P,
    404: X,
    405: U,
    408: T,
    410: X,
    413: X,
    418: U,
    422: X,
    425: T,
    429: T,
    500: T,
    501: U,
    502: T,
    503: T,
    504: T,
    505: U,
}
# Bitrix's one difference: after checkauth the exchange lives in the session, so 401/403 and a
# redirect (to a sign-in page) mean it is gone: signed in again once, then a configuration
# verdict (PAUSE) that says so.
BITRIX = {**TABLE, 301: P}

Answer = Callable[[httpx.Request], httpx.Response]


def api(answer: Answer) -> Target:
    client = SiteClient(
        "http://shop.test", "t", timeout=2, concurrency=1, transport=httpx.MockTransport(answer)
    )
    return ShopApiTarget(client, batch_size=1, token=lambda: "t")


def woo(answer: Answer) -> Target:
    def shop(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and "sku" in request.url.params:
            return httpx.Response(200, json=[{"id": 7, "sku": "SKU-1", "parent_id": 0}])
        return answer(request)

    return WooCommerceTarget(
        "http://shop.test",
        lambda: ("ck", "cs"),
        MemorySkuIds(),
        price_fields={"retail": "regular_price"},
        timeout=2,
        transport=httpx.MockTransport(shop),
    )


def bitrix(answer: Answer) -> Target:
    def shop(request: httpx.Request) -> httpx.Response:
        mode = request.url.params.get("mode")
        if mode == "checkauth":
            return httpx.Response(200, content=b"success\nPHPSESSID\nabc\nsessid=s\n")
        if mode == "init":
            return httpx.Response(200, content=b"zip=no\nfile_limit=100000")
        if mode == "file":
            return httpx.Response(200, content=b"success")
        return answer(request)

    return BitrixTarget(
        "http://shop.test/bitrix/admin/1c_exchange.php",
        "u",
        lambda: "p",
        catalog_id="c",
        price_types={"retail": "Розничная"},
        max_import_steps=3,
        timeout=2,
        transport=httpx.MockTransport(shop),
    )


TARGETS = {"api": api, "woocommerce": woo, "bitrix": bitrix}


def ok_body(request: httpx.Request) -> bytes:
    """What each shop answers when it took the write."""
    if "1c_exchange" in request.url.path:
        return "success\nИмпорт успешно завершен.".encode("windows-1251")
    if "batch" in request.url.path:
        return json.dumps({"update": [{"id": 7, "regular_price": "1.00"}]}).encode()
    return b'{"receipt": "r"}'


def send_one(make: Callable[[Answer], Target], answer: Answer) -> Classification:
    target = make(answer)

    async def go() -> Classification:
        try:
            (judged,) = await target.send([price("SKU-1", 1)])
            return judged
        finally:
            await target.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("name", sorted(TARGETS))
@pytest.mark.parametrize("status", sorted(TABLE))
def test_one_status_means_one_verdict_for_every_target(name: str, status: int) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        body = ok_body(request) if status == 200 else b'{"code": "x", "message": "y"}'
        return httpx.Response(status, content=body, headers={"Location": "/login"})

    expected = (BITRIX if name == "bitrix" else TABLE)[status]
    assert expected == send_one(TARGETS[name], answer).verdict


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_certificate_the_service_does_not_trust_pauses_delivery_and_names_the_error(
    name: str,
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        cause = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed")
        raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] self-signed") from cause

    judged = send_one(TARGETS[name], answer)

    assert Verdict.PAUSE == judged.verdict
    assert "CERTIFICATE_VERIFY_FAILED" in judged.detail
    assert "EXCHANGE_SITE_CA_BUNDLE" in judged.detail


@pytest.mark.parametrize("name", sorted(TARGETS))
@pytest.mark.parametrize(
    ("error", "maybe_applied"),
    [(httpx.ConnectError("refused"), False), (httpx.ReadTimeout("no answer"), True)],
    ids=["connect", "read-timeout"],
)
def test_a_transport_failure_is_temporary_and_says_whether_the_write_may_have_landed(
    name: str, error: httpx.TransportError, maybe_applied: bool
) -> None:
    calls = 0

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls > 1:  # WooCommerce reads the price back after an unknown result
            return httpx.Response(200, json=[{"id": 7, "regular_price": "0.50"}])
        raise error

    judged = send_one(TARGETS[name], answer)

    assert (Verdict.TEMPORARY, type(error).__name__) == (judged.verdict, judged.error_class)
    if name != "woocommerce":  # (it read the price back: the unknown is resolved)
        assert maybe_applied == judged.result_unknown

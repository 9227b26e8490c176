"""EXCHANGE_SITE_CA_BUNDLE and the proxy variables apply to every target (contract 10): the
WooCommerce and Bitrix targets verify the shop's certificate against the configured CA, call a
certificate they do not trust a configuration verdict that names the error (never "site busy"
retried forever), and go through the proxy the environment names."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from conformance import price
from securitytools import Pki, server_context

from exchange import app as bootstrap
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.httpsim import LoopbackServer
from exchange.dev.testing import fast_settings
from exchange.dev.woosim import WooSimulator
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import Target
from exchange.targets.bitrix.target import BitrixTarget
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget


def woo_settings(url: str, **extra: Any) -> dict[str, Any]:
    return {"target": "woocommerce", "woo_url": url, "woo_key": "ck", "woo_secret": "cs", **extra}


def bitrix_settings(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "target": "bitrix",
        "bitrix_url": url + PATH,
        "bitrix_user": "u",
        "bitrix_password": "p",
        "bitrix_catalog_id": "c",
        "bitrix_price_types": {"retail": "Розничная"},
        **extra,
    }


SHOPS = {
    "woocommerce": (lambda: WooSimulator("ck", "cs"), woo_settings),
    "bitrix": (lambda: BitrixSimulator("u", "p"), bitrix_settings),
}


@pytest.fixture(params=sorted(SHOPS))
def tls_shop(request: pytest.FixtureRequest, pki: Pki) -> Iterator[tuple[LoopbackServer, Any]]:
    make, settings = SHOPS[request.param]
    shop = make()
    shop.ssl_context = server_context(pki.site_cert, pki.site_key)
    with shop:
        yield shop, settings


def send_one(target: Target) -> Classification:
    async def go() -> Classification:
        try:
            (judged,) = await target.send([price("SKU-1", 1)])
            return judged
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_a_shop_certificate_not_trusted_is_a_configuration_verdict_naming_the_error(
    tls_shop: tuple[LoopbackServer, Any],
) -> None:
    shop, settings = tls_shop
    target = bootstrap.target(fast_settings("sqlite:///unused.db", **settings(shop.url)))

    judged = send_one(target)

    assert Verdict.PAUSE == judged.verdict
    assert "CERTIFICATE_VERIFY_FAILED" in judged.detail
    assert "EXCHANGE_SITE_CA_BUNDLE" in judged.detail


def test_with_the_ca_bundle_the_shop_certificate_is_verified_and_the_price_delivered(
    tls_shop: tuple[LoopbackServer, Any], pki: Pki
) -> None:
    shop, settings = tls_shop
    configured = settings(shop.url, site_ca_bundle=pki.ca)
    target = bootstrap.target(fast_settings("sqlite:///unused.db", **configured))

    assert Verdict.DELIVERED == send_one(target).verdict


@pytest.mark.parametrize("name", sorted(SHOPS))
def test_the_targets_go_through_the_proxy_the_environment_names(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The simulator stands in for the proxy: it answers a request line that names the absolute
    # URL of a host that does not resolve, which only a request through the proxy reaches.
    shop = SHOPS[name][0]()
    with shop:
        monkeypatch.setenv("HTTP_PROXY", shop.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        target: Target
        if name == "woocommerce":
            shop.home = "shop.invalid"  # type: ignore[attr-defined]  # the site's home URL
            target = WooCommerceTarget(
                "http://shop.invalid",
                lambda: ("ck", "cs"),
                MemorySkuIds(),
                price_fields={"retail": "regular_price"},
                timeout=2,
            )
        else:
            target = BitrixTarget(
                "http://shop.invalid" + PATH,
                "u",
                lambda: "p",
                catalog_id="c",
                price_types={"retail": "Розничная"},
                max_import_steps=20,
                timeout=2,
            )
        judged = send_one(target)
    assert Verdict.DELIVERED == judged.verdict, judged.detail

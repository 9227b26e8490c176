"""``exchange check`` as a shop owner reads it (issue 33 item 16, contract 10): a 503 on the
empty test write is the shop busy, not the key's permissions; https:// to a plain-http port is
not an untrusted certificate; a URL that is not the shop's home address is not a refused key
(WooCommerce signs OAuth 1.0a with its home address); wc1c's lazysign, a key inside the
receiver's address, is masked in ``check`` and ``config``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from clitools import run_in_process

from exchange.config_doc import effective
from exchange.dev.bitrixsim import BitrixSimulator
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.woosim import WooSimulator
from exchange.ops.check import Status, check_site, check_target
from exchange.settings import load_settings
from exchange.targets.woocommerce import auth

KEY, SECRET = "ck_owner", "cs_owner"


@pytest.fixture(autouse=True)
def nothing_remembered() -> Iterator[None]:
    auth._worked.clear()
    yield
    auth._worked.clear()


@pytest.fixture
def woo() -> Iterator[WooSimulator]:
    with WooSimulator(KEY, SECRET) as shop:
        yield shop  # type: ignore[misc]


def woo_lines(
    url: str, transport: httpx.AsyncBaseTransport | None = None, secret: str = SECRET
) -> list[tuple[Status, str]]:
    settings = load_settings(target="woocommerce", woo_url=url, woo_key=KEY, woo_secret=secret)
    return [(r.status, r.detail) for r in check_target(settings, transport)]


def test_a_503_on_the_empty_write_is_the_shop_busy_not_the_keys_permissions() -> None:
    def shop(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json=[])
        return httpx.Response(503, content=b"<h1>Briefly unavailable for maintenance</h1>")

    (read, _), (write, why) = woo_lines("https://shop.test", httpx.MockTransport(shop))
    assert (Status.OK, Status.FAIL) == (read, write)
    assert "HTTP 503" in why and "not a matter of the key's permissions" in why
    assert "give the key Read/Write" not in why


def test_a_read_only_key_is_still_told_to_get_read_write(woo: WooSimulator) -> None:
    woo.faults.read_only_key = True
    (_, _), (write, why) = woo_lines(woo.url)
    assert Status.FAIL == write and "give the key Read/Write permissions" in why


def test_https_to_a_plain_http_port_is_not_an_untrusted_certificate(woo: WooSimulator) -> None:
    (read, why), _ = woo_lines(woo.url.replace("http://", "https://"))
    assert Status.FAIL == read
    assert "speaks plain HTTP" in why and "not trusted" not in why, why


def test_https_to_a_plain_http_port_for_the_api_target_too() -> None:
    with SiteSimulator(token="t" * 32) as site:
        settings = load_settings(
            site_url=site.url.replace("http://", "https://"), site_token="t" * 32
        )
        result = check_site(settings)
    assert Status.FAIL == result.status
    assert "speaks plain HTTP" in result.detail and "not trusted" not in result.detail


def test_a_url_that_is_not_the_shops_home_address_is_not_a_refused_key(
    woo: WooSimulator,
) -> None:
    woo.home = "shop.example"  # WordPress's home; the service reaches it by 127.0.0.1:<port>
    (read, why), _ = woo_lines(woo.url)
    assert Status.FAIL == read
    assert "not the shop's home address" in why and "EXCHANGE_WOO_URL=http://shop.example" in why
    assert "refused the key" not in why and SECRET not in why


def test_a_wrong_secret_at_the_home_address_is_still_the_key_refused(woo: WooSimulator) -> None:
    (read, why), _ = woo_lines(woo.url, secret="cs_wrong_one")
    assert Status.FAIL == read and "refused the key" in why
    assert "home address" not in why


@pytest.fixture
def wc1c() -> Iterator[BitrixSimulator]:
    with BitrixSimulator("exchange", "bitrix-pass-1", receiver="wc1c") as site:
        site.lazysign = "9f86d081884c7d659a2feaa0c55ad015"  # an md5, as wc1c makes it
        yield site  # type: ignore[misc]


def test_wc1c_lazysign_is_masked_in_check_and_config(
    wc1c: BitrixSimulator, db_url: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env.update(
        EXCHANGE_DATABASE_URL=db_url,
        EXCHANGE_TARGET="bitrix",
        EXCHANGE_BITRIX_URL=wc1c.receiver_url,
        EXCHANGE_BITRIX_USER="exchange",
        EXCHANGE_BITRIX_PASSWORD="bitrix-pass-1",
        EXCHANGE_BITRIX_CATALOG_ID="catalog-1",
        EXCHANGE_BITRIX_PRICE_TYPES='{"retail": "Розничная"}',
    )
    check = run_in_process(("check",), env, tmp_path)
    config = run_in_process(("config",), env, tmp_path)

    assert "OK   1C-Bitrix exchange" in check.stdout, check.stdout
    for printed in (check.stdout + check.stderr, config.stdout + config.stderr):
        assert wc1c.lazysign not in printed, printed
    assert "lazysign=***" in check.stdout and "lazysign=***" in config.stdout
    settings = load_settings(target="bitrix", bitrix_url=wc1c.receiver_url)
    assert wc1c.lazysign in settings.secrets(), "logs mask it by value too"
    shown = dict(effective(settings))["EXCHANGE_BITRIX_URL"]
    assert shown.endswith("?wc1c-receiver=1&lazysign=***&get_param"), shown


def test_check_says_the_api_answers_at_rest_route_with_plain_permalinks() -> None:
    with WooSimulator(KEY, SECRET, pretty_permalinks=False) as shop:
        (read, how), (write, _) = woo_lines(shop.url)  # type: ignore[attr-defined]
    assert (Status.OK, Status.OK) == (read, write)
    assert "?rest_route=" in how and "Plain" in how

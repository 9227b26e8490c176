"""``exchange check`` checks the chosen target (contract 10): WooCommerce's key may read and
write; Bitrix's checkauth and init succeed. Against the simulators, over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.woosim import WooSimulator
from exchange.ops.check import Status, check_target
from exchange.settings import load_settings


@pytest.fixture
def woo() -> Iterator[WooSimulator]:
    simulator = WooSimulator(key="ck_k", secret="cs_s")
    simulator.start()
    yield simulator
    simulator.stop()


@pytest.fixture
def bitrix() -> Iterator[BitrixSimulator]:
    simulator = BitrixSimulator("exchange", "secret", zip=True, file_limit=4096)
    simulator.start()
    yield simulator
    simulator.stop()


def woo_check(site: WooSimulator, secret: str = "cs_s") -> list[tuple[Status, str]]:
    settings = load_settings(
        target="woocommerce", woo_url=site.url, woo_key="ck_k", woo_secret=secret
    )
    return [(r.status, r.detail) for r in check_target(settings)]


def test_woocommerce_key_that_reads_and_writes_passes(woo: WooSimulator) -> None:
    assert [Status.OK, Status.OK] == [status for status, _ in woo_check(woo)]
    assert 0 == sum(len(woo.history(s)) for s in ("PARENT-1",)), "nothing written"


def test_woocommerce_read_only_key_fails_the_write_check(woo: WooSimulator) -> None:
    woo.faults.read_only_key = True
    (read, _), (write, reason) = woo_check(woo)
    assert (Status.OK, Status.FAIL) == (read, write)
    assert "Read/Write" in reason


def test_woocommerce_refused_key_fails_and_never_shows_the_secret(woo: WooSimulator) -> None:
    (read, reason), (write, _) = woo_check(woo, secret="cs_wrong-secret")
    assert (Status.FAIL, Status.SKIP) == (read, write)
    assert "cs_wrong-secret" not in reason


def bitrix_check(site: BitrixSimulator, password: str = "secret") -> tuple[Status, str]:
    settings = load_settings(
        target="bitrix",
        bitrix_url=site.url + PATH,
        bitrix_user="exchange",
        bitrix_password=password,
        bitrix_catalog_id="catalog-1",
    )
    (result,) = check_target(settings)
    return result.status, result.detail


def test_bitrix_checkauth_and_init_pass_and_say_what_init_answered(
    bitrix: BitrixSimulator,
) -> None:
    assert (Status.OK, "zip=yes file_limit=4096") == bitrix_check(bitrix)
    assert (1, 1) == (bitrix.requests["checkauth"], bitrix.requests["init"])


def test_bitrix_refused_password_fails(bitrix: BitrixSimulator) -> None:
    status, reason = bitrix_check(bitrix, password="wrong-password")
    assert Status.FAIL == status
    assert "checkauth" in reason and "wrong-password" not in reason

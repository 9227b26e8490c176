"""``exchange check`` checks the chosen target (contract 10): WooCommerce's key may read and
write; Bitrix's checkauth and init succeed. Against the simulators, over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exchange.db.engine import make_engine
from exchange.db.schema import aggregates, cml_catalog
from exchange.dev.bitrixsim import PATH, BitrixSimulator
from exchange.dev.catalogue import Catalogue
from exchange.dev.dbkit import SqliteTemplate
from exchange.dev.ozonsim import OzonSimulator
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


# -- Ozon (contract 14) ------------------------------------------------------------------------


@pytest.fixture
def ozon() -> Iterator[OzonSimulator]:
    simulator = OzonSimulator("836741", "ozon-key")
    simulator.start()
    yield simulator
    simulator.stop()


def ozon_check(
    site: OzonSimulator, tmp_path: Path, key: str = "ozon-key", **extra: object
) -> list[tuple[Status, str, str]]:
    key_file = tmp_path / "ozon.key"
    key_file.write_text(key, encoding="utf-8")
    options: dict[str, object] = {
        "target": "ozon",
        "ozon_api_url": site.url,
        "ozon_client_id": "836741",
        "ozon_api_key_file": str(key_file),
        "database_url": f"sqlite:///{tmp_path / 'none.db'}",
    }
    settings = load_settings(**{**options, **extra})
    return [(r.status, r.what, r.detail) for r in check_target(settings)]


def test_ozon_key_accepted_may_write_and_the_limits_said_in_words(
    ozon: OzonSimulator, tmp_path: Path
) -> None:
    (accepted, writes, sample, limits) = ozon_check(ozon, tmp_path)
    assert accepted[0] is Status.OK and "roles Admin" in accepted[2] and "expires" in accepted[2]
    assert writes[0] is Status.OK
    assert sample[0] is Status.SKIP, "no database to sample"
    assert limits[0] is Status.OK and "10 price updates of one product an hour" in limits[2]
    assert ozon.requests["/v1/product/import/prices"] == 0, "nothing written"


def test_ozon_key_that_may_only_read_fails_the_write_check(
    ozon: OzonSimulator, tmp_path: Path
) -> None:
    ozon.faults.roles = "read"
    (accepted, writes, _, _) = ozon_check(ozon, tmp_path)
    assert (accepted[0], writes[0]) == (Status.OK, Status.FAIL)
    assert "role that may set prices" in writes[2]


def test_ozon_refused_key_fails_and_never_shows_it(ozon: OzonSimulator, tmp_path: Path) -> None:
    (accepted, writes, *_) = ozon_check(ozon, tmp_path, key="a-wrong-key")
    assert (accepted[0], writes[0]) == (Status.FAIL, Status.SKIP)
    assert "Invalid Api-Key" in accepted[2] and "a-wrong-key" not in accepted[2]
    assert "the key is refused" in writes[2]


def test_ozon_checks_after_a_wrong_url_say_the_url_not_the_key(
    ozon: OzonSimulator, tmp_path: Path
) -> None:
    """A wrong ozon_api_url path (Ozon's 404 code 12): the key's check says to check
    ozon_api_url, and the checks skipped after it say so too, never "the key is refused" of a
    key Ozon never judged (review ozon, item 7)."""
    (accepted, writes, sample, _) = ozon_check(ozon, tmp_path, ozon_api_url=f"{ozon.url}/api")
    assert accepted[0] is Status.FAIL and "check ozon_api_url" in accepted[2], accepted
    for skipped in (writes, sample):
        assert skipped[0] is Status.SKIP and "ozon_api_url" in skipped[2], skipped
        assert "key is refused" not in skipped[2]


@pytest.mark.parametrize("source", ["sku", "article"])
def test_ozon_a_sample_of_skus_resolves_to_offer_ids(
    ozon: OzonSimulator, tmp_path: Path, source: str, sqlite_template: SqliteTemplate
) -> None:
    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    with engine.begin() as connection:
        for sku in ("SKU-1", "SKU-2", "NOSUCH-3"):
            connection.execute(
                aggregates.insert().values(
                    kind="price", aggregate=sku, sku=sku, price_type="retail"
                )
            )
        connection.execute(
            cml_catalog.insert().values(
                kind="article", key="SKU-1", value="ART-1", updated_at=datetime.now(UTC)
            )
        )
    engine.dispose()
    ozon.hold(Catalogue(skus=["SKU-1", "SKU-2", "ART-1"]))
    settings = load_settings(
        target="ozon",
        ozon_api_url=ozon.url,
        ozon_client_id="836741",
        ozon_api_key="ozon-key",
        database_url=url,
        sku_source=source,
    )
    (_, _, sample, _) = [(r.status, r.detail) for r in check_target(settings)]
    assert sample[0] is Status.FAIL
    if source == "sku":
        assert sample[1] == "1 of 3 not in the seller's account: NOSUCH-3"
    else:
        assert sample[1] == "2 of 3 without an article: NOSUCH-3, SKU-2"


def test_ozon_an_account_in_another_currency_fails_the_sample_line(
    ozon: OzonSimulator, tmp_path: Path, sqlite_template: SqliteTemplate
) -> None:
    """rev32p (Ozon): an account settled in BYN with the channel's currency RUB had every
    price quarantined while check passed. §1.1: currency_code must be the account's; the
    sample's prices say which it is, and the line says what to set."""
    url = sqlite_template.copy_to(tmp_path / "exchange.db")
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(
            aggregates.insert().values(
                kind="price", aggregate="SKU-1", sku="SKU-1", price_type="retail"
            )
        )
    engine.dispose()
    ozon.currency = "BYN"
    ozon.hold(Catalogue(skus=["SKU-1"]))
    settings = load_settings(
        target="ozon",
        ozon_api_url=ozon.url,
        ozon_client_id="836741",
        ozon_api_key="ozon-key",
        database_url=url,
    )
    (_, _, sample, _) = [(r.status, r.detail) for r in check_target(settings)]
    assert sample[0] is Status.FAIL, sample
    assert sample[1] == (
        "the account's prices are in BYN, this channel's currency is RUB: set currency = "
        '"BYN" for it (Ozon refuses a price in another currency than the account\'s)'
    )

"""Every real CommerceML sample that carries prices, sent by the 1C client emulator to a real
``exchange serve``: the exact intents staged (count, SKUs, price types, decimals, currencies),
checked against an independent reading of the same files; then through the pipeline to the
site simulator."""

from __future__ import annotations

import json
import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from web_helpers import PASSWORD, USER

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, staging
from exchange.dev.onec_client import OneCClient
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fast_settings, run_worker

Intent = tuple[str, str, str, str]  # sku, price_type, price, currency


@dataclass(frozen=True)
class Sample:
    files: tuple[tuple[str, str], ...]  # (name 1C sends, path under the samples folder)
    price_types: dict[str, str]
    count: int
    spot: Intent
    use_zip: bool = True


SAMPLES = {
    "argentcrusade-3.1": Sample(
        (("prices.xml", "argentcrusade-commerceml/prices-example.xml"),),
        {"d023050c-8ecc-11e6-80cc-8ba31e8e113c": "retail"},  # mapped by Ид: no catalogue
        3,
        ("0eac4b03-969e-11e6-80cc-8ba31e8e113c", "retail", "790", "RUB"),
        use_zip=False,
    ),
    "bigperson-2.08": Sample(
        (("offers.xml", "bigperson-exchange1c/offers.xml"),),
        {"ЦПУ": "retail", "ЦП": "wholesale"},  # «Цена поставщика» (purchase) never sent
        4,
        (
            "ffce323d-c133-11e8-8111-0050569b2b72#8a4e5ea9-d129-11e8-8112-0050569b2b72",
            "retail",
            "",
            "RUB",
        ),
    ),
    "carono-2.07": Sample(
        (
            ("import.xml", "carono-php-commerceml/import.xml"),
            ("offers.xml", "carono-php-commerceml/offers.xml"),
        ),
        {"Розничная": "retail"},
        5,
        (
            "bd72d910-55bc-11d9-848a-00112f43529a#90c55447-d3a8-11e4-9423-e0cb4ed5eed4",
            "retail",
            "1719",
            "RUB",
        ),
        use_zip=False,
    ),
    "dobromyslov-2.07-parts": Sample(
        (
            ("import0_1.xml", "dobromyslov-commerceml-parser/import0_1.xml"),
            ("offers0_1.xml", "dobromyslov-commerceml-parser/offers0_1.xml"),
        ),
        {"BASE": "retail"},
        44,
        ("bd8c4e15-18f9-11e7-80c2-0cc47ab29cd1", "retail", "100", "RUB"),
    ),
    "gillbeits-2.09-split": Sample(
        (
            (
                "import___b815e2db-7a65-4265-9241-5f0c4f0565a7.xml",
                "gillbeits-commerceml/import___b815e2db-7a65-4265-9241-5f0c4f0565a7.xml",
            ),
            (
                "prices___d66a6b51-ce9c-4e7a-8c7c-25079721107f.xml",
                "gillbeits-commerceml/prices___d66a6b51-ce9c-4e7a-8c7c-25079721107f.xml",
            ),
        ),
        {"Типовое соглашение Интернет-МХТ": "retail"},  # named only in the catalogue file
        978,
        ("26b0dc1e-4d66-11e4-99fe-003048c64779", "retail", "181", "RUB"),
        use_zip=False,
    ),
    "bitrix-module-3.1-folders": Sample(
        (
            ("import.xml", "irpsv-commerceml/bitrix-module-6/import.xml"),
            ("goods/1/prices.xml", "irpsv-commerceml/bitrix-module-6/goods/1/prices.xml"),
        ),
        {"Отпускная цена": "retail"},
        86,
        (
            "235ccc6d-ab81-11e4-944a-00155d020201#a5abd77f-93f6-11e5-9468-00155d020201",
            "retail",
            "2042.66",
            "RUB",
        ),
    ),
    "cs-cart-2.04": Sample(
        (
            ("import.xml", "irpsv-commerceml/cs-cart/import.xml"),
            ("offers.xml", "irpsv-commerceml/cs-cart/offers.xml"),
        ),
        {"инет": "retail"},
        1455,
        (
            "bd72d910-55bc-11d9-848a-00112f43529a#3df1947d-7886-11df-b33a-0011955cba6b",
            "retail",
            "3159.00",
            "RUB",
        ),
    ),
    "1c-example-2.04": Sample(
        (
            ("import.xml", "irpsv-commerceml/off-doc-1c/import.xml"),
            ("offers.xml", "irpsv-commerceml/off-doc-1c/offers.xml"),
        ),
        {"Розничная": "retail", "Оптовая": "wholesale"},
        4,
        (
            "05e26d70-01e4-11dc-a411-00055d80a2d1#05e26d76-01e4-11dc-a411-00055d80a2d1",
            "wholesale",
            "",
            "USD",
        ),
        use_zip=False,
    ),
    "ready-script-2.05": Sample(
        (("offers.xml", "irpsv-commerceml/ready-script/offers.xml"),),
        {"Розничная": "retail"},
        2,
        ("421a531a-995e-11e3-9e81-00241d337dcd", "retail", "12356.00", "RUB"),
    ),
    "real-ut101-2.05": Sample(
        (("offers.xml", "irpsv-commerceml/real-1c-ut101/offers.xml"),),
        {"Отпускная цена": "retail"},  # the type's Ид is its name
        84,
        (
            "235ccc6d-ab81-11e4-944a-00155d020201#a5abd77f-93f6-11e5-9468-00155d020201",
            "retail",
            "2042.66",
            "RUB",
        ),
    ),
    "umi-cms-2.04": Sample(
        (("offers.xml", "irpsv-commerceml/umi-cms/offers.xml"),),
        {"инет": "retail"},
        14,
        ("", "retail", "", "RUB"),
        use_zip=False,
    ),
    "stee1cat-3.1-no-offers": Sample(
        (
            (
                "offers___cd9ce019-f901-4dd4-aed7-a76bec5faac2.xml",
                "stee1cat-1c-exchange/offers___cd9ce019-f901-4dd4-aed7-a76bec5faac2.xml",
            ),
        ),
        {"Розничная": "retail"},
        0,
        ("", "", "", ""),
    ),
}


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _child(element: ET.Element, name: str) -> str:
    for child in element:
        if _local(child.tag) == name:
            return (child.text or "").strip()
    return ""


def oracle(files: list[bytes], price_types: dict[str, str]) -> list[Intent]:
    """The intents the files should give, read independently with ElementTree."""
    types: dict[str, tuple[str, str]] = {}
    intents: list[Intent] = []
    for data in files:
        root = ET.fromstring(data)
        for element in root.iter():
            if _local(element.tag) == "ТипЦены":
                types[_child(element, "Ид")] = (
                    _child(element, "Наименование"),
                    _child(element, "Валюта"),
                )
        for offer in root.iter():
            if _local(offer.tag) != "Предложение":
                continue
            for price in offer.iter():
                if _local(price.tag) != "Цена":
                    continue
                type_id = _child(price, "ИдТипаЦены")
                name, type_currency = types.get(type_id, (type_id, ""))
                code = price_types.get(type_id) or price_types.get(name)
                if not code:
                    continue
                currency = _child(price, "Валюта") or type_currency or "RUB"
                if currency.lower() in ("руб", "rub", "rur", "643"):
                    currency = "RUB"
                value = str(Decimal(_child(price, "ЦенаЗаЕдиницу")))
                intents.append((_child(offer, "Ид"), code, value, currency))
    return sorted(intents)


def staged(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return [
            dict(r) for r in connection.execute(select(staging).order_by(staging.c.id)).mappings()
        ]


def as_intent(row: dict[str, Any]) -> Intent:
    payload = json.loads(row["payload"])
    assert row["aggregate"] == f"{payload['sku']}/{payload['price_type']}"
    return (payload["sku"], payload["price_type"], payload["price"], payload["currency"])


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_price_sample_stages_exactly_its_intents(
    name: str, samples: Path, serve: Callable[..., str], db: Engine
) -> None:
    sample = SAMPLES[name]
    files = [(sent, (samples / path).read_bytes()) for sent, path in sample.files]
    base = serve(**{"1c_price_types": sample.price_types, "1c_file_limit": 64 * 1024})
    client = OneCClient(base, USER, PASSWORD, use_zip=sample.use_zip)
    try:
        log = client.exchange(files)
    finally:
        client.close()
    assert {n: a.status for n, a in log.answers.items()} == {sent: "success" for sent, _ in files}
    rows = staged(db)
    got = sorted(as_intent(row) for row in rows)
    assert sample.count == len(got)
    assert oracle([data for _, data in files], sample.price_types) == got
    if sample.count:
        sku, price_type, price, currency = sample.spot
        assert any(
            (not sku or i[0] == sku)
            and i[1] == price_type
            and (not price or i[2] == price)
            and i[3] == currency
            for i in got
        ), sample.spot
        # one package, one version; the source names the file and its ДатаФормирования
        assert len({row["aggregate_version"] for row in rows}) == 1
        assert all(row["source_ref"].startswith("1C exchange ") for row in rows)
    with transaction(db, read_only=True) as connection:
        outcomes = [r.outcome for r in connection.execute(select(cml_exchanges))]
    assert "failure" not in outcomes


def test_bitrix_3x_prices_keep_a_price_currency_that_differs_from_its_type(
    samples: Path, serve: Callable[..., str], db: Engine
) -> None:
    sample = SAMPLES["bitrix-module-3.1-folders"]
    files = [(sent, (samples / path).read_bytes()) for sent, path in sample.files]
    client = OneCClient(serve(**{"1c_price_types": sample.price_types}), USER, PASSWORD)
    try:
        client.exchange(files)
    finally:
        client.close()
    currencies = [as_intent(row)[3] for row in staged(db)]
    assert (78, 8) == (currencies.count("RUB"), currencies.count("USD"))


def test_a_sample_goes_through_the_pipeline_to_the_site(
    db_url: str, samples: Path, serve: Callable[..., str], db: Engine
) -> None:
    sample = SAMPLES["dobromyslov-2.07-parts"]
    files = [(sent, (samples / path).read_bytes()) for sent, path in sample.files]
    client = OneCClient(serve(**{"1c_price_types": sample.price_types}), USER, PASSWORD)
    try:
        client.exchange(files)
    finally:
        client.close()
    expected = oracle([data for _, data in files], sample.price_types)
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        settings = fast_settings(db_url, site.url)
        run_worker(bootstrap.worker(settings, db, rng=random.Random(3)))
        effects = site.effects()
    delivered = sorted(
        (e.payload["sku"], e.payload["price_type"], e.payload["price"], e.payload["currency"])
        for e in effects
    )
    assert expected == delivered


def _products(data: bytes) -> dict[str, str]:
    """``Товар``/``Ид`` -> ``Товар``/``Наименование`` of a catalogue, read independently."""
    return {
        _child(good, "Ид"): " ".join(_child(good, "Наименование").split())
        for good in ET.fromstring(data).iter()
        if _local(good.tag) == "Товар"
    }


def _unnamed(data: bytes, generated_at: str) -> bytes:
    """The offers file with no ``Наименование`` in its offers, as 1C's split prices files
    come (gillbeits-commerceml/prices___…: offers of Ид and prices only), and its own
    ДатаФормирования (so that each exchange below stages it anew)."""
    text = data.decode("utf-8-sig")
    head, _, offers = text.partition("<Предложения>")
    offers = re.sub(r"<Наименование>[^<]*</Наименование>", "", offers)
    head = re.sub(r'ДатаФормирования="[^"]*"', f'ДатаФормирования="{generated_at}"', head)
    return f"{head}<Предложения>{offers}".encode()


def test_offers_without_names_are_named_by_the_import_xml_of_their_exchange(
    samples: Path, serve: Callable[..., str], db: Engine
) -> None:
    """Real 1C files (carono-php-commerceml, one exchange: import.xml then offers.xml): an
    offer without a ``Наименование`` is named as its product in import.xml; an offer's own
    name (1C's «Товар (характеристика)») stays; an exchange without import.xml names none."""
    folder = samples / "carono-php-commerceml"
    catalogue, offers = (folder / "import.xml").read_bytes(), (folder / "offers.xml").read_bytes()
    products = _products(catalogue)
    base = serve(**{"1c_price_types": {"Розничная": "retail"}})

    def exchange(files: list[tuple[str, bytes]]) -> dict[str, str | None]:
        before = {row["id"] for row in staged(db)}
        client = OneCClient(base, USER, PASSWORD, use_zip=False)
        try:
            log = client.exchange(files)
        finally:
            client.close()
        assert {n: a.status for n, a in log.answers.items()} == {n: "success" for n, _ in files}
        return {r["aggregate"]: r["name"] for r in staged(db) if r["id"] not in before}

    # The real file first: its own ДатаФормирования is the oldest, and a package formed before
    # one already staged is refused (contract 9a as the attack of issue 33 left it).
    own = exchange([("import.xml", catalogue), ("offers.xml", offers)])
    assert "Женские ботфорты коричневые (38)" in own.values()
    assert all(name and name.startswith(products[a.partition("#")[0]]) for a, name in own.items())
    alone = exchange([("offers.xml", _unnamed(offers, "2030-01-01T00:00:00"))])
    assert len(alone) == 5 and set(alone.values()) == {None}
    named = exchange(
        [("import.xml", catalogue), ("offers.xml", _unnamed(offers, "2030-01-02T00:00:00"))]
    )
    assert named == {aggregate: products[aggregate.partition("#")[0]] for aggregate in alone}, named
    assert set(named.values()) == {"Женские ботфорты коричневые", "Ботинки женские демисезонные"}

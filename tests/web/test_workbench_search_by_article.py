"""Search by what people know in every SKU mode (issue 34 item 8): with SKUs that are 1C ids
(the default, ``EXCHANGE_1C_SKU=id``), the 1C article from the catalogue file finds the
product; results lead with the product's name and its price; what is found is paged beyond
200; «Обмены 1С» is paged too."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert
from web_helpers import PASSWORD as ONEC_PASSWORD
from web_helpers import USER as ONEC_USER
from workbench_helpers import add_operator, close_all, signed_in

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges
from exchange.dev.onec_client import OneCClient
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take

BOOTS = "bd72d910-55bc-11d9-848a-00112f43529a"  # «Женские ботфорты коричневые», Б-130001


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


def _cells(page: str, cls: str) -> list[str]:
    return [
        html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
        for c in re.findall(rf'<td class="{cls}"[^>]*>(.*?)</td>', page, re.S)
    ]


def test_the_1c_article_finds_a_product_whose_sku_is_its_1c_id(
    samples: Path, serve: Callable[..., str], db: Engine
) -> None:
    """Real 1C files (carono-php-commerceml: import.xml with each product's «Артикул», then
    offers.xml with offers of its characteristics, «Ид» guid#guid): the article, as a person
    types it, finds the product's offers; each row leads with its name and price."""
    folder = samples / "carono-php-commerceml"
    base = serve(**{"1c_price_types": {"Розничная": "retail"}})
    add_operator(db, "olga", "operator")
    client = OneCClient(base, ONEC_USER, ONEC_PASSWORD, use_zip=False)
    try:
        client.exchange(
            [
                ("import.xml", (folder / "import.xml").read_bytes()),
                ("offers.xml", (folder / "offers.xml").read_bytes()),
            ]
        )
    finally:
        client.close()
    take(db, None, dict(DEFAULT_KINDS), datetime.now(UTC))
    operator = signed_in(base, "olga")
    for term in ("Б-130001", "б-130001", "б-13000"):
        page = operator.get("/find", params={"q": term}).text
        skus = re.findall(r"/message/price\.([0-9a-f-]{36})", page)
        assert skus and set(skus) == {BOOTS}, (term, skus)
        assert "Найдено: 2" in page, term
    names = _cells(page, "product-name")
    assert names and all(n.startswith("Женские ботфорты коричневые") for n in names), names
    prices = _cells(page, "num price nowrap")
    assert prices and all(p.endswith("\xa0₽") and "," in p for p in prices), prices
    header = re.search(r"<thead.*?</thead>", page, re.S)
    assert header and header.group(0).index("Товар") < header.group(0).index("Код сообщения")
    assert "Найдено: 3" in operator.get("/find", params={"q": "б- 1300"}).text  # Б- 130005


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_what_is_found_is_paged_beyond_200(serve: Callable[..., str], db: Engine) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    stage(db, [price_row(f"ART-{i:04d}", 1, aggregate=f"ART-{i:04d}/retail") for i in range(205)])
    take(db, None, dict(DEFAULT_KINDS), datetime.now(UTC))
    client = signed_in(base, "olga")
    first = client.get("/find", params={"q": "art-"}).text
    assert "Найдено: 205" in first and "Страница 1 из 2" in first
    assert len(re.findall(r'<td class="id" data-label="Код сообщения">', first)) == 200
    second = client.get("/find", params={"q": "art-", "page": "2"}).text
    assert len(re.findall(r'<td class="id" data-label="Код сообщения">', second)) == 5
    assert "Страница 2 из 2" in second
    # the oldest five, which the first page could not show
    assert {f"ART-{i:04d}" for i in range(5)} == set(
        re.findall(r"ART-\d{4}", second.replace("<wbr>", ""))
    )
    beyond = client.get("/find", params={"q": "art-", "page": "99"})
    assert beyond.status_code == 200 and "к первой странице" in beyond.text


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_1c_exchanges_are_paged(serve: Callable[..., str], db: Engine) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    start = datetime.now(UTC) - timedelta(days=1)
    with transaction(db) as connection:
        connection.execute(
            insert(cml_exchanges),
            [
                {
                    "exchange": "s",
                    "filename": f"offers-{i:03d}.xml",
                    "started_at": start + timedelta(seconds=i),
                    "outcome": "nothing",
                }
                for i in range(205)
            ],
        )
    client = signed_in(base, "olga")
    first = html.unescape(client.get("/exchanges").text)
    assert "offers-204.xml" in first.replace("<wbr>", "") and "Страница 1 из 2" in first
    second = client.get("/exchanges", params={"page": "2"}).text.replace("<wbr>", "")
    assert re.findall(r"offers-\d{3}\.xml", second) == [
        f"offers-{i:03d}.xml" for i in range(4, -1, -1)
    ]

"""A 1C exchange keeps each offer's ``Наименование`` as the product's name (issue 24, item 5;
contract 1): staged beside the price, read in this process or in a reader process of its own
(the spool, and SQLite's scratch file), never inside the payload a shop gets; an offer
without one has no name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from exchange.db.engine import transaction
from exchange.db.schema import staging
from exchange.intake.commerceml.publish import SESSION_NAMES, import_file
from exchange.intake.commerceml.reading import ReaderPool

pytestmark = pytest.mark.subprocess  # the reader process of ReaderPool

OFFERS = """<?xml version="1.0" encoding="UTF-8"?>
<КоммерческаяИнформация ВерсияСхемы="2.05" ДатаФормирования="2026-12-02T06:00:00">
<ПакетПредложений СодержитТолькоИзменения="true">
<Ид>p1</Ид><Наименование>Пакет предложений</Наименование>
<ТипыЦен><ТипЦены><Ид>t-retail</Ид><Наименование>Розничная</Наименование>
<Валюта>RUB</Валюта></ТипЦены></ТипыЦен>
<Предложения>
<Предложение><Ид>SKU-1</Ид><Наименование>  Кофе   молотый
 250 г</Наименование>
<Цены><Цена><ИдТипаЦены>t-retail</ИдТипаЦены><ЦенаЗаЕдиницу>840.00</ЦенаЗаЕдиницу>
</Цена></Цены></Предложение>
<Предложение><Ид>SKU-2</Ид>
<Цены><Цена><ИдТипаЦены>t-retail</ИдТипаЦены><ЦенаЗаЕдиницу>10.00</ЦенаЗаЕдиницу>
</Цена></Цены></Предложение>
</Предложения>
</ПакетПредложений>
</КоммерческаяИнформация>
"""


@pytest.fixture
def pool() -> Iterator[ReaderPool]:
    readers = ReaderPool(1)
    yield readers
    readers.close()


@pytest.mark.parametrize("in_a_process", [False, True])
def test_an_offers_name_is_staged_beside_its_price_never_in_it(
    engine: Engine, tmp_path: Path, pool: ReaderPool, in_a_process: bool
) -> None:
    path = tmp_path / "offers.xml"
    path.write_text(OFFERS, encoding="utf-8")
    outcome = import_file(
        engine,
        path,
        name="offers.xml",
        price_types={"Розничная": "retail"},
        sku_mode="id",
        pool=pool if in_a_process else None,
    )
    assert outcome.outcome == "staged", outcome
    with transaction(engine, read_only=True) as connection:
        rows = {
            aggregate: (name, payload)
            for aggregate, name, payload in connection.execute(
                select(staging.c.aggregate, staging.c.name, staging.c.payload)
            )
        }
    assert rows["SKU-1/retail"][0] == "Кофе молотый 250 г"
    assert rows["SKU-2/retail"][0] is None
    assert all("Кофе" not in payload and "name" not in payload for _, payload in rows.values())


CATALOGUE = """<?xml version="1.0" encoding="UTF-8"?>
<КоммерческаяИнформация ВерсияСхемы="2.05" ДатаФормирования="2026-12-02T05:59:00">
<Каталог СодержитТолькоИзменения="false"><Ид>c1</Ид><Наименование>Каталог товаров</Наименование>
<Товары>
<Товар><Ид>SKU-2</Ид><Наименование>Чай
 зелёный</Наименование>
<ЗначенияРеквизитов><ЗначениеРеквизита><Наименование>Вид номенклатуры</Наименование>
<Значение>Товар</Значение></ЗначениеРеквизита></ЗначенияРеквизитов></Товар>
<Товар><Ид>SKU-1</Ид><Наименование>Кофе</Наименование></Товар>
<Товар><Ид>BOOT</Ид><Наименование>Ботфорты</Наименование></Товар>
</Товары>
</Каталог>
</КоммерческаяИнформация>
"""

CHARACTERISTIC = """<Предложение><Ид>BOOT#38</Ид>
<Цены><Цена><ИдТипаЦены>t-retail</ИдТипаЦены><ЦенаЗаЕдиницу>99.00</ЦенаЗаЕдиницу>
</Цена></Цены></Предложение>
</Предложения>"""


@pytest.mark.parametrize("in_a_process", [False, True])
def test_an_offer_without_a_name_takes_its_products_from_the_exchanges_import_xml(
    engine: Engine, tmp_path: Path, pool: ReaderPool, in_a_process: bool
) -> None:
    """1C sends import.xml, then offers.xml, in one exchange: an offer that names nothing is
    named as its product (``Товар``/``Наименование``; an offer of a characteristic,
    ``<product>#<characteristic>``, as its product); an offer's own name stays its own."""
    kept = tmp_path / SESSION_NAMES
    for name, text in (
        ("import.xml", CATALOGUE),
        ("offers.xml", OFFERS.replace("</Предложения>", CHARACTERISTIC)),
    ):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        outcome = import_file(
            engine,
            path,
            name=name,
            price_types={"Розничная": "retail"},
            sku_mode="id",
            pool=pool if in_a_process else None,
            session_names=kept,
        )
        assert outcome.outcome == ("catalogue" if name == "import.xml" else "staged"), outcome
    with transaction(engine, read_only=True) as connection:
        names = dict(connection.execute(select(staging.c.aggregate, staging.c.name)).all())
    assert names == {
        "SKU-1/retail": "Кофе молотый 250 г",  # its own
        "SKU-2/retail": "Чай зелёный",  # its product's
        "BOOT#38/retail": "Ботфорты",  # a characteristic's: its product's
    }


def test_without_the_exchanges_import_xml_an_offer_without_a_name_has_none(
    engine: Engine, tmp_path: Path
) -> None:
    """Names are the exchange's own: another exchange's catalogue (another folder) names
    nothing here."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "import.xml").write_text(CATALOGUE, encoding="utf-8")
    (tmp_path / "offers.xml").write_text(OFFERS, encoding="utf-8")
    for path in (other / "import.xml", tmp_path / "offers.xml"):
        import_file(
            engine,
            path,
            name=path.name,
            price_types={"Розничная": "retail"},
            sku_mode="id",
            session_names=path.parent / SESSION_NAMES,
        )
    with transaction(engine, read_only=True) as connection:
        names = dict(connection.execute(select(staging.c.aggregate, staging.c.name)).all())
    assert names == {"SKU-1/retail": "Кофе молотый 250 г", "SKU-2/retail": None}

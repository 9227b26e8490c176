"""Search finds what people know (issue 24, item 5), in Debian's chromium: the beginning of a
SKU, any word of the 1C document («offers.xml»), a product's name from the source; each result
says its price and date; a 1C exchange's row on «Обмены 1С» links to the prices of that file;
and the name, kept beside the message, never reaches the shop."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_helpers import new_page, shot, sign_in
from sqlalchemy import Engine, insert
from workbench_helpers import add_operator, deliver

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, cml_packages
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import price_row, stage

REF = "1C exchange offers.xml 2026-12-02T06:00:00"
PACKAGE = 2**62 + 7


def _exchange(engine: Engine) -> None:
    """What a staged 1C exchange leaves: its row on «Обмены 1С» and its package."""
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange="s1",
                filename="offers.xml",
                started_at=now,
                finished_at=now,
                outcome="staged",
                detail="2 prices",
                intents=2,
                version=PACKAGE,
            )
        )
        connection.execute(
            insert(cml_packages).values(
                digest="d" * 64, version=PACKAGE, source_ref=REF, intents=2, staged_at=now
            )
        )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_find_by_a_word_of_the_1c_document_a_sku_start_and_a_name_with_price_and_date(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    stage(
        db,
        [
            price_row("SKU-0042", 1, "840.00", source_ref=REF, name="Кофе молотый 250 г"),
            price_row("SKU-0043", 1, "1299.90", source_ref=REF, name="Чай чёрный 100 г"),
            price_row("SKU-9000", 1, "10.00"),
        ],
    )
    with SiteSimulator(token="test-token", faults=Faults(seed=1), keep_requests=True) as site:
        deliver(db_url, site)
        bodies = [r.body.decode("utf-8", "replace") for r in site.received()]
    names = ("Кофе", "Чай", json.dumps("Кофе")[1:-1], json.dumps("Чай")[1:-1])  # also escaped
    assert bodies and not any(n in b for n in names for b in bodies)  # never sent
    _exchange(db)
    page = new_page(browser)
    sign_in(page, base, "olga")

    page.goto(f"{base}/exchanges")
    link = page.locator("td.intents a")
    assert link.inner_text() == "цены из этого файла: 2"
    link.click()
    rows = page.locator("table.messages tbody tr")
    assert rows.count() == 2
    assert page.locator("#found").inner_text() == "Найдено: 2"

    page.goto(f"{base}/find?q=offers.xml")  # a word inside the 1C document
    assert page.locator("table.messages tbody tr").count() == 2
    page.goto(f"{base}/find?q=SKU-004")  # the beginning of a SKU
    assert page.locator("table.messages tbody tr").count() == 2
    page.fill("main input[name=q]", "кофе")  # a word of a product's name, as people type it
    page.click("main form.filters button[type=submit]")
    row = page.locator("table.messages tbody tr")
    assert row.count() == 1
    assert row.locator(".product").inner_text() == "Кофе молотый 250 г"
    assert row.locator("td.price").inner_text() == "840,00\xa0₽"  # a price as a price
    assert row.locator("td.date").inner_text().startswith(datetime.now(UTC).strftime("%Y-"))
    page.goto(f"{base}/find?q=offers.xml")
    shot(page, "find")

"""The lists by state and the message page in Debian's chromium, at 1,366 and at 390 px
(issue 34 items 6 and 9): from the dashboard's figure to the delayed list, whose rows say the
product, the price and when each goes again; then a message whose page shows its product, its
price and since when in its state in the first screen; no page wider than its window."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from browser_helpers import NARROW, VIEWPORT, no_sideways_scroll, shot, sign_in
from sqlalchemy import Engine
from workbench_helpers import add_operator

from exchange.db.engine import transaction
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take
from tests.support.follow import set_delivery

GUID_ID = "bd72d8f9-55bc-11d9-848a-00112f43529a#bd72d8fa-55bc-11d9-848a-00112f43529a"
NAME = "Женские ботфорты коричневые (38)"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("viewport", [VIEWPORT, NARROW], ids=["1366", "390"])
def test_from_the_dashboard_to_a_delayed_price_and_its_page(
    browser: Any, serve: Callable[..., Any], db: Engine, viewport: dict[str, int]
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    stage(db, [price_row(GUID_ID, 1, "12345.60", aggregate=f"{GUID_ID}/retail", name=NAME)])
    now = datetime.now(UTC)
    take(db, None, dict(DEFAULT_KINDS), now)
    with transaction(db) as connection:
        set_delivery(
            connection,
            state="delayed",
            reason="http-503",
            next_try_at=now + timedelta(seconds=45),
            updated_at=now - timedelta(minutes=2),
        )
    context = browser.new_context(viewport=viewport, locale="ru-RU")
    page = context.new_page()
    sign_in(page, base, "olga")
    page.click("#state-delayed")  # the dashboard's figure leads to the list
    page.wait_for_url(f"{base}/messages/delayed")
    assert page.locator("h1").inner_text().startswith("Отложены до следующей попытки")
    row = page.locator("table.messages tbody tr")
    assert row.count() == 1
    assert row.locator("td.product-name").inner_text() == NAME
    assert row.locator("td.price").inner_text() == "12\xa0345,60\xa0₽"
    assert row.locator("td.next-try").inner_text().startswith("через ")
    wide = page.evaluate(
        "() => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect()"
        ".right > window.innerWidth + 1).map(e => e.tagName + '.' + e.className + ' '"
        " + Math.round(e.getBoundingClientRect().right)).slice(0, 12)"
    )
    assert no_sideways_scroll(page), ("the delayed list", wide)
    shot(page, f"messages-delayed-{viewport['width']}")

    row.locator("td.id a").first.click()
    page.wait_for_url(f"{base}/message/**")
    height = viewport["height"]
    for element in ("#product", "#price", "#in-state"):
        box = page.locator(element).bounding_box()
        assert box and box["y"] + box["height"] <= height, (element, box)  # the first screen
    assert page.locator("#product").inner_text() == NAME
    assert page.locator("#price").inner_text() == "12\xa0345,60\xa0₽"
    assert page.locator("#in-state").inner_text().startswith("отложено")
    assert no_sideways_scroll(page), "the message page"
    shot(page, f"message-lead-{viewport['width']}")
    context.close()

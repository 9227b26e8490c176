"""Review rev36b in Debian's chromium: the quarantine's list says, under a row's reason and in
«Что делать дальше», the advice of its own of a price invalid for its channel whose newer
version the marketplace withholds in its own price quarantine (item 1: it was said to go in the
price's place, though buyers do not see it until someone releases it), and of a row superseded
after quarantine (item 2: only its message page said it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from browser_helpers import new_page, sign_in
from sqlalchemy import Engine
from workbench_helpers import add_operator

from tests.support.invalid_newer_scene import invalid_newer_scene

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
WITHHELD_NOTE = "1С с тех пор прислала более новую версию, но площадка её придерживает"
SUPERSEDED_NOTE = "устарела после карантина: более новая версия уже доставлена"


def _reason_cell(page: Any, message_id: str) -> str:
    row = page.locator("table.messages tbody tr").filter(
        has=page.locator(f'input[value="{message_id}"]')
    )
    return " ".join(row.locator("td[data-label='Причина']").inner_text().split())


def test_the_list_shows_the_withheld_and_the_superseded_advice_in_the_browser(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    ids = invalid_newer_scene(db, NOW)
    page = new_page(browser)
    sign_in(page, base, "olga")

    page.goto(f"{base}/quarantine")

    assert WITHHELD_NOTE in _reason_cell(page, ids["V-5 v2"])
    assert SUPERSEDED_NOTE in _reason_cell(page, ids["V-1 v2"])
    assert "1С с тех пор" not in _reason_cell(page, ids["V-4 v1"])
    assert "устарела" not in _reason_cell(page, ids["V-4 v1"])
    steps = page.locator("#next-steps dd").all_inner_texts()
    withheld = [s for s in steps if "площадка придерживает её в собственном карантине цен" in s]
    assert len(withheld) == 1, steps
    assert "уйдёт вместо" not in withheld[0], withheld
    assert "список «Принято каналом, придержано от покупателей»" in withheld[0], withheld
    superseded = [s for s in steps if "на площадку уже доставлена более новая версия" in s]
    assert len(superseded) == 1 and "сайт" not in superseded[0], steps
    heads = " ".join(page.locator("#next-steps dt").all_inner_texts())
    assert WITHHELD_NOTE in heads and SUPERSEDED_NOTE in heads, heads

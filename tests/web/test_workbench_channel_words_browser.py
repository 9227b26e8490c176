"""Issue 31 item 7 in Debian's chromium: with two channels the search's rows say each one's
channel and a message's page says each channel's state, at a desktop's width and a phone's,
neither page scrolling sideways."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_helpers import NARROW, VIEWPORT, no_sideways_scroll, shot, sign_in
from sqlalchemy import Engine, select
from workbench_helpers import add_operator

from exchange.db.engine import transaction
from exchange.dev.testing import one_channel_messages, price_row
from tests.support.second_channel import second_channel, taken

messages = one_channel_messages()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("viewport", [VIEWPORT, NARROW], ids=["1366px", "390px"])
def test_two_channels_search_rows_and_message_header_name_each_channel(
    browser: Any, serve: Callable[..., Any], db: Engine, viewport: dict[str, int]
) -> None:
    now = datetime.now(UTC)
    taken(db, [price_row("ART-003", 1, "10.00", aggregate="ART-003/retail")], now)
    second_channel(db, {"ART-003/retail": ("quarantined", "http-422")}, now, target="ozon")
    with transaction(db, read_only=True) as connection:
        mid = str(connection.execute(select(messages.c.message_id)).scalar_one())
    base = serve()
    add_operator(db, "olga", "operator")
    page = browser.new_context(viewport=viewport, locale="ru-RU").new_page()
    sign_in(page, base, "olga")

    page.goto(f"{base}/find?q=ART-003")
    cells = page.locator("table.messages td.channel")
    assert sorted(cells.all_inner_texts()) == ["api", "second"]
    assert all(cell.is_visible() for cell in cells.all())
    assert no_sideways_scroll(page)
    shot(page, f"channel-words-find-{viewport['width']}")

    page.goto(f"{base}/message/{mid}")
    assert page.locator("#in-state").inner_text() == "По каналам: api: новое; second: в карантине"
    assert page.locator("#in-state").is_visible()
    assert no_sideways_scroll(page)
    shot(page, f"channel-words-message-{viewport['width']}")

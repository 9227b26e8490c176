"""The pause per channel on the dashboard (contract 13: ``exchange pause --channel``), in
Debian's chromium: with two channels an operator pauses one channel from its row, with a note;
the row says who paused it, the banner lists the channels paused on their own, and the other
channel's row still offers its own pause. The row resumes it; the banner's buttons pause and
resume every channel, and the rows say so."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from browser_helpers import NARROW, new_page, no_sideways_scroll, sign_in
from sqlalchemy import Engine, select
from workbench_helpers import add_operator

from exchange.db.engine import transaction
from exchange.db.schema import delivery_pause
from exchange.dev.testing import price_row
from tests.support.second_channel import second_channel, taken


def _pauses(db: Engine) -> dict[str, tuple[str, str]]:
    """The operators' pauses held: each row's name, who paused and why."""
    with transaction(db, read_only=True) as connection:
        rows = connection.execute(
            select(delivery_pause.c.name, delivery_pause.c.operator, delivery_pause.c.note).where(
                delivery_pause.c.name.like("delivery%")
            )
        ).all()
    return {name: (operator, note) for name, operator, note in rows}


def test_an_operator_pauses_one_channel_from_its_row_and_the_other_is_not_paused(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    now = datetime.now(UTC)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], now)
    second_channel(db, {"SKU-1/retail": ("new", None)}, now, target="woocommerce")
    base = serve()
    add_operator(db, "olga", "operator")
    page = new_page(browser)
    sign_in(page, base, "olga")
    assert page.locator("#pause-all").inner_text() == "Остановить все каналы"

    second = page.locator("#channel-second")
    second.locator("input[name=note]").fill("цены на проверке")
    second.locator("#pause-second").click()
    page.wait_for_url(f"{base}/")
    assert _pauses(db) == {"delivery:second": ("olga", "цены на проверке")}
    assert "остановлена оператором olga" in page.locator("#channel-second td.delivery").inner_text()
    assert page.locator("#paused-channels").inner_text() == "Остановлены по отдельности: second"
    assert page.locator("#channel-api td.delivery").inner_text() != ""
    assert "остановлена" not in page.locator("#channel-api td.delivery").inner_text()
    assert page.locator("#pause-api").is_visible()  # api delivers on, and may be paused too
    assert page.locator("#resume-second").inner_text() == "Возобновить канал second"

    page.click("#resume-second")
    page.wait_for_url(f"{base}/")
    assert _pauses(db) == {}
    assert page.locator("#paused-channels").count() == 0
    assert page.locator("#pause-second").is_visible()

    page.locator("#pause input[name=note]").first.fill("переезд сервера")
    page.click("#pause-all")
    page.wait_for_url(f"{base}/")
    assert _pauses(db) == {"delivery": ("olga", "переезд сервера")}
    paused = page.locator("#channels td.pause").all_inner_texts()
    assert paused == ["остановлен вместе со всеми каналами"] * 2
    assert page.locator("#resume-all").inner_text() == "Возобновить все каналы"
    page.click("#resume-all")
    page.wait_for_url(f"{base}/")
    assert _pauses(db) == {}


def test_the_channel_rows_pause_fits_a_phone(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    """At 390 px each channel's row keeps its pause (note and button) without the page
    scrolling sideways, before and after the pause."""
    now = datetime.now(UTC)
    taken(db, [price_row("SKU-1", 1, "10.00", aggregate="SKU-1/retail")], now)
    second_channel(db, {"SKU-1/retail": ("new", None)}, now, target="woocommerce")
    base = serve()
    add_operator(db, "olga", "operator")
    page = browser.new_context(viewport=NARROW, locale="ru-RU").new_page()
    sign_in(page, base, "olga")
    assert page.locator("#pause-second").is_visible() and no_sideways_scroll(page)
    page.locator("#channel-second input[name=note]").fill("цены на проверке")
    page.click("#pause-second")
    page.wait_for_url(f"{base}/")
    assert page.locator("#resume-second").is_visible() and no_sideways_scroll(page)

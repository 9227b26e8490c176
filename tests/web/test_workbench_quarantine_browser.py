"""The quarantine list (issue 24, item 6) and the cancel (item 7), in Debian's chromium, with no
script on the page: since when and how long each entry waits and its attempts; sorting and
pages by links; a reason filter built from the reasons present, with counts; a box that selects
the page; «all N matching» whose preview fixes the message_ids the confirm acts on; with nothing
selected, a Russian hint on the list itself. A cancel says that it is for good, what waits
behind it, and has a way back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_helpers import new_page, shot, sign_in
from sqlalchemy import Engine, func, select
from workbench_helpers import add_operator, deliver

from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import fill_quarantine, one_channel_messages, posting_row, stage
from tests.support.second_channel import second_channel

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


def _attempts(page: Any) -> list[str]:
    return page.locator("table.messages tbody td.attempts").all_inner_texts()


def _quarantined(engine: Engine) -> int:
    with transaction(engine, read_only=True) as connection:
        return int(
            connection.execute(
                select(func.count()).where(messages.c.state == "quarantined")
            ).scalar_one()
        )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_quarantine_list_pages_sorts_filters_by_the_reasons_present_and_selects(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    fill_quarantine(db, 120)  # http-422 and unknown-sku in turn, attempts 1 to 5
    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/quarantine")
    assert page.locator("#total").inner_text() == "(120)"
    heads = page.locator("table.messages thead").inner_text()
    assert "В карантине с / ждёт" in heads and "Попыток" in heads
    first = page.locator("table.messages tbody tr").first
    assert "назад" in first.locator("td.since small.waiting").inner_text()
    assert page.locator("table.messages tbody tr").count() == 100
    # The reason filter: only the reasons present, each with its count.
    options = page.locator("select[name=reason] option").all_inner_texts()
    assert options[1:] == ["сайт отклонил (http-422) — 60", options[2]] and options[2].endswith(
        "(unknown-sku) — 60"
    )
    assert len(options) == 3  # «любая» and the two present: never a reason nothing has
    # Pages, by links.
    assert page.locator("#pager").inner_text().count("Страница 1 из 2") == 1
    page.click("#pager a[rel=next]")
    assert page.locator("table.messages tbody tr").count() == 20
    # Sorting, by links: attempts ascending, then descending.
    page.click("table.messages thead a.sort:has-text('Попыток')")
    shown = _attempts(page)
    assert "sort=attempts" in page.url and shown == sorted(shown) and shown[0] == "1"
    page.click("table.messages thead a.sort:has-text('Попыток')")
    shown = _attempts(page)
    assert "dir=desc" in page.url and shown == sorted(shown, reverse=True) and shown[0] == "5"
    # Nothing selected: a hint in Russian on the same list, nothing done.
    listed = page.url
    page.click("#selected button[value=retry]")
    assert page.url.startswith(listed) and "hint=nothing-selected" in page.url
    assert page.locator("#hint").inner_text().startswith("Ничего не выбрано")
    assert page.locator("table.messages tbody tr").count() == 100  # still the list
    # The box that selects the page.
    page.goto(f"{base}/quarantine?reason=http-422&per=50")
    page.check("#select-page")
    page.click("#selected button[value=cancel]")
    assert page.locator("#what").inner_text() == "Будут сняты с отправки навсегда: 50"
    page.click("#back")
    assert page.url == f"{base}/quarantine?reason=http-422&per=50"
    shot(page, "quarantine-list")
    # «All 60 matching»: its preview fixes the ids; one that comes after it is not acted on.
    page.check("#scope-all")
    page.click("#selected button[value=retry]")
    assert page.locator("#what").inner_text() == "Будут отправлены снова: 60"
    fill_quarantine(db, 1, prefix="LATE")  # http-422 too, never shown to the operator
    page.fill("#note", "prices fixed in 1C")
    page.click("#confirm")
    assert page.locator("#changed").is_visible()  # nothing done: the preview is shown again
    assert _quarantined(db) == 121
    page.fill("#note", "prices fixed in 1C")
    page.click("#confirm")
    assert "затронуто 61 сообщение" in page.locator("#done").inner_text()
    assert _quarantined(db) == 60


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cancel_says_it_is_for_good_what_waits_behind_and_has_a_way_back(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    stage(db, [posting_row("DOC-1", v) for v in (1, 2, 3)])
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as site:
        site.faults.reject.add("DOC-1")
        deliver(db_url, site)
    with transaction(db, read_only=True) as connection:
        first = connection.execute(
            select(messages.c.message_id).where(messages.c.state == "quarantined")
        ).scalar_one()
    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/message/{first}")
    assert page.locator("#cancel").inner_text() == "Снять с отправки навсегда"
    page.click("#cancel")
    assert page.locator("h1").inner_text() == "Что произойдёт: Снять с отправки навсегда"
    consequence = page.locator("#consequence").inner_text()
    assert "Эта версия никогда не будет отправлена на сайт" in consequence
    assert (
        page.locator("#behind").inner_text().startswith("За ней в очереди: 2 более поздние версии.")
    )
    shot(page, "preview-cancel")
    page.click("#back")  # the way back: the message it came from, nothing done
    assert page.url == f"{base}/message/{first}"
    assert _quarantined(db) == 1
    page.click("#cancel")
    page.fill("#note", "posted twice in 1C")
    page.click("#confirm")
    assert "затронуто 1 сообщение" in page.locator("#done").inner_text()
    assert page.locator("#back").get_attribute("href") == f"/message/{first}"
    assert _quarantined(db) == 0


def _quarantined_on_second(db: Engine, message_ids: list[str]) -> None:
    """A second channel (``second``) with a quarantined delivery of each of ``message_ids``."""
    with transaction(db, read_only=True) as connection:
        quarantined = connection.execute(
            select(messages.c.aggregate).where(messages.c.message_id.in_(message_ids))
        ).scalars()
        states = {aggregate: ("quarantined", "http-422") for aggregate in quarantined}
    second_channel(db, states, datetime.now(UTC), target="woocommerce")


def _on_channel(engine: Engine, name: str) -> int:
    with transaction(engine, read_only=True) as connection:
        return int(
            connection.execute(
                select(func.count())
                .select_from(deliveries)
                .join(channels, channels.c.id == deliveries.c.channel_id)
                .where(channels.c.name == name, deliveries.c.state == "quarantined")
            ).scalar_one()
        )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_quarantine_list_filters_by_channel_in_its_address_and_acts_on_that_channel_only(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    """Contract 13: the list names each entry's channel and filters by it like its other
    filters, the filter in the address (a link can be shared); «all N matching» with the
    channel filter acts on that channel's deliveries only."""
    base = serve()
    add_operator(db, "olga", "operator")
    ids = fill_quarantine(db, 6, reasons=("http-422",))  # on ``api``, as intake writes them
    _quarantined_on_second(db, ids[:2])
    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/quarantine")
    assert page.locator("#total").inner_text() == "(8)"
    options = page.locator("#filter-channel option").all_inner_texts()
    assert options == ["все каналы", "api", "second"]
    page.select_option("#filter-channel", "second")
    page.click("form.filters button[type=submit]")
    assert "channel=second" in page.url
    assert page.locator("#total").inner_text() == "(2)"
    assert set(page.locator("table.messages tbody td.channel").all_inner_texts()) == {"second"}
    shared = page.url
    # The address alone shows the same list (a colleague's browser, a link in a notice).
    other = new_page(browser)
    sign_in(other, base, "olga")
    other.goto(shared)
    assert other.locator("#total").inner_text() == "(2)"
    assert other.locator("#filter-channel").input_value() == "second"
    shot(other, "quarantine-by-channel")
    # An unknown channel is said as any bad filter is; the list shows every channel's.
    other.goto(f"{base}/quarantine?channel=nowhere")
    assert "nowhere" in other.locator("p.error").first.inner_text()
    assert other.locator("#total").inner_text() == "(8)"
    # «All matching» with the reason and the channel: the second channel's two, not api's.
    page.goto(f"{base}/quarantine?reason=http-422&channel=second")
    page.check("#scope-all")
    page.click("#selected button[value=cancel]")
    assert page.locator("#what").inner_text() == "Будут сняты с отправки навсегда: 2"
    page.fill("#note", "the second shop dropped these SKUs")
    page.click("#confirm")
    assert _on_channel(db, "second") == 0
    assert _on_channel(db, "api") == 6

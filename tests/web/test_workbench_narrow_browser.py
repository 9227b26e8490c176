"""Real 1C ids on a phone and on a laptop (issue 24 item 9), in Debian's chromium: an offer with
a characteristic (``guid#guid``) and a 96-letter Cyrillic SKU with no separator never make a
page wider than its window, at 1,366 px and at 390 px, on the quarantine list, the search, a
message with a long history and the 1C exchanges; an id breaks after ``/ . - _ : #`` and at
spaces (a run of letters with none wraps only when nothing else fits), and copies as itself.
On a phone the history's cells say their column; the list offers its sort links and the box
that selects the page above the cards (what the bulk form's wording points to); «Отправить
первым» fits the screen."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_helpers import BROKEN_WORDS, NARROW, VIEWPORT, shot, sign_in
from sqlalchemy import Engine, insert
from workbench_helpers import HOSTILE_SKU, add_operator, deliver, message_id_of

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.intake.sources.common import Received, safe_key, take
from exchange.ops.quarantine import Filters, retry
from exchange.web.workbench.core import wbr

# An offer with a characteristic, as 1C's offers.xml names it (product#characteristic).
GUID_ID = "bd72d8f9-55bc-11d9-848a-00112f43529a#bd72d8fa-55bc-11d9-848a-00112f43529a"
# An article written as one word, as some shops do: 96 letters, not one separator.
CYRILLIC_SKU = ("ПлиткаКерамическаяНапольнаяБежеваяМатоваяСтруктурированная" * 2)[:96]
assert len(CYRILLIC_SKU) == 96
LONG = (f"{GUID_ID}/retail", f"{CYRILLIC_SKU}/retail")
NOTE = "цена на сайте не совпадает с 1С, проверено по прайс-листу поставщика"

# What a person copies from an element: the text a selection of the whole of it gives.
COPIED = """(element) => {
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  const text = selection.toString();
  selection.removeAllRanges();
  return text;
}"""
WIDTH = "document.documentElement.scrollWidth"


def _seed(db: Engine, db_url: str, site: SiteSimulator) -> None:
    """Both prices refused by the site (422), retried by an operator and refused again: a
    quarantine with a long history; a 1C exchange whose file has the long name; a broker
    message refused with the guid#guid key."""
    rows = [
        price_row(
            aggregate.split("/")[0],
            1,
            "199.90",
            aggregate=aggregate,
            source_ref=f"Установка цен номенклатуры 000017 от 02.12.2026 ({aggregate})",
            name=f"Плитка керамическая напольная 30x30, {CYRILLIC_SKU}",
        )
        for aggregate in LONG
    ]
    stage(db, rows)
    site.faults.reject.update(LONG)
    deliver(db_url, site)
    for _ in range(2):
        _retry(db)
        deliver(db_url, site)
    now = datetime.now(UTC)
    with transaction(db) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange="s1",
                filename=f"offers_{CYRILLIC_SKU}.xml",
                started_at=now,
                finished_at=now,
                outcome="failure",
                detail=f"no price of a mapped type for {GUID_ID} and {CYRILLIC_SKU}",
            )
        )
    body = json.dumps({"kind": "price", "aggregate": LONG[0], "aggregate_version": "x"})
    take(
        db,
        None,
        fast_settings(db_url).kinds,
        [Received(safe_key(GUID_ID), body.encode(), f"очередь prices, сообщение {GUID_ID}")],
        source="rabbitmq",
        max_items=100,
        max_bytes=2**24,
    )


def _retry(db: Engine) -> None:
    ids = [message_id_of(db, aggregate) for aggregate in LONG]
    with transaction(db) as connection:
        retry(
            connection,
            ids,
            Filters(),
            operator="olga",
            note=NOTE,
            now=datetime.now(UTC),
            dry_run=False,
        )


def _pages(db: Engine) -> list[str]:
    mids = [message_id_of(db, aggregate) for aggregate in LONG]
    return [
        "/quarantine",
        f"/find?q={GUID_ID.replace('#', '%23')}",
        f"/find?q={CYRILLIC_SKU}",
        *(f"/message/{mid}" for mid in mids),
        "/exchanges",
        "/blocked",
        "/",
    ]


def _wider_than_the_window(page: Any, base: str, paths: list[str]) -> dict[str, Any]:
    """Each page whose width exceeds the window's, with its width and its Latin words cut."""
    wide = {}
    for path in paths:
        page.goto(f"{base}{path}")
        width, window = page.evaluate(WIDTH), page.evaluate("window.innerWidth")
        broken = page.evaluate(BROKEN_WORDS)
        if width > window or broken:
            wide[path] = (width, broken)
    return wide


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("viewport", [VIEWPORT, NARROW], ids=["1366px", "390px"])
def test_guid_ids_and_a_96_letter_sku_never_make_a_page_scroll_sideways(
    browser: Any,
    serve: Callable[..., Any],
    db: Engine,
    db_url: str,
    site: SiteSimulator,
    viewport: dict[str, int],
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    _seed(db, db_url, site)
    context = browser.new_context(viewport=viewport, locale="ru-RU")
    page = context.new_page()
    sign_in(page, base, "olga")
    paths = _pages(db)
    assert _wider_than_the_window(page, base, paths) == {}
    # The ids are on the pages, whole: what a person copies is the id, nothing added.
    page.goto(f"{base}/quarantine")
    for aggregate in LONG:
        cell = page.locator("table.messages td.sku", has_text=aggregate).first
        shown = "[...c.childNodes].filter(n => n.nodeName !== 'DIV').map(n => n.textContent)"
        assert cell.evaluate(f"c => {shown}.join('')") == aggregate
        assert cell.evaluate(COPIED).startswith(aggregate)
        mid = message_id_of(db, aggregate)
        link = page.locator(f"table.messages a[href='/message/{mid}']")
        assert link.evaluate(COPIED) == mid
    page.goto(f"{base}/exchanges")
    name = page.locator("td.id", has_text="offers_").first
    assert name.evaluate(COPIED) == f"offers_{CYRILLIC_SKU}.xml"
    # A waiting message: its «Отправить первым» form within the page too.
    _retry(db)
    for aggregate in LONG:
        page.goto(f"{base}/message/{message_id_of(db, aggregate)}")
        assert page.locator("#prioritize-form").is_visible()
        form = page.locator("#prioritize-form").bounding_box()
        assert form["x"] + form["width"] <= viewport["width"], form
        assert page.evaluate(WIDTH) <= viewport["width"]
        assert page.locator("#message-id").evaluate(COPIED) == message_id_of(db, aggregate)
    if viewport == NARROW:  # docs/img/ (WORKBENCH_SCREENSHOTS=1): a phone's lists, a message
        for path, name in (
            (f"/find?q={GUID_ID.replace('#', '%23')}", "find-narrow"),
            ("/exchanges", "exchanges-narrow"),
            (f"/message/{message_id_of(db, LONG[1])}", "biography-narrow"),
        ):
            page.goto(f"{base}{path}")
            shot(page, name)
        page.locator("#prioritize-form").evaluate("form => form.scrollIntoView()")
        shot(page, "prioritize-narrow")
        page.locator("table.history").evaluate("table => table.scrollIntoView()")
        shot(page, "biography-history-narrow")
    context.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_on_a_phone_every_history_cell_names_its_column(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    _seed(db, db_url, site)
    context = browser.new_context(viewport=NARROW, locale="ru-RU")
    page = context.new_page()
    sign_in(page, base, "olga")
    page.goto(f"{base}/message/{message_id_of(db, LONG[0])}")
    heads = page.locator("table.history thead th").all_inner_texts()
    rows = page.locator("table.history tbody tr")
    assert rows.count() >= 6  # refused, retried, refused again, retried, refused again
    named = page.evaluate(
        """[...document.querySelectorAll('table.history tbody tr')].map(tr =>
             [...tr.querySelectorAll('td')].map(td =>
               getComputedStyle(td, '::before').content))"""
    )
    expected = [f'"{head}: "' for head in heads]
    assert all(cells == expected for cells in named), (expected, named)
    history = page.locator("table.history").inner_text()
    assert NOTE in history and "olga" in history
    context.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_on_a_phone_the_list_offers_its_sort_links_and_the_box_that_selects_the_page(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    _seed(db, db_url, site)
    context = browser.new_context(viewport=NARROW, locale="ru-RU")
    page = context.new_page()
    sign_in(page, base, "olga")
    page.goto(f"{base}/quarantine")
    box = page.locator("#select-page")
    assert box.is_visible()
    first_card = page.locator("table.messages tbody tr").first.bounding_box()
    assert box.bounding_box()["y"] < first_card["y"]  # above the cards, as on a laptop
    sorts = page.locator("table.messages thead a.sort")
    assert sorts.count() >= 4 and all(sorts.nth(n).is_visible() for n in range(sorts.count()))
    # The headers that neither sort nor select stay hidden: the cards name their cells.
    assert page.locator("table.messages thead th:has-text('message_id')").is_hidden()
    assert page.evaluate(WIDTH) <= NARROW["width"]
    page.locator("#selected").evaluate("form => form.scrollIntoView()")
    shot(page, "quarantine-narrow")
    page.click("table.messages thead a.sort:has-text('Попыток')")
    assert "sort=attempts" in page.url
    page_ids = page.locator("table.messages tbody td.id a").all_text_contents()
    page.check("#select-page")
    page.click("#selected button[value=cancel]")
    assert page.locator("#what").inner_text() == "Будут сняты с отправки навсегда: 3"
    assert page.locator("#touched li > span.id").all_text_contents()[0] in page_ids
    assert page.evaluate(WIDTH) <= NARROW["width"]
    context.close()


@pytest.mark.parametrize(
    "text", [GUID_ID, f"{CYRILLIC_SKU}/retail", HOSTILE_SKU, "price.SKU-0042_retail.v1.0a1b"]
)
def test_the_break_points_keep_the_text_as_it_is(text: str) -> None:
    """The filter adds only empty <wbr> and plain spans (no character a copy would carry),
    breaks after ``/ . - _ : #`` and never inside an entity such as ``&#34;``."""
    marked = str(wbr(text))
    assert html.unescape(re.sub(r"<wbr>|</?span[^>]*>", "", marked)) == text
    assert "\u200b" not in marked and "&#<wbr>" not in marked
    if text == GUID_ID:
        assert "00112f43529a#<wbr>bd72d8fa-<wbr>55bc" in marked
    if CYRILLIC_SKU in text:  # the run with no break point: marked to wrap only if it must
        assert f'<span class="run">{CYRILLIC_SKU}</span>/<wbr>retail' == marked


# How wide the placeholder of an input is drawn, against the room its box has for text.
PLACEHOLDER_ROOM = """(input) => {
  const style = getComputedStyle(input);
  const context = document.createElement('canvas').getContext('2d');
  context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return {text: input.placeholder, drawn: context.measureText(input.placeholder).width, room};
}"""


@pytest.mark.parametrize("viewport", [VIEWPORT, NARROW], ids=["1366px", "390px"])
def test_the_pause_forms_note_shows_its_whole_placeholder(
    browser: Any, serve: Callable[..., Any], db: Engine, viewport: dict[str, int]
) -> None:
    """The dashboard's pause form's note field says what it wants whole, never
    «Примечание (обязатель…», at 1,366 and 390 px."""
    base = serve()
    add_operator(db, "olga", "operator")
    context = browser.new_context(viewport=viewport, locale="ru-RU")
    page = context.new_page()
    sign_in(page, base, "olga")
    note = page.locator("form[action='/delivery/pause'] input[name=note]")
    measured = note.evaluate(PLACEHOLDER_ROOM)
    assert measured["text"], measured
    assert measured["drawn"] <= measured["room"], measured
    context.close()

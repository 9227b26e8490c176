"""The workbench says what to do and says it in Russian (issue 24 items 3 and 4), in Debian's
chromium: the message page and the quarantine list give the report's next step per reason;
every page, rendered in Russian with data that exercises it, carries no English word outside
an allow-list of codes (data cells — ids, SKUs, the site's own answers, payloads — aside)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from browser_helpers import new_page, shot, sign_in
from sqlalchemy import Engine, insert
from workbench_helpers import SKU, add_operator, deliver, message_id_of, quarantine_some

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, messages
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import posting_row, price_row, stage
from exchange.ops.find import known_reasons
from exchange.report.words import next_check
from exchange.words import page_steps
from tests.support.follow import set_delivery

# Codes and names a Russian page may show as they are: what an operator types or configures.
# Not message_id (a column says «Код сообщения») nor the kinds price and financial_posting (said
# in words, «цена», «финансовая проводка»): issue 34 item 7.
ALLOWED = {
    "UTC",
    "HTTP",
    "RU",
    "EN",
    "exchange",  # the banner's «запущен ли exchange run?»: the service's process
    "run",
    "csv",
    "xlsx",
    "html",
    "json",
    "EXCHANGE_BULK_LIMIT",
    "offers",
    "xml",
    # the brokers' own names (the reason filter of every list names «RabbitMQ некуда доставить»)
    "RabbitMQ",
    "Redis",
    *known_reasons(),
}
CODE = re.compile(r"http-[45]\d\d")
# The page's own text: data cells (ids, SKUs, the site's answers, payloads, a price with its
# currency, a product's name) are not the service's words and are left out.
OWN_TEXT = """() => {
  document.querySelectorAll('.id, .err, pre, .sku, .who, .price, .product')
    .forEach(e => e.remove());
  return document.body.innerText;
}"""


def english_words(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z][A-Za-z0-9_\-]*", text)
    return sorted({w for w in words if w not in ALLOWED and not CODE.fullmatch(w)})


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_message_page_and_the_quarantine_say_what_to_do_next(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    quarantine_some(db_url, site, SKU)
    mid = message_id_of(db, SKU)
    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/message/{mid}")
    # The report's advice, its steps said with the page's buttons (never a command).
    said = next_check("http-422", "ru", steps=page_steps("ru"))
    assert page.locator("#next-step").inner_text() == said
    assert page.locator("#next-step").inner_text().startswith("Сайт отклонил сообщение")
    assert page.locator("#state").inner_text() == "в карантине"
    shot(page, "message-next-step")
    page.goto(f"{base}/quarantine")
    steps = page.locator("#next-steps").inner_text()
    assert "сайт отклонил (http-422)" in steps and said in steps


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_russian_page_has_no_english_word_outside_the_codes(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    stage(db, [price_row("SKU-0100", 1, "10.00")])
    deliver(db_url, site)
    stage(db, [posting_row("DOC-2", 1), posting_row("DOC-2", 2)])
    quarantine_some(db_url, site, SKU, "SKU-0013", "DOC-2")
    now = datetime.now(UTC)
    with transaction(db) as connection:
        for outcome, detail in (("failure", "not well-formed"), ("staged", "1 price")):
            connection.execute(
                insert(cml_exchanges).values(
                    exchange="s1",
                    filename="offers.xml",
                    started_at=now,
                    finished_at=now,
                    outcome=outcome,
                    detail=detail,
                )
            )
    quarantined, delivered = message_id_of(db, SKU), message_id_of(db, "SKU-0100")
    page = new_page(browser)
    sign_in(page, base, "olga")
    found: dict[str, list[str]] = {}

    def check(name: str) -> None:
        words = english_words(page.evaluate(OWN_TEXT))
        if words:
            found[name] = words

    for path in (
        "/",
        "/quarantine",
        "/quarantine?reason=http-422&kind=price",
        "/find?q=SKU-0",
        f"/message/{quarantined}",
        f"/message/{delivered}",
        "/message/no-such-id",
        "/blocked",
        "/exchanges",
        "/export",
        # the lists by state (issue 34 item 6)
        "/messages/new",
        "/messages/delayed",
        "/messages/in_progress",
        "/messages/delivered",
        "/messages/cancelled",
        "/messages/nonsense",
    ):
        page.goto(f"{base}{path}")
        check(path)
    page.goto(f"{base}/quarantine")
    page.click("#selected button[value=retry]")  # nothing selected
    check("retry with nothing selected")
    page.goto(f"{base}/quarantine")
    page.check(f"input[value='{quarantined}']")
    page.click("#selected button[value=cancel]")
    check("cancel preview")
    page.fill("#note", "priced wrong in 1C")
    page.click("#confirm")
    check("done")
    assert "затронуто 1 сообщение" in page.locator("#done").inner_text()
    assert found == {}, found
    # The biography keeps people and workers apart (item 15).
    page.goto(f"{base}/message/{quarantined}")
    rows = page.locator("table.history tbody tr")
    first, last = rows.first, rows.last
    assert first.locator("td.operator").inner_text() == ""
    assert last.locator("td.operator").inner_text() == "olga"
    assert last.locator("td.worker").inner_text() == ""
    assert any(w.strip() for w in page.locator("table.history td.worker").all_inner_texts())
    shot(page, "biography-cancelled")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_english_browser_reads_404_and_the_services_own_details_in_russian(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    """Issue 34 item 7 (a fresh operator's review): a browser asking for English
    (Accept-Language en-US) without the workbench's cookie reads its 404 in Russian, the
    workbench's default; the service's own texts in a quarantine's «last error» (the intake's
    version conflict, an aggregate's pinned price) read in Russian, not only the page's words."""
    base = serve()
    add_operator(db, "olga", "operator")
    context = browser.new_context(locale="en-US", extra_http_headers={"Accept-Language": "en-US"})
    page = context.new_page()
    page.goto(f"{base}/nope")
    assert "404: по адресу /nope ничего нет" in page.locator("body").inner_text()
    stage(db, [price_row("SKU-0200", 1, "10.00"), price_row("SKU-0201", 1, "11.00")])
    deliver(db_url, site)
    details = (
        "version 1 of price 'SKU-0200' was already taken as m-1 with a different payload",
        "aggregate 'SKU-0201' is the price of sku 'SKU-0201' in price type 'retail', fixed by "
        "its first version; this row names price_type 'wholesale' (not 'retail'). One aggregate "
        "is one price: write this price under aggregate 'SKU-0201/wholesale' "
        "(<sku>/<price_type>)",
    )
    with transaction(db) as connection:
        for sku, detail in zip(("SKU-0200", "SKU-0201"), details, strict=True):
            set_delivery(
                connection,
                messages.c.aggregate == sku,
                state="quarantined",
                reason="version-conflict",
                last_error=detail,
            )
    sign_in(page, base, "olga")
    page.goto(f"{base}/quarantine")
    said = " ".join(page.locator("td.err").all_inner_texts())
    assert "уже принята как сообщение" in said and "это задала его первая версия" in said, said
    english = re.findall(r"\b(?:was|already|taken|with|different|payload|fixed|first|row)\b", said)
    assert english == [], said

"""The workbench in a real browser (contract 11): Debian's chromium, driven by Playwright.

Never ``playwright install``: the browser is the distribution's (``apt-get install -y
chromium``), launched by path. Without it the tests skip on a developer's machine and FAIL
under CI=true, so that CI can never pass without having run them. The screenshots of the main
pages land in docs/img/ (referenced from docs/workbench.md) when WORKBENCH_SCREENSHOTS=1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from browser_helpers import new_page, shot, sign_in
from sqlalchemy import Engine
from workbench_helpers import (
    HOSTILE_SKU,
    SKU,
    add_operator,
    deliver,
    message_id_of,
    quarantine_some,
    state_of,
)

from exchange.dev.sitesim import SiteSimulator


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sign_in_find_a_sku_retry_after_preview_and_see_it_delivered(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    quarantine_some(db_url, site, SKU, "SKU-0013", HOSTILE_SKU)
    mid = message_id_of(db, SKU)
    page = new_page(browser)
    sign_in(page, base, "olga")
    assert page.locator("#quarantined").inner_text() == "3"
    # Contract 11's "pace and limit": the worker that delivered reported its pace.
    pace = page.locator("#workers td.pace").first.inner_text()
    assert pace.startswith("сайт успевает: ") and "(предел 4 из 4)" in pace, pace
    shot(page, "dashboard")
    page.click("text=Карантин")
    page.wait_for_url(f"{base}/quarantine")
    shot(page, "quarantine")
    page.fill("header input[name=q]", SKU)
    page.press("header input[name=q]", "Enter")
    page.wait_for_url("**/find?q=SKU-0042")
    page.get_by_role("link", name=mid, exact=True).click()  # the id as shown
    page.wait_for_url(f"**/message/{mid}")
    assert page.locator("#state").inner_text() == "в карантине"
    assert page.locator("#state").get_attribute("data-state") == "quarantined"
    assert "http-422" in page.content()
    shot(page, "biography")
    site.faults.reject.discard(SKU)  # the site is fixed
    page.click("#retry")
    assert "Будут отправлены снова: 1" in page.locator("#what").inner_text()
    shot(page, "preview")
    page.fill("#note", "the site accepts the price again")
    page.click("#confirm")
    assert mid in page.locator("ul.ids").inner_text()
    deliver(db_url, site)
    page.goto(f"{base}/message/{mid}")
    assert page.locator("#state").inner_text() == "доставлено"
    history = page.locator("table.history").inner_text()
    assert "olga" in history and "the site accepts the price again" in history
    page.goto(f"{base}/find?q={SKU}&lang=en")
    assert "delivered" in page.locator("table.messages").inner_text()
    assert "Find" in page.locator("h1").inner_text()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_viewer_has_no_buttons_and_its_posts_are_refused(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "victor", "viewer")
    quarantine_some(db_url, site, SKU)
    mid = message_id_of(db, SKU)
    page = new_page(browser)
    sign_in(page, base, "victor")
    assert page.locator("form[action='/delivery/pause']").count() == 0
    page.goto(f"{base}/message/{mid}")
    assert page.locator("#retry").count() == 0 and page.locator("#cancel").count() == 0
    page.goto(f"{base}/quarantine")
    assert page.locator("form[action='/action/preview']").count() == 0
    csrf = page.locator("header form input[name=csrf]").get_attribute("value")
    # The viewer's own session and a valid CSRF token: still refused.
    answer = page.request.post(
        f"{base}/action/confirm",
        form={"csrf": csrf, "action": "retry", "message_id": mid, "note": "mine"},
    )
    assert answer.status == 403
    assert (
        page.request.post(f"{base}/delivery/pause", form={"csrf": csrf, "note": "x"}).status == 403
    )
    assert state_of(db, SKU) == "quarantined"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_hostile_sku_renders_as_text(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    quarantine_some(db_url, site, HOSTILE_SKU)
    mid = message_id_of(db, HOSTILE_SKU)
    page = new_page(browser)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, base, "olga")
    for path in ("/quarantine", f"/message/{mid}"):
        page.goto(f"{base}{path}")
        assert HOSTILE_SKU in page.locator("main").inner_text(), path
        assert page.locator("main script").count() == 0
    page.goto(f"{base}/find")
    page.fill("main input[name=q]", HOSTILE_SKU)
    page.press("main input[name=q]", "Enter")
    page.wait_for_load_state()
    assert HOSTILE_SKU in page.locator("table.messages").inner_text()
    assert dialogs == []

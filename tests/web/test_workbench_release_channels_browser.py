"""«Выпустить к покупателям» with several channels, in a real browser (issue 32): a price the
site and Yandex Market both withhold; the page asks which channel, the operator picks Yandex
Market and presses the button: Yandex is asked to confirm it, the site's delivery stays
withheld. The owner's page answered «эта версия доставляет только в один канал» instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import ARGS, CHROMIUM, need_browser, new_page, sign_in
from sqlalchemy import Engine
from withheld_two import Two, states, two_channels, withheld_on_both
from workbench_helpers import add_operator


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Two]:
    with two_channels(tmp_path) as found:
        yield found


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_release_button_releases_on_the_channel_the_operator_picks(
    serve: Callable[..., Any], db: Engine, db_url: str, two: Two
) -> None:
    need_browser()
    # The worker first (it runs its own loop), then the browser (Playwright's sync API holds
    # a loop in this thread): not the module's ``browser`` fixture, started before the test.
    mid = withheld_on_both(db_url, db, two)
    base = serve(channels=two.named)
    add_operator(db, "olga", "operator")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            _release_on_market(browser, base, mid, db, two)
        finally:
            browser.close()


def _release_on_market(browser: Any, base: str, mid: str, db: Engine, two: Two) -> None:
    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/message/{mid}")
    page.select_option("#release-channel", "market")
    page.fill("#release-note", "распродажа, цена верная")
    page.click("#release")
    page.wait_for_load_state()
    assert "done=release" in page.url, page.content()
    assert "один канал" not in page.content()
    assert two.ym.requests["price-quarantine/confirm"] == 1
    assert mid not in two.site.effect_counts(), "the site was not asked"
    assert states(db, mid)["api"] == "withheld"

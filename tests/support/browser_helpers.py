"""The workbench in a real browser: Debian's chromium driven by Playwright, launched by path
(never ``playwright install``). Without it the tests skip on a developer's machine and FAIL
under CI=true. Screenshots land in docs/img/ when WORKBENCH_SCREENSHOTS=1."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from workbench_helpers import PASSWORD

from exchange.web.workbench.core import LONG_RUN

CHROMIUM = os.environ.get("EXCHANGE_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
VIEWPORT = {"width": 1366, "height": 768}
# The ids in '.id' cells that a line break cut inside a run of Latin letters and digits (its
# rectangles do not share a top), for page.evaluate. A run longer than LONG_RUN (a Cyrillic
# SKU's transliterated message_id) has no break point and may wrap where nothing else fits, by
# design (workbench.core.LONG_RUN).
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('.id')) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(/[A-Za-z0-9]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1 && m[0].length <= LONG_RUN) broken.push(m[0]);
      }
    }
  }
  return broken;
}""".replace("LONG_RUN", str(LONG_RUN))


def need_browser() -> None:
    missing = not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM))
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = True
    if missing:
        message = (
            f"no browser for the workbench tests: {CHROMIUM} or playwright is missing "
            "(apt-get install -y chromium; pip install playwright; never `playwright install`)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def new_page(browser: Any) -> Any:
    context = browser.new_context(viewport=VIEWPORT, locale="ru-RU")
    return context.new_page()


def sign_in(page: Any, base: str, name: str) -> None:
    page.goto(f"{base}/")
    assert page.url.endswith("/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit].primary")
    page.wait_for_url(f"{base}/")


def shot(page: Any, name: str) -> None:
    if os.environ.get("WORKBENCH_SCREENSHOTS") == "1":
        IMG.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMG / f"{name}.png"), full_page=False)


NARROW = {"width": 390, "height": 844}


def no_sideways_scroll(page: Any) -> bool:
    """The page is no wider than the window (no horizontal scroll bar)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))

"""The workbench reads well (issue 24 items 8–12, issue 23 item 5), in Debian's chromium: times
in EXCHANGE_DISPLAY_TZ with their age beside them and never a microsecond; at 390 px no page
scrolls sideways and at 1,366 px an id breaks only after ``/ . - _ :``, never inside a word;
the dashboard redraws itself (a Refresh header, no script) until switched off and says when
it was drawn; the chart has a scale, a grid, values and every hour; the dashboard shows the
site's pace and limit and the backlog with its ETA; the export page offers the CLI's filters
and says that it exports the quarantine."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    BROKEN_WORDS,
    NARROW,
    VIEWPORT,
    new_page,
    no_sideways_scroll,
    shot,
    sign_in,
)
from sqlalchemy import Engine, insert, update
from workbench_helpers import add_operator, message_id_of, quarantine_some

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, workers
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, stage
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.queue import control, lease, record

LONG_SKU = "SKU-0001/retail"
PACE = {
    "limit": 4,
    "max_limit": 8,
    "in_flight": 2,
    "accepted_rate": 41.7,
    "paced_rate": None,
    "refused_last_minute": 0,
    "hold_s": 0,
}
DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200)
WORKER = "exchange-worker.shop-01.example-2207"
# A time printed with its fraction of a second: what no page may show.
MICROSECONDS = re.compile(r"\d\d:\d\d:\d\d[.,]\d")


def _busy(engine: Engine, db_url: str) -> None:
    """50 prices taken; a live worker with its pace delivered 20 of them just now and holds 5:
    30 still to deliver, at 20 a minute about 1 min 30 s (as tests/ops/test_backlog.py)."""
    settings = fast_settings(db_url)
    now = datetime.now(UTC)
    stage(engine, [price_row(f"SKU-{n:02d}", 1) for n in range(50)])
    intake.take(engine, None, settings.kinds, now)
    with transaction(engine) as c:
        c.execute(
            insert(workers).values(
                worker_id=WORKER,
                started_at=now,
                heartbeat_at=now,
                breaker_state="closed",
                pace=json.dumps(PACE),
            )
        )
        batch = lease.claim(
            c,
            worker=WORKER,
            now=now,
            limit=20,
            lease_seconds=60,
            max_attempts=3,
            kinds=settings.policies,
        )
        record.record(
            c,
            token=batch.token,
            worker=WORKER,
            now=now,
            outcomes=[(m, DELIVERED) for m in batch.messages],
            kinds=settings.policies,
        )
        lease.claim(
            c,
            worker=WORKER,
            now=now,
            limit=5,
            lease_seconds=60,
            max_attempts=3,
            kinds=settings.policies,
        )


def _refreshes(response: Any) -> str | None:
    return response.headers.get("refresh") if response is not None else None


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_dashboard_redraws_itself_until_switched_off_and_says_when_it_was_drawn(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    base = serve(display_tz="Europe/Moscow")
    add_operator(db, "olga", "viewer")
    page = new_page(browser)
    sign_in(page, base, "olga")
    answer = page.goto(f"{base}/")
    assert _refreshes(answer) == "30; url=/"  # a header: no script needed
    drawn = page.locator("#drawn").inner_text()
    assert re.search(r"Сводка на \d{4}-\d\d-\d\d \d\d:\d\d:\d\d MSK", drawn), drawn
    assert "обновляется сама каждые 30 с" in drawn
    page.click("#refresh-switch")
    assert "сама не обновляется" in page.locator("#drawn").inner_text()
    # The switch holds for this browser: the next visit is not redrawn either.
    assert _refreshes(page.goto(f"{base}/")) is None
    page.click("#refresh-switch")
    assert _refreshes(page.goto(f"{base}/")) == "30; url=/"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_times_are_in_the_display_zone_with_their_age_and_never_microseconds(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve(display_tz="Europe/Moscow")
    add_operator(db, "olga", "operator")
    quarantine_some(db_url, site, LONG_SKU)
    mid = message_id_of(db, LONG_SKU)
    with transaction(db) as connection:
        control.pause(connection, operator="olga", note="price list check", now=datetime.now(UTC))
    page = new_page(browser)
    sign_in(page, base, "olga")
    banner = page.locator("#pause").inner_text()
    # The pause: the absolute time in Moscow, and how long ago beside it.
    assert re.search(r"\d\d:\d\d:\d\d MSK \(\d+ с назад\)", banner), banner
    for path in ("/", "/quarantine", f"/find?q={LONG_SKU}", f"/message/{mid}", "/exchanges"):
        page.goto(f"{base}{path}")
        text = page.locator("body").inner_text()
        assert not MICROSECONDS.search(text), (path, MICROSECONDS.search(text))
        assert "Время указано в поясе Europe/Moscow" in text, path


def _dashboard_data(db: Engine, db_url: str, site: SiteSimulator) -> str:
    quarantine_some(db_url, site, LONG_SKU)
    _busy(db, db_url)
    now = datetime.now(UTC)
    with transaction(db) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange="s1",
                filename="offers.xml",
                started_at=now,
                finished_at=now,
                outcome="failure",
                detail="unmapped price types",
            )
        )
        # the simulator run's worker has left: only WORKER is live
        connection.execute(update(workers).where(workers.c.worker_id != WORKER).values(pace=None))
    return message_id_of(db, LONG_SKU)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_no_page_scrolls_sideways_at_390_px(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    mid = _dashboard_data(db, db_url, site)
    context = browser.new_context(viewport=NARROW, locale="ru-RU")
    page = context.new_page()
    page.goto(f"{base}/login")
    assert no_sideways_scroll(page), "/login"
    sign_in(page, base, "olga")
    wide = {}
    for path in (
        "/",
        "/quarantine",
        f"/find?q={LONG_SKU}",
        f"/message/{mid}",
        "/blocked",
        "/exchanges",
        "/export",
    ):
        page.goto(f"{base}{path}")
        if not no_sideways_scroll(page):
            wide[path] = page.evaluate("document.documentElement.scrollWidth")
        if path == "/":  # the quarantine's: tests/web/test_workbench_narrow_browser.py
            shot(page, "dashboard-narrow")
        if path == "/" and os.environ.get("WORKBENCH_SCREENSHOTS") == "1":
            page.locator("section.last-day").scroll_into_view_if_needed()
            shot(page, "dashboard-chart-narrow")
    assert wide == {}, f"wider than 390 px: {wide}"
    # Rows became cards: a worker's row says what each cell is.
    page.goto(f"{base}/")
    labels = page.evaluate(
        """[...document.querySelectorAll('#workers tr.live td')]
             .map(td => getComputedStyle(td, '::before').content)"""
    )
    assert '"Последний отчёт: "' in labels and '"Темп сайта и предел запросов: "' in labels
    assert page.locator("#workers thead").bounding_box()["height"] <= 1  # the cells say it
    # The chart drawn for a phone: every hour, its text not shrunk below 9 px.
    compact = page.locator("svg.chart.compact")
    assert page.locator("svg.chart.wide").is_hidden() and compact.is_visible()
    assert compact.locator("text.hour").count() == 24
    assert compact.locator("text.hour").first.bounding_box()["height"] >= 9
    context.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_at_1366_px_an_id_breaks_only_after_slashes_dots_and_dashes(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    mid = _dashboard_data(db, db_url, site)
    page = new_page(browser)
    assert page.viewport_size == VIEWPORT
    sign_in(page, base, "olga")
    assert page.locator("#workers td.id").first.inner_text().replace("\n", "") == WORKER
    assert page.evaluate(BROKEN_WORDS) == [], "/"
    assert no_sideways_scroll(page)
    for path in ("/quarantine", f"/find?q={LONG_SKU}", "/blocked", f"/message/{mid}"):
        page.goto(f"{base}{path}")
        assert page.evaluate(BROKEN_WORDS) == [], path
        assert no_sideways_scroll(page), path  # whole words, and still no sideways scroll


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_chart_has_a_scale_a_grid_values_and_every_hour_at_full_width(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve()
    add_operator(db, "olga", "viewer")
    _dashboard_data(db, db_url, site)
    page = new_page(browser)
    sign_in(page, base, "olga")
    chart = page.locator("svg.chart.wide")
    assert page.locator("svg.chart.compact").is_hidden()  # the phone's drawing
    hours = chart.locator("text.hour").all_text_contents()
    assert len(hours) == 24 and len(set(hours)) == 24, hours
    assert hours[-1] == f"{datetime.now(UTC):%H}"  # every page in the display zone (UTC here)
    ticks = [int(t) for t in chart.locator("text.tick").all_text_contents()]
    assert ticks[0] == 0 and len(ticks) >= 2 and ticks == sorted(ticks), ticks
    assert chart.locator("line.grid").count() == len(ticks)
    # This hour's column carries its figures: 20 delivered now, and the simulator run's
    # delivered and failed attempts before (all within this hour or the last).
    values = [int(v) for v in chart.locator("text.value").all_text_contents()]
    assert values and max(values) <= ticks[-1] and sum(values) >= 20, values
    width = chart.bounding_box()["width"]
    room = page.locator("section.last-day").bounding_box()["width"]
    assert width >= room - 2, (width, room)
    # The site's pace and limit, as `exchange status` gives them, beside the chart.
    pace = page.locator("#site-pace").inner_text()
    assert "42 запроса/с" in pace and "предел: 4 из 8 одновременных запросов" in pace, pace
    shot(page, "dashboard")
    page.locator("section.last-day").scroll_into_view_if_needed()
    shot(page, "dashboard-chart")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_dashboard_shows_the_backlog_and_when_it_will_be_done(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str
) -> None:
    base = serve()
    add_operator(db, "olga", "viewer")
    _busy(db, db_url)
    page = new_page(browser)
    sign_in(page, base, "olga")
    backlog = page.locator("#backlog").inner_text()
    assert "Осталось доставить" in backlog and "30 сообщений" in backlog, backlog
    assert "около 1 мин 30 с при нынешнем темпе" in backlog, backlog


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_export_page_offers_the_cli_filters_and_says_it_exports_the_quarantine(
    browser: Any, serve: Callable[..., Any], db: Engine, db_url: str, site: SiteSimulator
) -> None:
    base = serve(display_tz="Europe/Moscow")
    add_operator(db, "olga", "viewer")
    quarantine_some(db_url, site, LONG_SKU, "SKU-0002")
    page = new_page(browser)
    sign_in(page, base, "olga")
    page.goto(f"{base}/export")
    assert page.locator("h1").inner_text() == "Выгрузка карантина"
    says = page.locator("#export-says").inner_text()
    assert "сообщения в карантине" in says and "2 сообщения" in says, says
    form = page.locator("#export-form")
    for name in ("format", "kind", "reason", "aggregate", "since", "until", "superseded"):
        assert form.locator(f"[name={name}]").count() == 1, name
    # The reasons offered are those present, with their counts.
    reasons = form.locator("select[name=reason] option").all_inner_texts()
    assert reasons[1:] == ["сайт отклонил (http-422) — 2"], reasons
    shot(page, "export")
    form.locator("select[name=format]").select_option("json")
    form.locator("input[name=aggregate]").fill(LONG_SKU)
    form.locator("select[name=reason]").select_option("http-422")
    with page.expect_download() as download:
        form.locator("button[type=submit]").click()
    report = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert [e["aggregate"] for e in report["entries"]] == [LONG_SKU]
    # A table people read shows the display zone's times, its labels naming the zone.
    table = page.request.get(f"{base}/export?format=csv&reason=http-422").body()
    assert "В карантине с (Europe/Moscow)" in table.decode("utf-8-sig")
    # A date that is no date is said on the page, in Russian, not as an English error.
    page.goto(f"{base}/export?format=csv&since=yesterday")
    assert "Дата не распознана" in page.locator(".error").inner_text()

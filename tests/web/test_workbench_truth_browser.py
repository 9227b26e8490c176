"""The dashboard tells the truth (issue 24 items 1 and 2), in Debian's chromium: a worker whose
last report is older than max(lease, 3 × poll) is greyed out and silent, never "delivering";
a pause by an operator is said on each worker's row; with no live worker while work waits the
banner is red; what 1C handed over and no worker took, the 1C exchanges that failed and the
sign-ins 1C was refused are on the dashboard."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from browser_helpers import new_page, shot, sign_in
from sqlalchemy import Engine, insert, update
from web_helpers import USER
from workbench_helpers import add_operator

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, staging, workers
from exchange.dev.testing import price_row, stage

STALE_PACE = {
    "limit": 4,
    "max_limit": 8,
    "in_flight": 0,
    "accepted_rate": 169.0,
    "paced_rate": 169.0,
    "refused_last_minute": 3,
    "hold_s": 0,
}


def _worker(engine: Engine, worker_id: str, seen_ago_s: float) -> None:
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=worker_id,
                started_at=now - timedelta(hours=1),
                heartbeat_at=now - timedelta(seconds=seen_ago_s),
                breaker_state="closed",
                pace=json.dumps(STALE_PACE),
            )
        )


def _failed_exchange(engine: Engine, detail: str) -> None:
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(cml_exchanges).values(
                exchange="s1",
                filename="offers.xml",
                started_at=now,
                finished_at=now,
                outcome="failure",
                detail=detail,
            )
        )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_no_live_worker_while_1c_work_waits_turns_the_banner_red(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    _worker(db, "gone-7", seen_ago_s=600)  # exited ten minutes ago
    stage(db, [price_row(f"SKU-{n}", 1, "199.90") for n in range(4)])
    with transaction(db) as connection:
        connection.execute(
            update(staging).values(created_at=datetime.now(UTC) - timedelta(minutes=7))
        )
    _failed_exchange(db, "unmapped price types")
    for _ in range(3):  # a wrong 1C password: a cause (contract 15, issue 34 item 5)
        answer = httpx.get(
            f"{base}/1c_exchange.php?type=catalog&mode=checkauth", auth=(USER, "wrong")
        )
        assert answer.text.startswith("failure")
    page = new_page(browser)
    sign_in(page, base, "olga")
    banner = page.locator("#pause")
    assert "stopped" in (banner.get_attribute("class") or "")
    assert "Ничего не доставляется" in banner.inner_text()
    row = page.locator("#workers tr.not-live")
    assert row.count() == 1
    assert "молчит с" in row.locator("td.delivery").inner_text()
    assert row.locator("td.pace").inner_text() == "—"  # never the stale 169 requests/s
    assert "идёт" not in page.locator("#workers").inner_text()
    assert page.locator("#untaken").inner_text() == "4"
    assert "7 мин" in page.locator("#untaken-oldest").inner_text()
    failed = page.locator("#onec-failed a")
    assert failed.inner_text() == "1" and failed.get_attribute("href") == "/exchanges"
    assert page.locator("#onec-refused").inner_text().endswith(": 3")
    needs = page.locator("#needs").inner_text()
    assert "ни один обработчик не работает" in needs
    assert "обмен с 1С завершился ошибкой" in needs and "unmapped price types" in needs
    assert "1С не может войти: 3 неверных входа" in needs
    shot(page, "dashboard-stopped")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_each_worker_row_says_paused_by_the_operator(
    browser: Any, serve: Callable[..., Any], db: Engine
) -> None:
    base = serve()
    add_operator(db, "olga", "operator")
    _worker(db, "live-1", seen_ago_s=1)
    page = new_page(browser)
    sign_in(page, base, "olga")
    assert page.locator("#workers tr.live td.delivery").inner_text() == "идёт"
    assert "Доставка идёт" in page.locator("#pause").inner_text()
    page.fill("#pause input[name=note]", "price list check")
    page.click("#pause button.danger")
    page.wait_for_url(f"{base}/")
    assert page.locator("#workers tr.live td.delivery").inner_text() == (
        "остановлена оператором olga"
    )
    assert "остановлена оператором olga" in page.locator("#needs").inner_text()
    shot(page, "dashboard-paused")

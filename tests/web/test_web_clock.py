"""The HTTP side reads the time of every decision from one injected clock (``WebConfig.clock``,
the real one unless a test gives another): at a fixed instant, the dashboard counts a worker
live or silent by its last report and says when it was drawn, and a workbench session ends
when its lifetime has passed on that clock. With the real clock these took a day's wait or a
race with a heartbeat; here the clock stands at 2030, years from the real one, so a decision
that read the real clock instead would see every report from the future (live) and every
session not yet begun."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert
from web_helpers import running, web_settings
from workbench_helpers import add_operator, close_all, signed_in

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import workers
from exchange.domain.clock import FakeClock
from exchange.web.keys import COOKIE_MAX_AGE_S

AT = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
ROW = re.compile(r'<tr class="[^"]*" data-state="([a-z-]+)"><td[^>]*>(worker\d)</td>')


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_all()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(AT)


@pytest.fixture
def bench(db_url: str, db: Engine, tmp_path: Path, clock: FakeClock) -> Iterator[str]:
    with running(web_settings(db_url, tmp_path / "1c"), clock=clock) as base:
        add_operator(db, "victor", "viewer")
        yield base


def _reported(db: Engine, worker_id: str, at: datetime) -> None:
    with transaction(db) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=worker_id,
                started_at=at - timedelta(hours=1),
                heartbeat_at=at,
                paused_reason=None,
                breaker_state="closed",
                breaker_until=None,
                pace=None,
            )
        )


def test_the_dashboard_counts_a_worker_live_or_silent_at_the_clocks_instant(
    bench: str, db: Engine, db_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    live_within = bootstrap.web_config(web_settings(db_url, tmp_path / "1c")).live_within
    # 10 s either side of the limit: the decision is made at the clock's instant, exactly.
    # Contract 15: quiet for 30 s, a worker is shown silent (still live, contract 6).
    _reported(db, "worker1", AT - timedelta(seconds=live_within - 10))
    _reported(db, "worker2", AT - timedelta(seconds=live_within + 10))
    _reported(db, "worker3", AT - timedelta(seconds=25))
    client = signed_in(bench, "victor")
    page = client.get("/?lang=en").text
    drawn = re.search(r'<p id="drawn".*?</p>', page, re.S)
    assert drawn is not None and "2030-06-01 12:00:00" in drawn.group(0)
    assert {"worker1": "silent", "worker2": "not-live", "worker3": "live"} == {
        w: s for s, w in ROW.findall(page)
    }
    clock.advance(20)  # worker1's last report is now 10 s past the limit too
    page = client.get("/?lang=en").text
    assert {"worker1": "not-live", "worker2": "not-live", "worker3": "silent"} == {
        w: s for s, w in ROW.findall(page)
    }


def test_a_workbench_session_ends_when_its_lifetime_has_passed_on_the_clock(
    bench: str, clock: FakeClock
) -> None:
    client = signed_in(bench, "victor")
    assert 200 == client.get("/").status_code
    clock.advance(COOKIE_MAX_AGE_S - 60)  # a minute before the end: still open
    assert 200 == client.get("/").status_code
    clock.advance(120)  # a minute past it: the sign-in page
    answer = client.get("/")
    assert (303, "/login") == (answer.status_code, answer.headers["location"])

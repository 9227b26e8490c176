"""``exchange status`` (issue 3, item 4; contract 6): counts by state, the queue figures, each
worker's breaker and 401/403 pause, the oldest quarantined entry per reason, and blocked
aggregates with their cause; as JSON and as tables. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from optools import DELIVERED, mid, refused, rejected_ids, settle, take
from rich.console import Console
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.dev.testing import fast_settings, posting_row, price_row, raw_row
from exchange.domain.clock import FakeClock
from exchange.ops import status
from exchange.settings import Settings

HOUR = 3600.0


def token_refused(request: httpx.Request) -> httpx.Response:
    return httpx.Response(401, json={"error": "unauthorized"})


def run_a_cycle_against_a_site_that_refuses_the_token(
    db_url: str, engine: Engine, clock: FakeClock
) -> None:
    # A day's gap timeout: D-5 v3 still waits for its v2 instead of being quarantined.
    settings = fast_settings(db_url, "https://shop.test", gap_timeout=24 * HOUR)
    worker = bootstrap.worker(
        settings, engine, clock=clock, transport=httpx.MockTransport(token_refused)
    )

    async def go() -> None:
        try:
            await worker.cycle()
        finally:
            await worker.target.aclose()

    asyncio.run(go())


@pytest.fixture
def clock() -> FakeClock:
    # Staging rows get created_at from the database's clock: start the fake one at the real
    # time (a few seconds ahead, for the time the set-up takes), so that ages measured from
    # created_at are what an operator would see.
    return FakeClock(datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5))


@pytest.fixture
def queue(db_url: str, engine: Engine, settings: Settings, clock: FakeClock) -> dict[str, Any]:
    """Three hours of work, then a worker whose site refuses the token:

    t+0 h   SKU-A and SKU-B refused (http-422); D-5 v1 delivered, v3 waits for v2 (a gap)
    t+1 h   SKU-C refused (http-422); D-1 v1 refused (http-400), v2 held behind it
    t+2 h   a row of an unknown kind (a quarantine record)
    t+3 h   SKU-W taken; the worker's request gets 401: delivery paused, nothing charged
    """
    start = clock.now()
    take(
        engine,
        settings,
        clock,
        [price_row("SKU-A", 1), price_row("SKU-B", 1), posting_row("D-5", 1)],
    )
    settle(
        engine, settings, clock, {"SKU-A": refused(422), "SKU-B": refused(422), "D-5": DELIVERED}
    )
    take(engine, settings, clock, [posting_row("D-5", 3)])
    clock.advance(HOUR)
    take(
        engine,
        settings,
        clock,
        [price_row("SKU-C", 1), posting_row("D-1", 1), posting_row("D-1", 2)],
    )
    settle(engine, settings, clock, {"SKU-C": refused(422), "D-1": refused(400)})
    clock.advance(HOUR)
    take(engine, settings, clock, [raw_row("stock", "W-1", 1, "{}")])
    clock.advance(HOUR)
    take(engine, settings, clock, [price_row("SKU-W", 1)])
    run_a_cycle_against_a_site_that_refuses_the_token(db_url, engine, clock)
    return {
        "start": start,
        "SKU-A": mid(engine, "SKU-A", 1),
        "D-1": mid(engine, "D-1", 1),
        "D-5 v3": mid(engine, "D-5", 3),
        "rejected": rejected_ids(engine)[0],
    }


def figures(engine: Engine, settings: Settings, clock: FakeClock) -> status.Status:
    with transaction(engine, read_only=True) as c:
        return status.status(c, clock.now(), settings.policies)


def render(tables: list[Any]) -> list[str]:
    console = Console(file=io.StringIO(), width=250, record=True)
    for table in tables:
        console.print(table)
    return console.export_text().splitlines()


def test_status_json_keeps_the_contract_fields(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    data = figures(engine, settings, clock).as_json()

    assert {
        "new": 3,  # D-5 v3 (gap), D-1 v2 (held), SKU-W (handed back uncharged on the 401)
        "in_progress": 0,
        "delivered": 1,
        "delayed": 0,
        "quarantined": 5,  # SKU-A, SKU-B, SKU-C, D-1 v1 and the rejected row
        "cancelled": 0,
        "withheld": 0,  # contract 13: a channel's withheld prices, counted from the start
    } == data["counts"]
    assert 3 == data["new_messages"]
    assert 3 * HOUR <= data["oldest_undelivered_age_s"] < 3 * HOUR + 60  # D-5 v3, staged at t+0
    assert (0.0, 0.0) == (data["error_share"], data["delivery_rate_per_min"])  # none in 15 min


def test_status_json_gives_the_quarantine_by_reason_with_its_oldest_entry(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    by_reason = figures(engine, settings, clock).as_json()["quarantine_by_reason"]

    assert ["http-400", "http-422", "unknown-kind"] == list(by_reason)
    assert {
        "count": 3,
        "oldest_message_id": queue["SKU-A"],
        "oldest_quarantined_at": queue["start"].isoformat(),
        "oldest_age_s": 3 * HOUR,
    } == by_reason["http-422"]
    assert (1, queue["D-1"], 2 * HOUR) == (
        by_reason["http-400"]["count"],
        by_reason["http-400"]["oldest_message_id"],
        by_reason["http-400"]["oldest_age_s"],
    )
    assert (1, queue["rejected"], HOUR) == (
        by_reason["unknown-kind"]["count"],
        by_reason["unknown-kind"]["oldest_message_id"],
        by_reason["unknown-kind"]["oldest_age_s"],
    )


def test_status_json_shows_each_worker_its_breaker_and_a_pause_by_401(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    data = figures(engine, settings, clock).as_json()

    [worker] = data["workers"]
    assert ("test-worker", "closed", 0.0) == (
        worker["worker_id"],
        worker["breaker"],
        worker["heartbeat_age_s"],
    )
    assert "401" in worker["paused"]
    assert (True, False) == (data["delivery_paused"], data["breaker_open"])


def test_a_worker_not_seen_for_an_hour_is_shown_not_live_and_holds_nothing_back(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    """Contract 15: a worker never vanishes from ``status`` (its row is kept a day), but one
    silent for an hour no longer holds delivery back with its breaker or pause."""
    clock.advance(HOUR + 1)
    data = figures(engine, settings, clock).as_json()
    assert [("not-live", False)] == [(w["state"], w["live"]) for w in data["workers"]]
    assert (False, False) == (data["delivery_paused"], data["breaker_open"])
    clock.advance(24 * HOUR)
    assert [] == figures(engine, settings, clock).as_json()["workers"]


def test_status_json_names_blocked_aggregates_with_what_holds_them(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    blocked = figures(engine, settings, clock).as_json()["blocked"]

    assert [
        ("financial_posting", "D-1", 0, "quarantine", queue["D-1"]),
        ("financial_posting", "D-5", 1, "gap", queue["D-5 v3"]),
    ] == [
        (b["kind"], b["aggregate"], b["delivered_through"], b["held_by"], b["message_id"])
        for b in blocked
    ]
    assert queue["D-1"] in blocked[0]["cause"]
    assert "version 2" in blocked[1]["cause"]


def test_the_status_tables_show_the_oldest_quarantined_entry_per_reason(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    lines = render(status.tables(figures(engine, settings, clock)))

    [http_422] = [line for line in lines if "http-422" in line]
    assert queue["SKU-A"] in http_422
    assert " 3 " in http_422 and "3 h" in http_422
    [rejected] = [line for line in lines if "unknown-kind" in line]
    assert queue["rejected"] in rejected and "1 h" in rejected


def test_the_status_tables_show_a_paused_worker_and_blocked_aggregates(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    lines = render(status.tables(figures(engine, settings, clock)))

    [worker] = [line for line in lines if "test-worker" in line]
    assert "PAUSED" in worker and "401" in worker and "answers" in worker
    [d1] = [line for line in lines if "D-1" in line and "blocked" in line]
    assert "blocked by quarantine" in d1 and queue["D-1"] in d1
    [d5] = [line for line in lines if "D-5" in line and "blocked" in line]
    assert "blocked by gap" in d5
    for label, value in (("new messages", "3"), ("oldest undelivered", "3 h")):
        assert any(label in line and value in line for line in lines), (label, lines)


def test_the_paused_worker_cell_says_why_in_russian_under_russian(
    engine: Engine, settings: Settings, clock: FakeClock, queue: dict[str, Any]
) -> None:
    """Contract 15: the worker's cause (``HTTP 401: the site refused the token``, English in
    --json) is said in Russian after «ОСТАНОВЛЕНА», as the history says it."""
    lines = render(status.tables(figures(engine, settings, clock), lang="ru"))

    [worker] = [line for line in lines if "test-worker" in line]
    assert "ОСТАНОВЛЕНА: HTTP 401: сайт не принял токен" in worker, worker
    assert "refused" not in worker, worker
    assert (
        "HTTP 401: the site refused the token"
        == figures(engine, settings, clock).as_json()["workers"][0]["paused"]
    )


def test_the_status_tables_show_data_as_text_never_as_markup(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # 1C names the aggregate; rich would take "[red]" for a style and swallow it.
    take(engine, settings, clock, [posting_row("[red]D-9", 2)])
    lines = render(status.tables(figures(engine, settings, clock)))
    assert any("[red]D-9" in line and "blocked by gap" in line for line in lines), lines


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "-"),
        (0, "0 s"),
        (59.9, "59 s"),
        (65, "1 min 5 s"),
        (3600, "1 h"),
        (3 * 3600 + 120 + 7, "3 h 2 min"),
        (2 * 86_400 + 3 * 3600, "2 d 3 h"),
        (-5, "0 s"),  # a clock a little behind another host's
    ],
)
def test_ages_read_as_the_two_largest_units(seconds: float | None, shown: str) -> None:
    assert shown == status.human_age(seconds)


def test_a_quarantine_of_1cs_data_is_no_error_of_the_channel_in_the_error_share(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """Words 38 item 5: Russian ``exchange status`` said «доля ошибок 100 %» where the only
    event was a rule quarantine (1C's price breaking the channel's rule: its data, not a
    failure of the channel). Quarantines of 1C's data (invalid-for-channel, channel-rule,
    invalid-contract) are attempts, never errors; a channel's refusal (http-422) still is."""
    from exchange.domain.retry import Decision
    from exchange.domain.states import Event, State

    def ruled(reason: str) -> Decision:
        return Decision(
            Event.QUARANTINED,
            State.QUARANTINED,
            "old_price 900 is below price 1000",
            reason=reason,
            http_status=None,
        )

    take(engine, settings, clock, [price_row("SKU-R", 1), price_row("SKU-I", 1)])
    settle(
        engine,
        settings,
        clock,
        {"SKU-R": ruled("channel-rule"), "SKU-I": ruled("invalid-for-channel")},
    )
    shown = figures(engine, settings, clock)
    assert shown.error_share == 0.0, shown.error_share
    take(engine, settings, clock, [price_row("SKU-H", 1)])
    settle(engine, settings, clock, {"SKU-H": refused(422)})
    assert figures(engine, settings, clock).error_share == pytest.approx(1 / 3, abs=0.001)

"""The operators' new flags through the installed command, as an operator types them:
``quarantine list|retry|cancel --superseded``, bulk ``cancel`` with ``--dry-run``/``--yes``,
``--limit`` and EXCHANGE_BULK_LIMIT, ``prune [--dry-run]`` with EXCHANGE_RETENTION_DAYS, and
the ``status`` tables and JSON. Each command runs in the test's process
(tests/support/clitools.py).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from clitools import Cli, assert_one_line_error, describe, run_json
from optools import (
    DELIVERED,
    history_rows,
    mid,
    refused,
    settle,
    snapshot,
    states,
    take,
)
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.testing import fast_settings, posting_row, price_row
from exchange.domain.clock import FakeClock
from exchange.settings import Settings

SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def clock() -> FakeClock:
    """Forty days ago: what the set-up delivers is old enough for the default retention."""
    return FakeClock(datetime.now(UTC) - timedelta(days=40))


@pytest.fixture
def queue(db_url: str, engine: Engine, settings: Settings, clock: FakeClock) -> dict[str, str]:
    """Forty days ago: SKU-1, SKU-2 and SKU-3 refused (http-422), D-1 v1 refused (http-400)
    with v2 held behind it, SKU-OLD v2 delivered (v1, taken with it, superseded); then SKU-1 v2
    delivered, which makes the quarantined SKU-1 v1 superseded after quarantine. Now: a
    worker's request for SKU-W is refused with 401, so its delivery is paused."""
    skus = ["SKU-1", "SKU-2", "SKU-3"]
    take(
        engine,
        settings,
        clock,
        [price_row(s, 1) for s in [*skus, "SKU-OLD"]]
        + [price_row("SKU-OLD", 2), posting_row("D-1", 1), posting_row("D-1", 2)],
    )
    settle(
        engine,
        settings,
        clock,
        {s: refused(422) for s in skus} | {"SKU-OLD": DELIVERED, "D-1": refused(400)},
    )
    take(engine, settings, clock, [price_row("SKU-1", 2)])
    settle(engine, settings, clock, {"SKU-1": DELIVERED})
    clock.advance(timedelta(days=40).total_seconds())
    take(engine, settings, clock, [price_row("SKU-W", 1)])
    worker = bootstrap.worker(
        fast_settings(db_url, "https://shop.test", gap_timeout=86_400),
        engine,
        clock=clock,
        transport=httpx.MockTransport(lambda request: httpx.Response(403)),
    )

    async def cycle() -> None:
        try:
            await worker.cycle()
        finally:
            await worker.target.aclose()

    asyncio.run(cycle())
    return {
        "superseded": mid(engine, "SKU-1", 1),
        "SKU-2": mid(engine, "SKU-2", 1),
        "SKU-3": mid(engine, "SKU-3", 1),
        "D-1": mid(engine, "D-1", 1),
        "SKU-1 v2": mid(engine, "SKU-1", 2),
        "SKU-OLD v1": mid(engine, "SKU-OLD", 1),
        "SKU-OLD": mid(engine, "SKU-OLD", 2),
    }


def test_quarantine_list_superseded_shows_exactly_the_superseded_prices(
    cli: Cli, db_url: str, queue: dict[str, str]
) -> None:
    superseded, everything = cli.many(
        [["quarantine", "list", "--superseded", "--json"], ["quarantine", "list", "--json"]],
        db=db_url,
    )

    assert 0 == superseded.returncode, describe(superseded)
    assert [(queue["superseded"], True)] == [
        (e["message_id"], e["superseded_after_quarantine"]) for e in json.loads(superseded.stdout)
    ]
    flags = {
        e["message_id"]: e["superseded_after_quarantine"] for e in json.loads(everything.stdout)
    }
    assert {
        queue["superseded"]: True,
        queue["SKU-2"]: False,
        queue["SKU-3"]: False,
        queue["D-1"]: False,
    } == flags


def test_bulk_cancel_superseded_shows_first_and_cancels_with_yes(
    cli: Cli, db_url: str, engine: Engine, queue: dict[str, str]
) -> None:
    before = states(engine)

    shown = cli(
        "quarantine", "cancel", "--superseded", "--note", "newer price on the site", db=db_url
    )

    assert 0 == shown.returncode, describe(shown)
    assert before == states(engine)
    assert "would cancel 1 message" in shown.stdout, describe(shown)
    assert queue["superseded"] in shown.stdout
    assert "nothing changed: add --yes to cancel it" in shown.stdout

    dry = cli(
        "quarantine", "cancel", "--superseded", "--note", "x", "--dry-run", "--yes", db=db_url
    )
    assert 0 == dry.returncode and "would cancel 1" in dry.stdout, describe(dry)
    assert before == states(engine)

    done = cli(
        "quarantine",
        "cancel",
        "--superseded",
        "--note",
        "newer price on the site",
        "--yes",
        "--operator",
        "alice",
        db=db_url,
    )

    assert 0 == done.returncode, describe(done)
    assert "cancelled 1 message" in done.stdout
    assert ("cancelled", "operator") == states(engine)[queue["superseded"]]
    last = history_rows(engine, queue["superseded"])[-1]
    assert ("alice", "newer price on the site") == (last["operator"], last["note"])
    assert {k: v for k, v in before.items() if k != queue["superseded"]} == {
        k: v for k, v in states(engine).items() if k != queue["superseded"]
    }


def test_bulk_actions_over_the_bulk_limit_are_refused_unless_limit_names_the_number(
    cli: Cli, db_url: str, engine: Engine, queue: dict[str, str]
) -> None:
    before = states(engine)
    over = {"EXCHANGE_BULK_LIMIT": "2"}

    refused_retry, refused_cancel, too_low = cli.many(
        [
            ["quarantine", "retry", "--reason", "http-422", "--yes"],
            ["quarantine", "cancel", "--reason", "http-422", "--note", "x", "--yes"],
            ["quarantine", "retry", "--reason", "http-422", "--yes", "--limit", "2"],
        ],
        db=db_url,
        env=over,
    )

    for result in (refused_retry, refused_cancel, too_low):
        assert_one_line_error(result, "3 messages", "--limit 3")
    assert before == states(engine)

    allowed = cli(
        "quarantine", "retry", "--reason", "http-422", "--yes", "--limit", "3", db=db_url, env=over
    )

    assert 0 == allowed.returncode, describe(allowed)
    assert "retried 3 messages" in allowed.stdout
    after = states(engine)
    assert {("new", None)} == {after[queue[k]] for k in ("superseded", "SKU-2", "SKU-3")}


@SQLITE_ONLY
def test_bulk_cancel_without_a_filter_is_refused(
    cli: Cli, db_url: str, queue: dict[str, str]
) -> None:
    result = cli("quarantine", "cancel", "--note", "everything", "--yes", db=db_url)
    assert_one_line_error(result, "at least one filter", "--superseded")


def test_prune_dry_run_changes_nothing_and_prune_removes_what_ended_long_ago(
    cli: Cli, db_url: str, engine: Engine, queue: dict[str, str]
) -> None:
    before = snapshot(engine)

    dry, kept_longer = cli.many(
        [["prune", "--dry-run"], ["prune"]],
        db=db_url,
        envs=[{}, {"EXCHANGE_RETENTION_DAYS": "100"}],
    )

    assert 0 == dry.returncode, describe(dry)
    # 40 days ago SKU-OLD v1 was superseded, SKU-OLD v2 and SKU-1 v2 delivered; eight staging
    # rows were taken then (SKU-W's, taken now, stays). Each price keeps its latest message.
    assert "would remove 1 delivered or cancelled message(s)" in dry.stdout, describe(dry)
    assert "8 taken staging row(s)" in dry.stdout, describe(dry)
    assert 0 == kept_longer.returncode, describe(kept_longer)
    assert "removed 0 delivered or cancelled message(s)" in kept_longer.stdout
    assert before == snapshot(engine)

    pruned = cli("prune", db=db_url)

    assert 0 == pruned.returncode, describe(pruned)
    assert "removed 1 delivered or cancelled message(s)" in pruned.stdout, describe(pruned)
    remaining = states(engine)
    assert queue["SKU-OLD v1"] not in remaining
    kept = ("superseded", "SKU-2", "SKU-3", "D-1", "SKU-OLD", "SKU-1 v2")
    assert {queue[k] for k in kept} <= set(remaining)


def test_status_json_adds_the_quarantine_by_reason_and_the_paused_worker(
    cli: Cli, db_url: str, queue: dict[str, str]
) -> None:
    figures: dict[str, Any] = run_json(cli, "status", "--json", db=db_url, code=1)

    assert {"new", "in_progress", "delivered", "delayed", "quarantined", "cancelled"} <= set(
        figures["counts"]
    )
    for field in ("oldest_undelivered_age_s", "error_share", "delivery_rate_per_min"):
        assert field in figures
    assert {"http-400": 1, "http-422": 3} == {
        reason: entry["count"] for reason, entry in figures["quarantine_by_reason"].items()
    }
    assert queue["superseded"] == figures["quarantine_by_reason"]["http-422"]["oldest_message_id"]
    assert figures["delivery_paused"] is True
    [worker] = figures["workers"]
    assert "403" in worker["paused"]


@SQLITE_ONLY
def test_status_prints_tables_with_the_oldest_quarantined_per_reason_and_the_paused_worker(
    cli: Cli, db_url: str, queue: dict[str, str]
) -> None:
    result = cli("status", db=db_url)

    assert 1 == result.returncode, describe(result)  # quarantine not empty, delivery paused
    lines = result.stdout.splitlines()
    [http_422] = [line for line in lines if "http-422" in line]
    assert queue["superseded"] in http_422 and "40 d" in http_422, describe(result)
    [worker] = [line for line in lines if "test-worker" in line]
    assert "PAUSED" in worker and "403" in worker, describe(result)
    [blocked] = [line for line in lines if "D-1" in line and "blocked" in line]
    assert queue["D-1"] in blocked, describe(result)

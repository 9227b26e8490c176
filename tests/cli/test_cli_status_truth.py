"""``exchange status`` tells the truth (issue 24 items 1 and 2, contract 6): a worker is live only
while its last report is younger than max(lease, 3 × poll); work waiting with no live worker is
a cause (``no-live-worker``); what 1C handed over and no worker took is shown (``intake``); a
1C exchange that signed in and failed is a cause until a later one succeeds."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from clitools import Cli, describe, run_json
from sqlalchemy import Engine, insert, update

from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, staging, workers
from exchange.dev.testing import price_row, stage


def _worker(engine: Engine, worker_id: str, seen_ago_s: float) -> None:
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id=worker_id,
                started_at=now - timedelta(hours=1),
                heartbeat_at=now - timedelta(seconds=seen_ago_s),
                breaker_state="closed",
            )
        )


def _stage_old(engine: Engine, sku: str, age_s: float) -> None:
    stage(engine, [price_row(sku, 1, "199.90")])
    with transaction(engine) as connection:
        connection.execute(
            update(staging).values(created_at=datetime.now(UTC) - timedelta(seconds=age_s))
        )


def test_a_silent_worker_is_not_live_and_waiting_work_without_one_needs_a_person(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    # lease 60 s, poll 5 s: live for 60 s after a report
    _worker(engine, "gone-7", seen_ago_s=600)
    _stage_old(engine, "SKU-1", age_s=300)
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert [(w["worker_id"], w["live"]) for w in figures["workers"]] == [("gone-7", False)]
    assert figures["needs_person_causes"] == ["no-live-worker"]
    assert "no worker is live" in figures["needs_person"][0]
    assert figures["intake"]["untaken"] == 1
    assert figures["intake"]["oldest_untaken_age_s"] >= 300
    text = cli("status", db=db_url)
    assert text.returncode == 1, describe(text)
    tables = text.stdout.split("needs a person")[0]
    assert "SILENT since" in tables and "running" not in tables
    assert "received from 1C, not taken yet: 1" in text.stdout

    _worker(engine, "live-1", seen_ago_s=1)
    figures = run_json(cli, "status", "--json", db=db_url)
    assert {w["worker_id"]: w["live"] for w in figures["workers"]} == {
        "gone-7": False,
        "live-1": True,
    }
    assert figures["needs_person_causes"] == []


def test_work_younger_than_the_live_window_is_not_yet_a_cause_older_work_is(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    """Contract 6: work waiting with no live worker is a cause once it is older than
    max(lease, 3 x poll) (60 s here); a row just handed over is a worker's next poll away."""
    _stage_old(engine, "SKU-2", age_s=5)  # just handed over: a worker's next poll takes it
    figures = run_json(cli, "status", "--json", db=db_url)
    assert figures["workers"] == [] and figures["needs_person_causes"] == []
    assert figures["intake"]["untaken"] == 1
    _stage_old(engine, "SKU-3", age_s=120)  # every untaken row is now 120 s old
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert figures["workers"] == [] and figures["needs_person_causes"] == ["no-live-worker"]


def test_a_cleanly_stopped_worker_is_said_stopped_not_an_hour_silent(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    """After a SIGTERM the worker's row is marked stopped: ``status`` says when the last one
    stopped, never "no worker has reported in the last 1 h"; a stopped worker is no worker."""
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(workers).values(
                worker_id="vm-24708",
                started_at=now - timedelta(hours=2),
                heartbeat_at=now - timedelta(seconds=10),
                stopped_at=now - timedelta(seconds=10),
                breaker_state="closed",
            )
        )
    figures = run_json(cli, "status", "--json", db=db_url)
    assert figures["workers"] == []
    assert figures["last_stopped"]["worker_id"] == "vm-24708"
    assert 10 <= figures["last_stopped"]["stopped_age_s"] < 70  # the CLI starts in under 60 s
    text = cli("status", db=db_url)
    said = " ".join(text.stdout.split())
    assert re.search(r"the last worker, vm-24708, stopped (\d+ min )?\d+ s ago", said), said
    assert "no worker has reported" not in said


def test_a_failed_1c_exchange_needs_a_person_until_a_later_one_succeeds(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    now = datetime.now(UTC)

    def exchange(outcome: str, detail: str) -> None:
        with transaction(engine) as connection:
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

    exchange("staged", "12 prices")
    exchange("failure", "not well-formed XML")
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert figures["needs_person_causes"] == ["exchange-1c-failed"]
    assert "not well-formed XML" in figures["needs_person"][0]
    exchange("staged", "12 prices")
    figures = run_json(cli, "status", "--json", db=db_url)
    assert figures["needs_person_causes"] == []
    assert figures["exchanges_1c"]["by_outcome"] == {"staged": 2, "failure": 1}

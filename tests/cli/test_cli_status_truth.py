"""``exchange status`` tells the truth (issue 24 items 1 and 2, contract 6): a worker is live only
while its last report is younger than max(lease, 3 × poll); work waiting with no live worker is
a cause (``no-live-worker``); what 1C handed over and no worker took is shown (``intake``); a
1C exchange that signed in and failed is a cause until a later one succeeds."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta

from clitools import Cli, describe, run_json
from sqlalchemy import Engine, insert, update

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import cml_exchanges, sign_in_refusals, staging, workers
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.queue import control


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
    """After a SIGTERM the worker's row is marked stopped: ``status`` shows it stopped, with
    when, and says when the last one stopped, never "no worker has reported in the last 1 h";
    a stopped worker is never live (contract 15)."""
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
    assert [(w["worker_id"], w["state"], w["live"]) for w in figures["workers"]] == [
        ("vm-24708", "stopped", False)
    ]
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


def test_a_worker_started_again_under_its_id_is_live_and_status_exits_0(
    cli: Cli, db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    """Issue 34 item 1: the shipped configuration fixes EXCHANGE_WORKER_ID; after a clean stop
    and a start under the same id, ``status`` shows the worker live (never "no worker is
    live", exit 1), and the pause agrees with its row (item 2)."""
    settings = fast_settings(db_url, site.url)
    first = bootstrap.worker(settings, engine, rng=random.Random(1))
    run_worker(first)
    first.retire()
    _stage_old(engine, "SKU-9", age_s=120)
    again = bootstrap.worker(settings, engine, rng=random.Random(2))
    run_worker(again, lambda w: w.cycle())
    figures = run_json(cli, "status", "--json", db=db_url)
    assert [(w["worker_id"], w["state"], w["live"]) for w in figures["workers"]] == [
        ("test-worker", "live", True)
    ]
    assert (figures["needs_person_causes"], figures["delivery_paused"], figures["pause"]) == (
        [],
        False,
        None,
    )
    text = cli("status", db=db_url)
    assert text.returncode == 0, describe(text)
    assert "running" in text.stdout and "no worker is live" not in text.stdout


def test_an_operators_pause_is_delivery_paused_in_the_json_and_the_rows(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    """Issue 34 item 2 (contract 15): ``delivery_paused`` is true for any pause; ``pause``
    says by whom (``operator_pause`` kept one release as its alias); the worker row says
    paused, never ``delivery: running`` beside it."""
    _worker(engine, "w1", seen_ago_s=1)
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="ревизия", now=now)
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert figures["delivery_paused"] is True
    pause = figures["pause"]
    assert (pause["by"], pause["operator"], pause["note"]) == ("operator", "olga", "ревизия")
    assert abs((datetime.fromisoformat(pause["since"]) - now).total_seconds()) < 1
    assert figures["operator_pause"]["operator"] == "olga"
    text = " ".join(cli("status", db=db_url).stdout.split())
    assert "PAUSED by operator olga" in text and "running" not in text.split("needs a person")[0]


def test_wrong_1c_passwords_since_a_time_are_a_cause_status_exits_1_for(
    cli: Cli, db_url: str, engine: Engine
) -> None:
    """Issue 34 item 5 (contract 15): a summary row serve wrote (another process) is read by
    ``status``: the cause ``sign-in-refused:1c``, exit 1, with how many since when."""
    now = datetime.now(UTC)
    with transaction(engine) as connection:
        connection.execute(
            insert(sign_in_refusals).values(
                door="1c", count=7, first_at=now - timedelta(minutes=20), last_at=now
            )
        )
    figures = run_json(cli, "status", "--json", db=db_url, code=1)
    assert figures["needs_person_causes"] == ["sign-in-refused:1c"]
    assert figures["sign_ins_refused"]["1c"]["count"] == 7
    assert figures["needs_person"][0].startswith("1C cannot sign in: 7 wrong user or password")
    text = cli("status", db=db_url)
    assert text.returncode == 1 and "1C cannot sign in" in text.stdout, describe(text)

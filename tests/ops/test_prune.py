"""Retention (issue 3, item 7): ``prune`` removes delivered and cancelled messages that ended
more than EXCHANGE_RETENTION_DAYS ago, with their history, and staging rows taken that long
ago; never a quarantined or pending message, never an aggregate's cursor, and never the latest
accepted message of a price, nor its latest delivered one (contract 13, "Prune"). In batches,
each its own transaction. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from optools import (
    DELIVERED,
    claim,
    done_version,
    history_counts,
    mid,
    refused,
    rejected_ids,
    settle,
    snapshot,
    staging_rows,
    stale_at_site,
    states,
    take,
)
from sqlalchemy import Engine, func, insert, select

from exchange import app as bootstrap
from exchange import runner
from exchange.db.engine import make_engine, transaction
from exchange.db.known_prices import DbKnownPrices
from exchange.db.schema import cml_exchanges, cml_packages, history, messages
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.testing import fast_settings, posting_row, price_row, raw_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops import prune, quarantine
from exchange.ops.quarantine import Filters
from exchange.queue import coalesce
from exchange.settings import Settings

DAYS = 30.0
GAP = 600.0  # the gap timeout of tests/ops/conftest.py's ``settings``
OLD = timedelta(days=DAYS + 1)
KINDS = KindPolicies.of(DEFAULT_KINDS)


def run_prune(engine: Engine, clock: FakeClock, **options: Any) -> prune.PruneReport:
    return prune.prune(
        engine, None, now=clock.now(), retention_days=DAYS, **({"kinds": KINDS} | options)
    )


def cancel(engine: Engine, settings: Settings, clock: FakeClock, ids: list[str]) -> None:
    with transaction(engine) as c:
        quarantine.cancel(
            c,
            ids,
            Filters(),
            operator="petrov",
            note="closed",
            now=clock.now(),
            kinds=settings.policies,
        )


def delayed(clock: FakeClock, days: float) -> Decision:
    """A temporary failure whose next try is ``days`` away: pending, and not due meanwhile."""
    return Decision(
        Event.RETRY_SCHEDULED,
        State.DELAYED,
        "503 from the site",
        http_status=503,
        next_try_at=clock.now() + timedelta(days=days),
        delay_s=days * 86_400,
    )


@dataclass(frozen=True)
class Aged:
    """The ``aged`` data built once in a SQLite file: its ids and the clock's time after."""

    path: Path
    ids: dict[str, str]
    now: datetime


@pytest.fixture(scope="module")
def aged_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Aged:
    """``aged``'s data made once per module (and xdist worker) on SQLite; each test copies the
    file (as tests/conftest.py copies the migrated template): eleven transactions of the
    pipeline per test were most of this module's time."""
    path = tmp_path_factory.mktemp("aged") / "aged.db"
    url = sqlite_copy(path)
    engine, clock = make_engine(url), FakeClock()
    try:
        ids = build_aged(engine, fast_settings(url, gap_timeout=GAP), clock)
    finally:
        engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Aged(path, ids, clock.now())


@pytest.fixture
def aged(
    request: pytest.FixtureRequest, engine: Engine, settings: Settings, clock: FakeClock
) -> dict[str, str]:
    """``build_aged``'s data in the test's database, the clock where it leaves it. On SQLite a
    copy of the module's one build; on PostgreSQL built for the test (the pool's reset
    empties the database after it)."""
    if engine.dialect.name != "sqlite":
        return build_aged(engine, settings, clock)
    built: Aged = request.getfixturevalue("aged_sqlite")
    engine.dispose()  # no connection keeps the file the copy replaces
    database = Path(str(engine.url.database))
    for journal in ("-wal", "-shm"):
        database.with_name(database.name + journal).unlink(missing_ok=True)
    shutil.copyfile(built.path, database)
    clock.advance((built.now - clock.now()).total_seconds())
    return dict(built.ids)


def build_aged(engine: Engine, settings: Settings, clock: FakeClock) -> dict[str, str]:
    """Messages of every kind, most of them ended 31 days before ``clock.now()``:

    old, removed:   SKU-2 v1 cancelled (superseded by v2); D-1 v1 delivered; the record of
                    a rejected row, cancelled by an operator
    old, kept:      SKU-1 v1 delivered and SKU-2 v2 delivered: each its price's latest
                    message (contract 13);
                    SKU-Q v1 quarantined; SKU-P v1 delayed (next try in 100 days);
                    D-1 v3 new, waiting for v2 (a gap; retried by an operator);
                    D-2 v2 cancelled by an operator above a gap: the cursor (0) has not
                    stepped over it yet, and will read it when it does
    recent, kept:   SKU-R v1 delivered a day ago
    staging:        the rows of the old ones taken 31 days ago; SKU-R's taken a day ago;
                    one row never taken
    """
    take(
        engine,
        settings,
        clock,
        [
            price_row("SKU-1", 1),
            price_row("SKU-2", 1),
            price_row("SKU-2", 2),
            price_row("SKU-Q", 1),
            price_row("SKU-P", 1),
            posting_row("D-1", 1),
            posting_row("D-1", 3),
            posting_row("D-2", 2),
            raw_row("stock", "W-1", 1, "{}"),
        ],
    )
    settle(
        engine,
        settings,
        clock,
        {
            "SKU-1": DELIVERED,
            "SKU-2": DELIVERED,
            "SKU-Q": refused(422),
            "SKU-P": delayed(clock, 100),
            "D-1": DELIVERED,
        },
    )
    clock.advance(settings.gap_timeout + 1)
    with transaction(engine) as c:
        coalesce.quarantine_gaps(c, settings.policies, clock.now(), settings.gap_timeout)
    ids = {
        "SKU-1": mid(engine, "SKU-1", 1),
        "SKU-2 v1": mid(engine, "SKU-2", 1),
        "SKU-2 v2": mid(engine, "SKU-2", 2),
        "SKU-Q": mid(engine, "SKU-Q", 1),
        "SKU-P": mid(engine, "SKU-P", 1),
        "D-1 v1": mid(engine, "D-1", 1),
        "D-1 v3": mid(engine, "D-1", 3),
        "D-2 v2": mid(engine, "D-2", 2),
        "rejected": rejected_ids(engine)[0],
    }
    with transaction(engine) as c:
        quarantine.retry(
            c,
            [ids["D-1 v3"]],
            Filters(),
            operator="petrov",
            note="v2 is on its way",
            now=clock.now(),
            dry_run=False,
        )
    cancel(engine, settings, clock, [ids["D-2 v2"], ids["rejected"]])
    clock.advance(timedelta(days=DAYS).total_seconds())
    take(engine, settings, clock, [price_row("SKU-R", 1)])
    settle(engine, settings, clock, {"SKU-R": DELIVERED})
    ids["SKU-R"] = mid(engine, "SKU-R", 1)
    stage(engine, [price_row("SKU-U", 1)])  # never taken
    clock.advance(timedelta(days=1).total_seconds())
    assert {
        ids["SKU-1"]: ("delivered", None),
        ids["SKU-2 v1"]: ("cancelled", "superseded"),
        ids["SKU-2 v2"]: ("delivered", None),
        ids["SKU-Q"]: ("quarantined", "http-422"),
        ids["SKU-P"]: ("delayed", None),
        ids["D-1 v1"]: ("delivered", None),
        ids["D-1 v3"]: ("new", None),
        ids["D-2 v2"]: ("cancelled", "operator"),
        ids["rejected"]: ("cancelled", "operator"),
        ids["SKU-R"]: ("delivered", None),
    } == states(engine)
    return ids


REMOVED = ["SKU-2 v1", "D-1 v1", "rejected"]
KEPT = ["SKU-1", "SKU-2 v2", "SKU-Q", "SKU-P", "D-1 v3", "D-2 v2", "SKU-R"]


def test_prune_removes_old_delivered_and_cancelled_messages_with_their_history(
    engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    histories = history_counts(engine)

    report = run_prune(engine, clock)

    assert sorted(aged[k] for k in KEPT) == sorted(states(engine))
    assert {aged[k]: histories[aged[k]] for k in KEPT} == dict(history_counts(engine))
    assert (len(REMOVED), sum(histories[aged[k]] for k in REMOVED)) == (
        report.messages,
        report.history,
    )
    with transaction(engine, read_only=True) as c:
        orphans = c.execute(
            select(func.count())
            .select_from(history)
            .where(history.c.message_pk.not_in(select(messages.c.id)))
        ).scalar_one()
    assert 0 == orphans


def test_prune_never_touches_quarantined_or_pending_messages_or_their_history(
    engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    before = snapshot(engine)
    clock.advance(timedelta(days=365).total_seconds())

    run_prune(engine, clock)

    after = snapshot(engine)
    kept = [aged[k] for k in ("SKU-Q", "SKU-P", "D-1 v3")]
    assert [row for row in before["messages"] if row[1] in kept] == [
        row for row in after["messages"] if row[1] in kept
    ]
    kept_pks = {row[0] for row in before["messages"] if row[1] in kept}
    assert [row for row in before["message_history"] if row[1] in kept_pks] == [
        row for row in after["message_history"] if row[1] in kept_pks
    ]
    assert {("quarantined",), ("delayed",), ("new",)} == {(states(engine)[m][0],) for m in kept}


def test_prune_keeps_every_aggregate_and_its_cursor(
    engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    before = snapshot(engine)
    run_prune(engine, clock)
    after = snapshot(engine)
    assert before["aggregates"] == after["aggregates"]
    assert before["channel_aggregates"] == after["channel_aggregates"]


def test_prune_removes_old_taken_staging_rows_and_keeps_recent_and_untaken_ones(
    engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    rows = staging_rows(engine)
    recent_taken, untaken = rows[-2], rows[-1]  # SKU-R, taken a day ago; SKU-U, never taken
    assert (recent_taken[1], untaken[1]) == (True, False)

    report = run_prune(engine, clock)

    assert [recent_taken, untaken] == staging_rows(engine)
    assert len(rows) - 2 == report.staging


def test_a_dry_run_counts_what_prune_would_remove_and_changes_nothing(
    engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    before = snapshot(engine)

    dry = run_prune(engine, clock, dry_run=True)

    assert before == snapshot(engine)
    real = run_prune(engine, clock)
    assert (dry.messages, dry.history, dry.staging) == (real.messages, real.history, real.staging)
    assert (True, False) == (dry.dry_run, real.dry_run)
    assert dry.describe().startswith("would remove")
    assert real.describe().startswith("removed")


def test_nothing_ended_within_the_retention_period_is_removed(
    engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    before = snapshot(engine)
    report = prune.prune(engine, None, now=clock.now(), retention_days=365, kinds=KINDS)
    assert (0, 0, 0) == (report.messages, report.history, report.staging)
    assert before == snapshot(engine)


def test_a_price_keeps_its_latest_message_and_its_latest_delivered_one_however_old(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """Contract 13, "Prune": never the latest accepted message of an aggregate of a coalescing
    kind (the highest version that became a message, whatever its state), nor the latest
    delivered one, the price a 1C-Bitrix offer carries beside the one that changed
    (``DbKnownPrices``); every older version still goes, and a strict kind keeps nothing.

    A: v1, v2, v3 delivered                  -> v3 kept
    B: v1 delivered, v2 refused and cancelled -> both: v2 the latest, v1 the price the shop has
    C: v1, v2 delivered, v3 cancelled         -> v2 and v3 kept
    E: v1 superseded by v2, v2 delivered      -> v2 kept
    F: v1 answered stale, the site holds v5   -> v1 kept (the cursor is above every message)
    D-9: postings v1, v2 delivered            -> both go
    """
    take(engine, settings, clock, [price_row(a, 1, "1.00") for a in "ABCF"])
    settle(engine, settings, clock, dict.fromkeys("ABC", DELIVERED) | {"F": stale_at_site(5)})
    take(engine, settings, clock, [price_row(a, 2, "2.00") for a in "ABC"])
    settle(engine, settings, clock, {"A": DELIVERED, "B": refused(422), "C": DELIVERED})
    third = [price_row("A", 3, "3.00"), price_row("C", 3, "3.00"), price_row("E", 1, "1.00")]
    take(engine, settings, clock, [*third, price_row("E", 2, "2.00"), posting_row("D-9", 1)])
    decisions = {"A": DELIVERED, "C": refused(422), "E": DELIVERED, "D-9": DELIVERED}
    settle(engine, settings, clock, decisions)
    take(engine, settings, clock, [posting_row("D-9", 2)])
    settle(engine, settings, clock, {"D-9": DELIVERED})
    cancel(engine, settings, clock, [mid(engine, "B", 2), mid(engine, "C", 3)])
    ids = {
        (a, v): mid(engine, a, v)
        for a, top in (("A", 3), ("B", 2), ("C", 3), ("E", 2))
        for v in range(1, top + 1)
    }
    ids |= {
        ("F", 1): mid(engine, "F", 1),
        ("D-9", 1): mid(engine, "D-9", 1),
        ("D-9", 2): mid(engine, "D-9", 2),
    }
    assert ("cancelled", "superseded") == states(engine)[ids[("E", 1)]]
    assert 5 == done_version(engine, "F")
    clock.advance(OLD.total_seconds())

    dry = run_prune(engine, clock, dry_run=True)
    report = run_prune(engine, clock)

    kept = {(a, v) for (a, v), message_id in ids.items() if message_id in states(engine)}
    assert {("A", 3), ("B", 1), ("B", 2), ("C", 2), ("C", 3), ("E", 2), ("F", 1)} == kept
    assert (len(ids) - len(kept), len(ids) - len(kept)) == (dry.messages, report.messages)
    known = {(k.sku, k.version, str(k.amount)) for k in DbKnownPrices(engine).latest("ABCEF")}
    assert {("A", 3, "3.00"), ("B", 1, "1.00"), ("C", 2, "2.00"), ("E", 2, "2.00")} == known
    assert 0 == run_prune(engine, clock).messages, "what is kept stays kept"


def old_deliveries(engine: Engine, settings: Settings, clock: FakeClock, count: int) -> None:
    """``count`` postings delivered long ago: a strict kind's versions all go with the
    retention (a price would keep its latest)."""
    documents = [f"D-{n}" for n in range(count)]
    take(engine, settings, clock, [posting_row(document, 1) for document in documents])
    settle(engine, settings, clock, dict.fromkeys(documents, DELIVERED))
    clock.advance(OLD.total_seconds())


def test_prune_works_in_batches_and_a_small_batch_still_removes_everything(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    old_deliveries(engine, settings, clock, 5)

    report = run_prune(engine, clock, batch_size=2)

    assert (5, 5) == (report.messages, report.staging)
    assert 3 + 3 == report.batches  # 2 + 2 + 1 messages, then 2 + 2 + 1 staging rows
    assert {} == states(engine)
    assert [] == staging_rows(engine)


def test_each_batch_is_its_own_transaction_and_a_stopping_service_leaves_the_rest(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    old_deliveries(engine, settings, clock, 5)
    asked = []

    def stop_after_one_batch() -> bool:
        asked.append(True)
        return len(asked) > 1

    report = run_prune(engine, clock, batch_size=2, should_stop=stop_after_one_batch)

    assert (2, 1) == (report.messages, report.batches)
    assert 3 == len(states(engine)), "the first batch is committed, the rest is left"
    assert 3 == run_prune(engine, clock, batch_size=2).messages


def test_a_cancelled_strict_version_above_the_cursor_is_kept_and_the_cursor_steps_over_it_later(
    engine: Engine, settings: Settings, clock: FakeClock, aged: dict[str, str]
) -> None:
    run_prune(engine, clock)
    assert aged["D-2 v2"] in states(engine)

    take(engine, settings, clock, [posting_row("D-2", 1), posting_row("D-2", 3)])
    # v1 closes the gap (SKU-U, the row that was never taken, is taken now too)
    settle(engine, settings, clock, {"D-2": DELIVERED, "SKU-U": DELIVERED})

    assert 2 == done_version(engine, "D-2"), "the cursor stepped over the cancelled v2"
    batch = claim(engine, settings, clock)
    assert [("D-2", 3)] == [(m.aggregate, m.version) for m in batch.messages]


def test_a_pruned_version_that_1c_writes_again_is_never_sent_again(
    engine: Engine, settings: Settings, clock: FakeClock, aged: dict[str, str]
) -> None:
    run_prune(engine, clock)
    assert aged["SKU-2 v1"] not in states(engine)

    # Intake can no longer tell these are duplicates: they become messages again...
    take(engine, settings, clock, [price_row("SKU-2", 1), posting_row("D-1", 1)])
    again = states(engine)

    # ...but the cursor, which prune keeps, is past them: both end cancelled "stale", never
    # sent again and never left waiting (which would keep `run --until-idle` from idling).
    assert ("cancelled", "stale") == again[mid(engine, "SKU-2", 1)]
    assert ("cancelled", "stale") == again[mid(engine, "D-1", 1)]
    # Only SKU-U, the row never taken before, is due.
    assert ["SKU-U"] == [m.aggregate for m in claim(engine, settings, clock).messages]


def test_the_daily_prune_of_exchange_run_uses_the_configured_retention(
    db_url: str, engine: Engine, clock: FakeClock, aged: dict[str, str]
) -> None:
    settings = fast_settings(db_url, "http://127.0.0.1:9", retention_days=DAYS)
    worker = bootstrap.worker(settings, engine, clock=clock)

    async def go() -> None:
        try:
            await runner.prune_job(worker)()
        finally:
            await worker.target.aclose()

    asyncio.run(go())

    assert sorted(aged[k] for k in KEPT) == sorted(states(engine))


def test_exchange_run_schedules_the_prune_once_a_day(db_url: str, engine: Engine) -> None:
    settings = fast_settings(db_url, "http://127.0.0.1:9")
    worker = bootstrap.worker(settings, engine)

    async def go() -> object:
        scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
        try:
            prune.schedule(scheduler, runner.prune_job(worker))
            return scheduler.get_job("prune").trigger
        finally:
            await worker.target.aclose()

    trigger = asyncio.run(go())
    assert timedelta(days=1) == trigger.interval  # type: ignore[attr-defined]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_staging_in_its_own_database_is_pruned_there(
    db_url: str, engine: Engine, settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    staging_engine = make_engine(sqlite_copy(tmp_path / "staging.db"))
    try:
        stage(staging_engine, [price_row("SKU-1", 1)])
        intake.take(engine, staging_engine, settings.kinds, clock.now())
        stage(staging_engine, [price_row("SKU-2", 1)])  # never taken
        clock.advance(OLD.total_seconds())

        report = prune.prune(
            engine, staging_engine, now=clock.now(), retention_days=DAYS, kinds=KINDS
        )

        assert 1 == report.staging
        assert [(2, False)] == staging_rows(staging_engine)
    finally:
        staging_engine.dispose()


def test_prune_removes_old_1c_exchange_log_rows_and_never_the_package_records(
    engine: Engine, clock: FakeClock
) -> None:
    """Issue 21, item 6: ``cml_exchanges`` rows past the retention go (a recent one, and an
    import still alive, stay); every ``cml_packages`` row stays, however old: its digest
    recognises a resent file, the newest one's version and mark number the next package."""
    now = clock.now()
    old, recent = now - OLD, now - timedelta(days=1)
    entry = {"exchange": "s", "outcome": "failure", "detail": "x", "heartbeat_at": None}
    with transaction(engine) as c:
        c.execute(
            insert(cml_exchanges),
            [
                {**entry, "filename": "old", "started_at": old, "finished_at": old},
                {**entry, "filename": "recent", "started_at": old, "finished_at": recent},
                {
                    **entry,
                    "filename": "alive",
                    "started_at": old,
                    "finished_at": None,
                    "heartbeat_at": recent,
                },
                {
                    **entry,
                    "filename": "dead",
                    "started_at": old,
                    "finished_at": None,
                    "heartbeat_at": old,
                },
            ],
        )
        c.execute(
            insert(cml_packages),
            [
                {
                    "digest": f"{n:064x}",
                    "version": n,
                    "source_ref": "1C",
                    "intents": 1,
                    "staged_at": old,
                    "messages_mark": n,
                }
                for n in (1, 2)
            ],
        )

    dry = run_prune(engine, clock, dry_run=True)
    report = run_prune(engine, clock)

    assert (dry.exchanges, report.exchanges) == (2, 2)
    assert "2 1C exchange log row(s)" in report.describe()
    with transaction(engine, read_only=True) as c:
        kept = sorted(c.execute(select(cml_exchanges.c.filename)).scalars())
        packages = c.execute(select(cml_packages.c.version).order_by(cml_packages.c.id)).all()
    assert ["alive", "recent"] == kept
    assert [(1,), (2,)] == packages


def test_prune_clears_worker_and_sign_in_rows_older_than_a_day(db_url: str) -> None:
    """Contract 15: old worker rows and refused sign-in summaries go after a day."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import func, insert, select

    from exchange.db.engine import make_engine, transaction
    from exchange.db.schema import sign_in_refusals, workers
    from exchange.ops.prune import prune

    engine = make_engine(db_url)
    now = datetime.now(UTC)
    old, fresh = now - timedelta(days=1, minutes=1), now - timedelta(hours=2)
    with transaction(engine) as connection:
        for name, at in (("old", old), ("fresh", fresh)):
            connection.execute(
                insert(workers).values(worker_id=name, started_at=at, heartbeat_at=at)
            )
            connection.execute(
                insert(sign_in_refusals).values(door="1c", count=2, first_at=at, last_at=at)
            )
    prune(engine, None, now=now, retention_days=30, kinds=KINDS)
    with transaction(engine, read_only=True) as connection:
        left = connection.execute(select(workers.c.worker_id)).scalars().all()
        refusals = connection.execute(select(func.count()).select_from(sign_in_refusals))
        assert (left, refusals.scalar_one()) == (["fresh"], 1)
    engine.dispose()

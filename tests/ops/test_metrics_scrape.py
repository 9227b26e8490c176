"""Metrics (issue 3 item 5), scraped over real HTTP after a worker ran against the simulator.

Each test runs on SQLite and on PostgreSQL; each counter is checked against what the site
and the database say happened.
"""

from __future__ import annotations

from datetime import timedelta

from opstools import Samples, make_worker, run, scrape, served
from prometheus_client import generate_latest
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import posting_row, price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.intake import staging_table as intake
from exchange.ops.metrics import Metrics, PrometheusMetrics
from exchange.ops.status import status
from exchange.queue import control, lease


def test_counters_and_gauges_tell_what_a_run_delivered_superseded_and_quarantined(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.reject = {"SKU-R"}
    skus = [f"SKU-{n}" for n in range(8)]
    stage(engine, [price_row(sku, 1) for sku in skus] + [price_row("SKU-0", 2)])
    stage(engine, [posting_row("DOC-1", v) for v in (1, 2)] + [price_row("SKU-R", 1)])
    stage(engine, [{**price_row("SKU-BAD", 1), "payload": "{not json"}])
    worker = make_worker(db_url, engine, site)
    with served(worker, engine) as (_, server):
        run(worker)
        samples = scrape(server)

    delivered = len(site.effects())
    assert 8 + 2 == delivered
    assert delivered == samples("exchange_deliveries_total")
    assert 1 == samples("exchange_quarantines_total", reason="http-422")
    assert 0 == samples("exchange_quarantines_total", reason="retry-limit")
    assert 0 == samples("exchange_retries_scheduled_total")
    assert {
        "delivered": delivered,
        "terminal": 1,
        "temporary": 0,
        "stale-at-site": 0,
        "unknown": 0,
        "pause": 0,
        "withheld": 0,  # contract 13: shown from the first scrape, at 0
        "held": 0,  # contract 14: a marketplace's limit per product, shown at 0 too
        "accepted": 0,  # contract 14: taken, not shown yet (read back later)
    } == samples.by_label("exchange_attempts_total", "outcome")
    assert {"message": 12, "duplicate": 0, "rejected": 1} == samples.by_label(
        "exchange_intake_rows_total", "result"
    )
    # The gauges come from the database: the superseded SKU-0 v1 is cancelled, the rejected
    # row and SKU-R are quarantined.
    assert {
        "new": 0,
        "in_progress": 0,
        "delivered": delivered,
        "delayed": 0,
        "quarantined": 2,
        "cancelled": 1,
        "withheld": 0,  # contract 13: shown from the first scrape, at 0
    } == samples.by_label("exchange_messages", "state")
    assert {"http-422": 1, "invalid-contract": 1} == samples.by_label(
        "exchange_quarantined_messages", "reason"
    )
    assert 0 == samples("exchange_oldest_undelivered_age_seconds")
    assert 0 == samples("exchange_breaker_state")
    assert 0 == samples("exchange_delivery_paused")
    assert 0 == samples("exchange_lease_takeovers_total")
    assert 0 == samples("exchange_cycle_failures_total")
    assert samples("exchange_cycle_duration_seconds_count") >= 1
    assert samples("exchange_last_cycle_timestamp_seconds") > 0


def test_a_poison_message_counts_its_retries_then_one_retry_limit_quarantine(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.poison = {"SKU-P"}
    stage(engine, [price_row("SKU-P", 1), price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site, max_attempts=3)
    with served(worker, engine) as (_, server):
        run(worker)
        samples = scrape(server)

    assert 2 == samples("exchange_retries_scheduled_total")  # attempts 1 and 2
    assert 1 == samples("exchange_quarantines_total", reason="retry-limit")
    assert 3 == samples("exchange_attempts_total", outcome="temporary")
    assert 1 == samples("exchange_deliveries_total")
    assert 0 == samples("exchange_breaker_state")  # one failing aggregate is not an outage


def test_the_breaker_gauge_shows_open_during_an_outage_and_undelivered_age_grows(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.outage = True
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(6)])
    # A cool-down of 30 s: the breaker is still open when the cycle ends and is scraped.
    worker = make_worker(
        db_url, engine, site, breaker_threshold=3, retry_base_delay=30, retry_max_delay=60
    )
    with served(worker, engine) as (_, server):
        run(worker, lambda w: w.cycle())
        samples = scrape(server)

    assert 2 == samples("exchange_breaker_state")
    assert 0 == samples("exchange_delivery_paused")
    assert samples("exchange_attempts_total", outcome="temporary") >= 3
    assert 0 == samples("exchange_deliveries_total")
    assert samples("exchange_oldest_undelivered_age_seconds") > 0
    assert 6 == samples("exchange_messages", state="delayed") + samples(
        "exchange_messages", state="new"
    )


def test_a_refused_token_shows_as_paused_and_counts_pause_answers(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.auth_status = 401
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    worker = make_worker(db_url, engine, site)
    with served(worker, engine) as (_, server):
        run(worker, lambda w: w.cycle())
        samples = scrape(server)

    assert 1 == samples("exchange_delivery_paused")
    assert samples("exchange_attempts_total", outcome="pause") >= 1
    assert 3 == samples("exchange_messages", state="new")  # nobody charged, nothing quarantined
    assert 0 == sum(samples.by_label("exchange_quarantines_total", "reason").values())


def test_delivery_paused_is_the_same_truth_as_status_for_an_operators_pause(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    """Issue 34 (contract 15, one pause, one truth): ``exchange_delivery_paused`` is 1 for any
    pause ``status`` calls ``delivery_paused``, an operator's too, not only a refused token;
    and 0 again once the operator resumes."""
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    with transaction(engine) as connection:
        control.pause(connection, operator="olga", note="переоценка", now=SystemClock().now())
    worker = make_worker(db_url, engine, site)
    with served(worker, engine) as (_, server):
        run(worker, lambda w: w.cycle())
        samples = scrape(server)
        with transaction(engine, read_only=True) as connection:
            figures = status(connection, SystemClock().now(), worker.settings.policies)
        assert (True, 1) == (figures.delivery_paused, samples("exchange_delivery_paused"))
        assert 0 == len(site.effects())  # nothing went while paused

        with transaction(engine) as connection:
            control.resume(connection)
        run(worker, lambda w: w.cycle())
        samples = scrape(server)
    assert 0 == samples("exchange_delivery_paused")


def test_messages_whose_lease_expired_are_counted_as_takeovers(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(3)])
    now = SystemClock().now()
    intake.take(engine, None, dict(DEFAULT_KINDS), now)
    with transaction(engine) as connection:  # a worker that leased two messages, then died
        dead = lease.claim(
            connection,
            worker="dead-worker",
            now=now - timedelta(minutes=2),
            limit=2,
            lease_seconds=1,
            kinds=KindPolicies.of({}),
            max_attempts=3,
        )
    assert 2 == len(dead.messages)
    worker = make_worker(db_url, engine, site)
    with served(worker, engine) as (_, server):
        run(worker)
        samples = scrape(server)

    assert 2 == samples("exchange_lease_takeovers_total")
    assert 3 == samples("exchange_deliveries_total")


def test_two_metrics_objects_in_one_process_keep_their_own_figures() -> None:
    first, second = PrometheusMetrics(), PrometheusMetrics()  # no duplicate-series error
    first.deliveries.inc(5)
    assert 5 == Samples(generate_latest(first.registry).decode())("exchange_deliveries_total")
    assert 0 == Samples(generate_latest(second.registry).decode())("exchange_deliveries_total")


def test_a_worker_without_metrics_delivers_and_records_nothing_extra(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site)
    assert type(worker.metrics) is Metrics  # the no-op base: metrics are off by default
    run(worker, lambda w: w.cycle())
    assert 1 == len(site.effects())

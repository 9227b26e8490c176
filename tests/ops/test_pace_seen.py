"""Contract 5c: the operator sees the site's pace: metrics, ``exchange status``, one log line.

A worker with 16 in flight delivers to a shop that takes 40 requests/s and answers 429 beyond
(Retry-After 0: the hold is the worker's own); on SQLite and PostgreSQL.
"""

from __future__ import annotations

import logging

import pytest
from opstools import make_worker, run, scrape, served
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.dev.sitesim import SiteSimulator, rate_limited_shop
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import SystemClock
from exchange.domain.policy import KindPolicies
from exchange.ops.status import pace_words, requests_per_second, status


def test_refusals_limit_and_pace_show_in_metrics_status_and_one_log_line(
    db_url: str, engine: Engine, site: SiteSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    site.faults = rate_limited_shop(40.0, retry_after="0")
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(60)])
    worker = make_worker(db_url, engine, site, concurrency=16, batch_size=100, max_attempts=5)
    caplog.set_level(logging.WARNING, logger="exchange")
    with served(worker, engine) as (_, server):
        run(worker)
        samples = scrape(server)
    with transaction(engine, read_only=True) as connection:
        figures = status(connection, SystemClock().now(), KindPolicies.of({}))

    refused = site.requests_by_status()[429]
    assert refused > 0, "the shop never refused: the test tests nothing"
    assert refused == samples("exchange_site_refused_total", cause="429")
    assert 0 == samples("exchange_site_refused_total", cause="5xx")
    assert 1 <= samples("exchange_pace_limit") <= 16
    assert 0 < samples("exchange_pace_rate") < 60
    assert 0 == figures.counts["quarantined"]
    pace = figures.workers[0]["pace"]
    assert refused == pace["refused_last_minute"] == pace["refused_rate_limited"]
    assert 16 == pace["max_limit"]
    assert pace_words(pace).startswith("site busy: ")
    busy = [r.getMessage() for r in caplog.records if r.getMessage().startswith("site busy: ")]
    assert 1 == len(busy), busy
    assert "refused in the last minute" in busy[0] and "paced at" in busy[0]


@pytest.mark.parametrize(
    ("pace", "words"),
    [
        (None, "not reported"),
        (
            {"accepted_rate": 41.7, "in_flight": 3, "limit": 4, "max_limit": 32},
            "keeps up: 42 requests/s, 3 in flight (limit 4 of 32), 0 refused in the last minute",
        ),
        (
            {
                "accepted_rate": 40,
                "in_flight": 3,
                "limit": 4,
                "max_limit": 32,
                "refused_last_minute": 12,
                "paced_rate": 45.2,
                "hold_s": 0.5,
            },
            "site busy: 40 requests/s, 3 in flight (limit 4 of 32), 12 refused in the last "
            "minute, paced at 45 requests/s, all requests held 0.5 s",
        ),
    ],
)
def test_pace_words(pace: dict[str, float] | None, words: str) -> None:
    assert words == pace_words(pace)


@pytest.mark.parametrize(
    ("rate", "ru", "en"),
    [
        (1, "1 запрос/с", "1 request/s"),
        (1.5, "1,5 запроса/с", "1.5 requests/s"),
        (2, "2 запроса/с", "2 requests/s"),
        (0.4, "0,4 запроса/с", "0.4 requests/s"),
        (5, "5 запросов/с", "5 requests/s"),
        (21.2, "21 запрос/с", "21 requests/s"),
        (41.7, "42 запроса/с", "42 requests/s"),
        (1234, "1\u00a0234 запроса/с", "1,234 requests/s"),
    ],
)
def test_a_rate_is_written_as_each_language_writes_it(rate: float, ru: str, en: str) -> None:
    """Issue 34 item 7: «1 запрос/с», a decimal comma, CLDR's plural forms (a fraction takes
    the genitive singular)."""
    assert (ru, en) == (requests_per_second(rate, "ru"), requests_per_second(rate, "en"))


def test_a_rate_that_is_not_a_number_is_a_dash() -> None:
    assert "— запроса/с" == requests_per_second(float("nan"), "ru")


def test_the_russian_pace_card_says_its_rate_with_the_right_form() -> None:
    pace = {"accepted_rate": 1, "in_flight": 1, "limit": 4, "max_limit": 32}
    assert pace_words(pace, "ru") == (
        "сайт успевает: 1 запрос/с, в работе 1 (предел 4 из 32), отказов за последнюю минуту: 0"
    )

"""The pipeline end to end: staging table -> worker -> a real HTTP site on loopback.

Each test runs on SQLite and on PostgreSQL. The site is the project's simulator
(``exchange.dev.sitesim``), which keeps the site's promises and injects the faults we ask for.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from exchange import app as bootstrap
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.sitesim import Faults, SiteSimulator
from exchange.dev.testing import (
    drain,
    fast_settings,
    message,
    one_channel_messages,
    posting_row,
    price_row,
    run_worker,
    stage,
)
from exchange.ops.status import status
from exchange.worker import Worker

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()


@pytest.fixture
def site() -> Iterator[SiteSimulator]:
    with SiteSimulator(token="test-token", faults=Faults(seed=1)) as simulator:
        yield simulator


def make_worker(db_url: str, engine: Engine, site: SiteSimulator, **overrides: Any) -> Worker:
    settings = fast_settings(db_url, site.url, **overrides)
    return bootstrap.worker(settings, engine, rng=random.Random(3))


def run(worker: Worker, coro_factory: Any = None) -> None:
    run_worker(worker, coro_factory)


def one_cycle(worker: Worker) -> None:
    async def go() -> None:
        await worker.cycle()

    asyncio.run(go())


def rows_by_id(engine: Engine) -> dict[str, dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return {r["message_id"]: dict(r) for r in connection.execute(select(messages)).mappings()}


def events(engine: Engine, pk: int) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as connection:
        return [
            dict(r)
            for r in connection.execute(
                select(history).where(history.c.message_pk == pk).order_by(history.c.id)
            ).mappings()
        ]


def test_site_ends_holding_the_latest_price_of_every_sku_and_older_versions_are_never_sent(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    rows = [price_row(f"SKU-{n}", v, f"{n}.{v:02d}") for n in range(30) for v in (1, 2, 3)]
    random.Random(5).shuffle(rows)
    stage(engine, rows)
    worker = make_worker(db_url, engine, site)
    run(worker)
    assert {("price", f"SKU-{n}"): 3 for n in range(30)} == site.held_versions()
    assert 30 == site.request_count  # superseded versions were coalesced, not sent
    superseded = [m for m in rows_by_id(engine).values() if m["reason"] == "superseded"]
    assert 60 == len(superseded)
    latest_ids = {m["message_id"] for m in rows_by_id(engine).values() if m["version"] == 3}
    assert all(m["superseded_by"] in latest_ids for m in superseded)


def test_price_delivered_carries_the_exact_decimal_and_the_message_id_as_idempotency_key(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 7, "840.10")])
    run(make_worker(db_url, engine, site))
    [effect] = site.effects()
    assert effect.payload["price"] == "840.10"
    assert effect.message_id == message(engine, "price", "SKU-1", 7)["message_id"]
    delivered = message(engine, "price", "SKU-1", 7)
    assert ("delivered", effect.receipt) == (delivered["state"], delivered["receipt"])


def test_postings_are_all_delivered_once_in_version_order_whatever_the_commit_order(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    rows = [posting_row(f"DOC-{d}", v) for d in range(5) for v in range(1, 7)]
    random.Random(9).shuffle(rows)
    stage(engine, rows)
    run(make_worker(db_url, engine, site))
    for d in range(5):
        assert [1, 2, 3, 4, 5, 6] == site.applied_versions("financial_posting", f"DOC-{d}")
    assert {1} == set(site.effect_counts().values())


def test_an_answer_lost_after_the_effect_is_retried_with_the_same_key_and_applies_once(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.drop_after_effect_rate = 1.0
    stage(engine, [price_row("SKU-1", 1), posting_row("DOC-1", 1)])
    run(make_worker(db_url, engine, site))
    assert {1} == set(site.effect_counts().values())
    assert 2 == len(site.effects())
    price = message(engine, "price", "SKU-1", 1)
    assert ("delivered", 2) == (price["state"], price["attempts"])
    retried = [e for e in events(engine, price["id"]) if e["event"] == "retry-scheduled"]
    assert 1 == len(retried)
    assert retried[0]["detail"].startswith("result-unknown")


def test_a_read_timeout_after_sending_is_marked_result_unknown_and_retried_safely(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.slow_rate = 1.0
    site.faults.slow_seconds = 0.6
    stage(engine, [price_row("SKU-1", 1)])
    impatient = make_worker(db_url, engine, site, http_timeout=0.2)

    async def one_cycle(w: Worker) -> None:
        await w.cycle()

    run(impatient, one_cycle)
    site.faults.slow_rate = 0.0
    # Healed, the resend goes through a patient worker: at 0.2 s, two loaded cores can time
    # out the healthy resend too (tests/faults/test_site_faults.py saw it in CI).
    run(make_worker(db_url, engine, site, http_timeout=10.0))
    price = message(engine, "price", "SKU-1", 1)
    timeouts = [e for e in events(engine, price["id"]) if e["error_class"] == "ReadTimeout"]
    assert 1 == len(timeouts)
    assert "result-unknown" in timeouts[0]["detail"]
    assert ("delivered", {price["message_id"]: 1}) == (price["state"], dict(site.effect_counts()))


def test_a_poison_message_is_quarantined_after_exactly_max_attempts_while_others_flow(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.poison = {"SKU-P"}
    stage(engine, [price_row("SKU-P", 1)] + [price_row(f"SKU-{n}", 1) for n in range(20)])
    run(make_worker(db_url, engine, site, max_attempts=4))
    poison = message(engine, "price", "SKU-P", 1)
    assert ("quarantined", "retry-limit", 4) == (
        poison["state"],
        poison["reason"],
        poison["attempts"],
    )
    assert 500 == poison["last_status"]
    sent = [e for e in events(engine, poison["id"]) if e["leased_at"] is not None]
    assert [1, 2, 3, 4] == [e["attempt"] for e in sent]  # one row per attempt
    assert 20 == sum(1 for m in rows_by_id(engine).values() if m["state"] == "delivered")


def test_a_site_outage_of_any_length_ends_with_everything_delivered_and_nothing_quarantined(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.outage = True
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(40)])
    worker = make_worker(db_url, engine, site, max_attempts=3, breaker_threshold=3)

    async def outage_then_recovery(w: Worker) -> None:
        for _ in range(60):  # far more cycles than max_attempts: the breaker must absorb them
            await w.cycle()
            await asyncio.sleep(0.005)
        site.faults.outage = False
        await drain(w)

    run(worker, outage_then_recovery)
    states = {m["state"] for m in rows_by_id(engine).values()}
    assert {"delivered"} == states
    assert 40 == len(site.effects())


def test_terminal_answers_quarantine_at_once_with_reason_http_code(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.reject = {"SKU-R"}
    stage(engine, [price_row("SKU-R", 1)])
    run(make_worker(db_url, engine, site))
    rejected = message(engine, "price", "SKU-R", 1)
    assert ("quarantined", "http-422", 1) == (
        rejected["state"],
        rejected["reason"],
        rejected["attempts"],
    )


def test_401_pauses_delivery_without_charging_anyone_and_it_resumes_by_itself(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.auth_status = 401
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(10)])
    worker = make_worker(db_url, engine, site, max_attempts=1)

    async def refused_then_accepted(w: Worker) -> None:
        for _ in range(3):
            await w.cycle()
        assert all(m["attempts"] == 0 and m["state"] == "new" for m in rows_by_id(engine).values())
        with transaction(engine, read_only=True) as connection:
            [shown] = status(connection, w.clock.now(), w.kinds).workers
        assert shown["paused"] is not None and "401" in shown["paused"]
        site.faults.auth_status = None
        await drain(w)

    run(worker, refused_then_accepted)
    assert 10 == len(site.effects())


def test_409_stale_at_site_equal_is_delivered_and_greater_is_cancelled_without_retry(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    for aggregate, version in (("SKU-EQ", 5), ("SKU-GT", 9)):
        body = {
            "message_id": f"other-{aggregate}",
            "kind": "price",
            "aggregate": aggregate,
            "version": version,
            "payload": {"sku": aggregate, "price": "1"},
            "created_at": "2026-01-01T00:00:00Z",
        }
        answer = httpx.post(
            f"{site.url}/api/v1/updates",
            json=body,
            headers={"Authorization": "Bearer test-token", "Idempotency-Key": body["message_id"]},
        )
        assert 200 == answer.status_code
    stage(engine, [price_row("SKU-EQ", 5), price_row("SKU-GT", 4)])
    run(make_worker(db_url, engine, site))
    equal, greater = message(engine, "price", "SKU-EQ", 5), message(engine, "price", "SKU-GT", 4)
    assert ("delivered", 1) == (equal["state"], equal["attempts"])
    assert ("cancelled", "stale-at-site", 1) == (
        greater["state"],
        greater["reason"],
        greater["attempts"],
    )


def test_retry_after_in_seconds_sets_the_next_try(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.fail_rate = 1.0
    site.faults.retry_after = "2"
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site, retry_max_delay=30)
    run(worker, lambda w: w.cycle())
    delayed = message(engine, "price", "SKU-1", 1)
    assert "delayed" == delayed["state"]
    scheduled = [e for e in events(engine, delayed["id"]) if e["event"] == "retry-scheduled"]
    assert [2.0] == [e["delay_s"] for e in scheduled]
    assert 503 == scheduled[0]["http_status"]


def test_a_stale_version_staged_after_a_newer_one_was_delivered_is_never_sent(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [price_row("SKU-1", 5)])
    worker = make_worker(db_url, engine, site)

    async def late_row(w: Worker) -> None:
        await drain(w)
        stage(engine, [price_row("SKU-1", 3, "1.00")])
        await drain(w)

    run(worker, late_row)
    assert [5] == site.applied_versions("price", "SKU-1")
    late = message(engine, "price", "SKU-1", 3)
    assert ("cancelled", "stale", 0) == (late["state"], late["reason"], late["attempts"])


def test_history_tells_the_whole_biography_of_a_retried_message(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.fail_rate = 1.0
    site.faults.retry_after = "1"
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site, retry_max_delay=5)

    async def fail_then_heal(w: Worker) -> None:
        await w.cycle()
        site.faults.fail_rate = 0.0
        await drain(w, cycles=1000)

    run(worker, fail_then_heal)
    bio = events(engine, message(engine, "price", "SKU-1", 1)["id"])
    # one row per attempt, holding its lease (worker, attempt, start) and its outcome; a loaded
    # machine's first cycle may outlast the 1 s Retry-After and fail the message once more
    retries = len(bio) - 2
    assert retries >= 1
    assert ["taken"] + ["retry-scheduled"] * retries + ["delivered"] == [e["event"] for e in bio]
    assert [None, *range(1, retries + 2)] == [e["attempt"] for e in bio]
    assert [None] + ["in_progress"] * (retries + 1) == [e["from_state"] for e in bio]
    assert [None] + ["test-worker"] * (retries + 1) == [e["worker"] for e in bio]
    assert (1.0, 503) == (bio[1]["delay_s"], bio[1]["http_status"])
    assert 200 == bio[-1]["http_status"]
    times = [t for e in bio[1:] for t in (e["leased_at"], e["at"])]
    assert None not in times and times == sorted(times)


def test_posting_amounts_reach_the_site_with_their_exact_decimal_value(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    stage(engine, [posting_row("DOC-1", 1, amount="12345678901234567890.123456789")])
    run(make_worker(db_url, engine, site))
    [effect] = site.effects()
    assert "12345678901234567890.123456789" == effect.payload["amount"]


def test_during_an_outage_successive_probes_take_different_aggregates_and_cost_no_attempt(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    site.faults.outage = True
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(6)])
    worker = make_worker(db_url, engine, site, max_attempts=50, breaker_threshold=2)

    async def outage(w: Worker) -> None:
        for _ in range(80):
            await w.cycle()
            await asyncio.sleep(0.003)

    run(worker, outage)
    with transaction(engine, read_only=True) as connection:
        probes = (
            connection.execute(
                select(messages.c.aggregate)
                .join(history, history.c.message_pk == messages.c.id)
                .where(history.c.event == "released", history.c.detail.like("probe failed%"))
                .order_by(history.c.id)
            )
            .scalars()
            .all()
        )
        attempts = dict(connection.execute(select(messages.c.aggregate, messages.c.attempts)).all())
    assert len(probes) >= 6, "the breaker never probed"
    repeats = [a for a, b in itertools.pairwise(probes) if a == b]
    assert [] == repeats, f"two successive probes took the same aggregate: {probes}"
    assert len(set(probes)) >= 3
    charged_before_opening = 2 + 4  # the failures that opened it, plus requests already in flight
    assert sum(attempts.values()) <= charged_before_opening


def test_postings_the_site_already_holds_are_each_answered_by_the_site_and_none_is_stuck(
    db_url: str, engine: Engine, site: SiteSimulator
) -> None:
    body = {
        "message_id": "other-DOC-1",
        "kind": "financial_posting",
        "aggregate": "DOC-1",
        "version": 3,
        "payload": {"amount": "1"},
        "created_at": "2026-01-01T00:00:00Z",
    }
    answer = httpx.post(
        f"{site.url}/api/v1/updates",
        json=body,
        headers={"Authorization": "Bearer test-token", "Idempotency-Key": body["message_id"]},
    )
    assert 200 == answer.status_code
    stage(engine, [posting_row("DOC-1", v) for v in range(1, 6)])
    run(make_worker(db_url, engine, site))
    outcomes = {v: message(engine, "financial_posting", "DOC-1", v) for v in range(1, 6)}
    assert {
        1: ("cancelled", "stale-at-site"),
        2: ("cancelled", "stale-at-site"),
        3: ("delivered", None),
        4: ("delivered", None),
        5: ("delivered", None),
    } == {v: (m["state"], m["reason"]) for v, m in outcomes.items()}
    assert [3, 4, 5] == site.applied_versions("financial_posting", "DOC-1")


def test_a_paused_worker_resumes_by_itself_once_the_token_file_is_replaced(
    db_url: str, engine: Engine, site: SiteSimulator, tmp_path: Any
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("expired-token\n", encoding="utf-8")
    stage(engine, [price_row("SKU-1", 1)])
    worker = make_worker(db_url, engine, site, site_token_file=token_file)

    async def refused_then_replaced(w: Worker) -> None:
        await w.cycle()
        assert w.paused_reason is not None
        token_file.write_text("test-token\n", encoding="utf-8")  # what the operator does
        await drain(w)

    run(worker, refused_then_replaced)
    delivered = message(engine, "price", "SKU-1", 1)
    assert ("delivered", 1) == (delivered["state"], delivered["attempts"])  # 401: not charged

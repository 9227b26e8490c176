"""Leases (contract 4): one message of an aggregate in flight, take-over, fencing, outcomes.

Runs on SQLite and on PostgreSQL (the ``engine`` fixture is parametrized over both).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from random import Random
from typing import Any

import pytest
from sqlalchemy import Engine, RowMapping, event, select

from exchange.db.engine import make_engine, transaction
from exchange.db.schema import deliveries, history
from exchange.dev.dbkit import sqlite_copy
from exchange.dev.testing import (
    fast_settings,
    in_flight_overlaps,
    one_channel_aggregates,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.policy import DEFAULT_KINDS, KindPolicies
from exchange.domain.retry import Decision, RetryPolicy, decide, not_sent
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops.status import biography
from exchange.queue import coalesce, lease
from exchange.queue import record as recording
from exchange.settings import Settings
from exchange.targets.shop_api.answers import classify
from exchange.targets.shop_api.client import Response

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

LEASE = 30.0
MAX_ATTEMPTS = 3

# -- helpers -------------------------------------------------------------------------------


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, lease_seconds=LEASE, max_attempts=MAX_ATTEMPTS, batch_size=100)


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())


def claim(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    worker: str = "w1",
    limit: int = 100,
) -> lease.Batch:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker=worker,
            now=clock.now(),
            limit=limit,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
        )


def record(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    batch: lease.Batch,
    decision: Decision,
    worker: str = "w1",
) -> int:
    with transaction(engine) as c:
        return recording.record(
            c,
            token=batch.token,
            worker=worker,
            now=clock.now(),
            outcomes=[(m, decision) for m in batch.messages],
            kinds=settings.policies,
        )


def delivered(receipt: str = '{"receipt": "R-1"}') -> Decision:
    return Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt=receipt)


def retry_later(clock: FakeClock, delay: float = 5.0) -> Decision:
    return Decision(
        Event.RETRY_SCHEDULED,
        State.DELAYED,
        "503 Service Unavailable",
        next_try_at=clock.now() + timedelta(seconds=delay),
        delay_s=delay,
        http_status=503,
    )


def message(engine: Engine, aggregate: str, version: int) -> RowMapping:
    with transaction(engine, read_only=True) as c:
        return (
            c.execute(
                select(messages).where(
                    messages.c.aggregate == aggregate, messages.c.version == version
                )
            )
            .mappings()
            .one()
        )


def aggregate_row(engine: Engine, aggregate: str) -> RowMapping:
    with transaction(engine, read_only=True) as c:
        return (
            c.execute(select(aggregates).where(aggregates.c.aggregate == aggregate))
            .mappings()
            .one()
        )


def events(engine: Engine, pk: int) -> list[RowMapping]:
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(history).where(history.c.message_pk == pk).order_by(history.c.id)
            ).mappings()
        )


def leased(batch: lease.Batch) -> list[tuple[str, int]]:
    return sorted((m.aggregate, m.version) for m in batch.messages)


# -- at most one message of an aggregate in flight ---------------------------------------------


def test_claim_leases_one_message_per_aggregate_per_batch(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # not coalesced yet: two pending versions of SKU-1, three of D-1
    take(
        engine,
        settings,
        clock,
        [price_row("SKU-1", 1), price_row("SKU-1", 2), price_row("SKU-2", 1)]
        + [posting_row("D-1", v) for v in (1, 2, 3)],
    )
    batch = claim(engine, settings, clock)
    assert leased(batch) == [("D-1", 1), ("SKU-1", 2), ("SKU-2", 1)]
    assert len({m.aggregate_id for m in batch.messages}) == len(batch.messages)
    for m in batch.messages:
        row = message(engine, m.aggregate, m.version)
        assert (row["state"], row["locked_by"], row["attempts"]) == ("in_progress", "w1", 1)
        assert row["locked_until"] == clock.now() + timedelta(seconds=LEASE)
        assert row["lease_token"] == batch.token
        assert row["leased_at"] == clock.now() == m.leased_at
        # Taking a lease writes no history row: the attempt's row is written when it ends.
        assert [e["event"] for e in events(engine, row["id"])] == ["taken"]
    assert message(engine, "SKU-1", 1)["state"] == "new"


def test_no_second_message_of_an_aggregate_while_one_is_in_flight(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    first = claim(engine, settings, clock, "w1", limit=1)
    assert leased(first) == [("SKU-1", 1)]

    clock.advance(1)
    take(engine, settings, clock, [price_row("SKU-1", 2)])
    second = claim(engine, settings, clock, "w2")
    assert leased(second) == [("SKU-2", 1)], "SKU-1 is in flight with w1"
    assert claim(engine, settings, clock, "w3").messages == []

    assert record(engine, settings, clock, first, delivered()) == 1
    assert leased(claim(engine, settings, clock, "w3")) == [("SKU-1", 2)]


# -- latest-wins at the moment of the claim (contract 3; issue 12, item 2) ---------------------


def quarantined_422() -> Decision:
    return Decision(
        Event.QUARANTINED,
        State.QUARANTINED,
        "422 Unprocessable Entity",
        http_status=422,
        reason="http-422",
    )


def test_a_price_at_or_below_the_delivered_version_is_never_claimed_even_before_coalescing(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # v1 in flight answered 503; meanwhile v5 taken in and delivered; v1 due again. No coalesce
    # runs in between (it runs at the start of a cycle only): the claim itself must refuse v1.
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    first = claim(engine, settings, clock, "w1")
    take(engine, settings, clock, [price_row("SKU-1", 5)])
    record(engine, settings, clock, first, retry_later(clock, 1.0), "w1")
    newer = claim(engine, settings, clock, "w2")
    assert [("SKU-1", 5)] == leased(newer)
    record(engine, settings, clock, newer, delivered(), "w2")
    clock.advance(10)

    assert [] == leased(claim(engine, settings, clock, "w1"))
    assert ("delayed", 5) == (
        message(engine, "SKU-1", 1)["state"],
        aggregate_row(engine, "SKU-1")["done_version"],
    )


def test_an_older_price_is_not_claimed_while_a_newer_version_is_quarantined(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # v1 delayed; v2 taken in, sent and quarantined (422): v2 still stands for the aggregate
    # (an operator may retry it), so v1 below it is superseded, never sent in its place.
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    first = claim(engine, settings, clock, "w1")
    take(engine, settings, clock, [price_row("SKU-1", 2)])
    record(engine, settings, clock, first, retry_later(clock, 1.0), "w1")
    newer = claim(engine, settings, clock, "w2")
    assert [("SKU-1", 2)] == leased(newer)
    record(engine, settings, clock, newer, quarantined_422(), "w2")
    clock.advance(10)

    assert [] == leased(claim(engine, settings, clock, "w1"))


def test_a_later_record_of_an_older_delivered_version_never_lowers_done_version(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 5)])
    record(engine, settings, clock, claim(engine, settings, clock), delivered())
    # v3 put in flight by hand (no claim would lease it), then recorded delivered
    take(engine, settings, clock, [price_row("SKU-1", 3)])
    pk = message(engine, "SKU-1", 3)["id"]
    with transaction(engine) as c:
        c.execute(
            deliveries.update()
            .where(deliveries.c.message_pk == pk)
            .values(state="in_progress", lease_token="t-old", attempts=1)
        )
    old = lease.Leased(
        pk,
        "m",
        message(engine, "SKU-1", 3)["aggregate_id"],
        "price",
        "SKU-1",
        3,
        "{}",
        clock.now(),
        1,
        1,  # the one channel
    )
    with transaction(engine) as c:
        recorded = recording.record(
            c,
            token="t-old",
            worker="w9",
            now=clock.now(),
            outcomes=[(old, delivered())],
            kinds=KindPolicies.of({}),
        )
    assert (1, 5) == (recorded, aggregate_row(engine, "SKU-1")["done_version"])


def test_no_second_message_of_an_aggregate_while_its_lease_is_renewed(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # a renewed lease keeps the aggregate: the site is slow, the worker is alive
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    batch = claim(engine, settings, clock, "w1")
    for _ in range(5):
        clock.advance(LEASE * 0.9)
        with transaction(engine) as c:
            assert lease.renew(c, batch.token, clock.now() + timedelta(seconds=LEASE)) == 1
        assert claim(engine, settings, clock, "w2").messages == []
    assert record(engine, settings, clock, batch, delivered(), "w1") == 1


def test_workers_claiming_at_the_same_moment_never_lease_one_aggregate_twice(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(
        engine,
        settings,
        clock,
        [price_row(f"SKU-{i}", v) for i in range(12) for v in (1, 2, 3)]
        + [posting_row(f"D-{i}", v) for i in range(12) for v in (1, 2, 3)],
    )
    workers = 4
    start = threading.Barrier(workers)
    batches: dict[str, list[lease.Batch]] = {}
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            start.wait(timeout=10)
            mine = batches.setdefault(name, [])
            for _ in range(3):
                mine.append(claim(engine, settings, clock, name, limit=5))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"w{n}",)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors

    claimed = [m.aggregate_id for b in batches.values() for batch in b for m in batch.messages]
    assert len(claimed) == 24, "every aggregate was leased once"
    assert len(set(claimed)) == len(claimed), "an aggregate was leased twice"
    with transaction(engine, read_only=True) as c:
        in_flight = list(
            c.execute(
                select(messages.c.aggregate_id).where(messages.c.state == "in_progress")
            ).scalars()
        )
    assert sorted(in_flight) == sorted(claimed)


def test_strict_kinds_lease_only_the_next_version_in_order(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", v) for v in (3, 1, 2)])
    order = []
    for _ in range(3):
        batch = claim(engine, settings, clock)
        assert len(batch.messages) == 1
        order.append(batch.messages[0].version)
        assert claim(engine, settings, clock, "w2").messages == []
        record(engine, settings, clock, batch, delivered())
    assert order == [1, 2, 3]
    assert aggregate_row(engine, "D-1")["done_version"] == 3


def test_strict_next_version_waits_while_its_predecessor_is_delayed(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    batch = claim(engine, settings, clock)
    record(engine, settings, clock, batch, retry_later(clock, 5))
    assert claim(engine, settings, clock).messages == [], "v1 is delayed, v2 must wait"
    clock.advance(6)
    assert leased(claim(engine, settings, clock)) == [("D-1", 1)]


# -- expired leases ------------------------------------------------------------------------


def test_an_expired_lease_is_taken_over_by_another_worker(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1)])
    old = claim(engine, settings, clock, "w1")
    clock.advance(LEASE - 1)
    assert claim(engine, settings, clock, "w2").messages == [], "the lease is still live"

    clock.advance(2)
    new = claim(engine, settings, clock, "w2")
    assert leased(new) == [("D-1", 1)]
    assert new.token != old.token
    assert new.messages[0].attempt == 2
    row = message(engine, "D-1", 1)
    assert (row["state"], row["locked_by"], row["attempts"]) == ("in_progress", "w2", 2)
    assert row["leased_at"] == clock.now()
    # One row, for the attempt that crashed: its worker, its attempt, when its lease began;
    # written when the lease was taken over, and naming who took it for which attempt.
    (taken, crashed) = events(engine, row["id"])
    assert taken["event"] == "taken"
    assert (crashed["event"], crashed["worker"], crashed["attempt"]) == ("taken-over", "w1", 1)
    assert (
        crashed["leased_at"]
        == old.messages[0].leased_at
        == clock.now() - timedelta(seconds=LEASE + 1)
    )
    assert crashed["at"] == clock.now()
    # ... and when its lease ran out: w1 held the aggregate until then, not until the takeover
    assert crashed["lease_until"] == old.until == clock.now() - timedelta(seconds=1)
    assert (crashed["from_state"], crashed["to_state"]) == ("in_progress", "in_progress")
    assert "the lease of w1 had expired" in (crashed["detail"] or "")
    assert "taken over by w2 for attempt 2" in (crashed["detail"] or "")
    assert aggregate_row(engine, "D-1")["lease_owner"] == "w2"


def test_a_worker_that_lost_its_lease_records_nothing_and_the_new_owner_wins(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    old = claim(engine, settings, clock, "w1")
    clock.advance(LEASE + 1)
    new = claim(engine, settings, clock, "w2")
    history_before = len(events(engine, message(engine, "D-1", 1)["id"]))

    # the old owner comes back with an outcome: fenced off by its token
    assert record(engine, settings, clock, old, delivered('{"receipt": "old"}'), "w1") == 0
    row = message(engine, "D-1", 1)
    assert (row["state"], row["locked_by"], row["receipt"]) == ("in_progress", "w2", None)
    assert len(events(engine, row["id"])) == history_before
    assert aggregate_row(engine, "D-1")["lease_token"] == new.token, "w1 freed nothing"
    assert aggregate_row(engine, "D-1")["done_version"] == 0
    assert claim(engine, settings, clock, "w3").messages == []

    assert record(engine, settings, clock, new, retry_later(clock), "w2") == 1
    row = message(engine, "D-1", 1)
    assert (row["state"], row["last_status"]) == ("delayed", 503)
    assert events(engine, row["id"])[-1]["worker"] == "w2"


def test_renew_extends_the_lease_and_returns_zero_for_a_lost_token(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    old = claim(engine, settings, clock, "w1")
    clock.advance(LEASE / 2)
    until = clock.now() + timedelta(seconds=LEASE)
    with transaction(engine) as c:
        assert lease.renew(c, old.token, until) == 2
    assert message(engine, "SKU-1", 1)["locked_until"] == until
    assert aggregate_row(engine, "SKU-1")["lease_until"] == until

    clock.advance(LEASE / 2 + 1)
    assert claim(engine, settings, clock, "w2").messages == [], "renewed: still w1's"

    clock.advance(LEASE)
    new = claim(engine, settings, clock, "w2")
    assert len(new.messages) == 2
    with transaction(engine) as c:
        assert lease.renew(c, old.token, clock.now() + timedelta(seconds=LEASE * 10)) == 0
    assert message(engine, "SKU-1", 1)["locked_until"] == new.until
    assert aggregate_row(engine, "SKU-1")["lease_until"] == new.until


# -- recording outcomes ----------------------------------------------------------------------


def test_a_delivered_outcome_stores_the_receipt_frees_the_aggregate_and_advances_done_version(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    batch = claim(engine, settings, clock, "w1")
    clock.advance(2)
    assert record(engine, settings, clock, batch, delivered('{"receipt": "R-77"}')) == 1

    row = message(engine, "D-1", 1)
    assert row["state"] == "delivered"
    assert row["receipt"] == '{"receipt": "R-77"}'
    assert (row["last_status"], row["last_error"]) == (200, None)
    assert (row["locked_by"], row["locked_until"], row["lease_token"]) == (None, None, None)
    agg = aggregate_row(engine, "D-1")
    assert agg["done_version"] == 1
    assert (agg["lease_token"], agg["lease_owner"], agg["lease_until"]) == (None, None, None)
    last = events(engine, row["id"])[-1]
    assert (last["event"], last["from_state"], last["to_state"]) == (
        "delivered",
        "in_progress",
        "delivered",
    )
    assert (last["worker"], last["attempt"], last["http_status"]) == ("w1", 1, 200)
    assert last["at"] == clock.now()
    assert leased(claim(engine, settings, clock, "w2")) == [("D-1", 2)], "freed at once"


def test_answers_holding_nul_and_any_unicode_are_recorded_as_given_but_the_nul(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """A batch's outcomes travel as one JSON parameter: every text the site can send must come
    back out of it unchanged (PostgreSQL's jsonb refuses only NUL, which classify replaces)."""
    take(engine, settings, clock, [price_row("SKU-N", 1), price_row("SKU-U", 1)])
    batch = claim(engine, settings, clock)
    by_aggregate = {m.aggregate: m for m in batch.messages}
    nul = classify(Response(500, b"boom\x00boom"), 1)
    odd = 'Цена ₽ 😀 "quoted" \\ back\\slash \t tab \u2028 <b>&amp;</b> \'; DROP TABLE x; --'
    unicode = classify(Response(200, json.dumps({"receipt": odd}).encode()), 1)
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=60.0)
    outcomes = [
        (
            by_aggregate["SKU-N"],
            decide(nul, attempt=1, now=clock.now(), policy=policy, rng=Random(1)),
        ),
        (
            by_aggregate["SKU-U"],
            decide(unicode, attempt=1, now=clock.now(), policy=policy, rng=Random(1)),
        ),
    ]
    with transaction(engine) as c:
        recorded = recording.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=outcomes,
            kinds=KindPolicies.of({}),
        )
    assert 2 == recorded
    assert "HTTP 500: boom\ufffdboom" in message(engine, "SKU-N", 1)["last_error"]
    assert odd == message(engine, "SKU-U", 1)["receipt"]
    assert "delivered" == message(engine, "SKU-U", 1)["state"]


def test_a_released_outcome_puts_the_message_back_to_new_without_charging_an_attempt(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    batch = claim(engine, settings, clock)
    assert record(engine, settings, clock, batch, not_sent("breaker open", 1)) == 1
    row = message(engine, "SKU-1", 1)
    assert (row["state"], row["attempts"], row["lease_token"]) == ("new", 0, None)
    assert events(engine, row["id"])[-1]["event"] == "released"
    again = claim(engine, settings, clock)
    assert [m.attempt for m in again.messages] == [1], "the same attempt again"


def test_a_released_outcome_after_a_failed_attempt_keeps_the_attempt_count(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    record(engine, settings, clock, claim(engine, settings, clock), retry_later(clock, 1))
    clock.advance(2)
    batch = claim(engine, settings, clock)
    assert [m.attempt for m in batch.messages] == [2]
    record(engine, settings, clock, batch, not_sent("breaker open", 2))
    row = message(engine, "SKU-1", 1)
    assert row["attempts"] == 1
    assert row["state"] == "delayed", "an earlier attempt was charged: delayed, due at once"
    assert [m.attempt for m in claim(engine, settings, clock).messages] == [2]


def test_expire_exhausted_quarantines_an_expired_lease_at_max_attempts(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-2", 1)])
    first = claim(engine, settings, clock, "w1")
    assert [(m.aggregate, m.attempt) for m in first.messages] == [("D-1", 1), ("D-2", 1)]
    for attempt in range(2, MAX_ATTEMPTS + 1):
        with transaction(engine) as c:  # no lease has expired yet: nothing to do
            assert lease.expire_exhausted(c, now=clock.now(), max_attempts=MAX_ATTEMPTS) == 0
        clock.advance(LEASE + 1)
        batch = claim(engine, settings, clock, f"w{attempt}", limit=1)
        assert [(m.aggregate, m.attempt) for m in batch.messages] == [("D-1", attempt)]
    clock.advance(LEASE + 1)
    # now D-1 holds an expired lease on attempt 3 of 3, D-2 one on attempt 1 of 3

    with transaction(engine) as c:
        assert lease.expire_exhausted(c, now=clock.now(), max_attempts=MAX_ATTEMPTS) == 1
    row = message(engine, "D-1", 1)
    assert (row["state"], row["reason"], row["attempts"]) == ("quarantined", "retry-limit", 3)
    assert row["last_error"] and "expired" in row["last_error"]
    assert row["lease_token"] is None
    last = events(engine, row["id"])[-1]
    assert (last["event"], last["to_state"]) == ("lease-expired", "quarantined")
    assert message(engine, "D-2", 1)["state"] == "in_progress"
    assert [m.aggregate for m in claim(engine, settings, clock, "w10").messages] == ["D-2"]


# -- one history row per attempt: the biography ----------------------------------------------


def attempts_of(engine: Engine, aggregate: str, version: int) -> list[tuple[Any, ...]]:
    """(event, worker, attempt, leased_at, at, http_status) of each row of the message."""
    pk = message(engine, aggregate, version)["id"]
    return [
        (e["event"], e["worker"], e["attempt"], e["leased_at"], e["at"], e["http_status"])
        for e in events(engine, pk)
    ]


def test_a_delivered_message_has_one_row_for_its_attempt_with_its_lease_and_outcome(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    taken = clock.now()
    clock.advance(1)
    leased_at = clock.now()
    batch = claim(engine, settings, clock, "w1")
    clock.advance(2)
    record(engine, settings, clock, batch, delivered())
    assert [
        ("taken", None, None, None, taken, None),
        ("delivered", "w1", 1, leased_at, clock.now(), 200),
    ] == attempts_of(engine, "SKU-1", 1)


def test_a_retried_message_has_one_row_per_attempt_each_with_its_own_lease(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    first = claim(engine, settings, clock, "w1")
    first_leased = clock.now()
    clock.advance(1)
    record(engine, settings, clock, first, retry_later(clock, 5))
    first_ended = clock.now()
    clock.advance(5)
    second = claim(engine, settings, clock, "w2")
    second_leased = clock.now()
    clock.advance(1)
    record(engine, settings, clock, second, quarantined_422(), "w2")
    rows = attempts_of(engine, "SKU-1", 1)
    assert [
        ("retry-scheduled", "w1", 1, first_leased, first_ended, 503),
        ("quarantined", "w2", 2, second_leased, clock.now(), 422),
    ] == rows[1:]
    delay = events(engine, message(engine, "SKU-1", 1)["id"])[1]["delay_s"]
    assert delay == 5


def test_a_lease_that_expired_on_the_last_attempt_shows_that_attempt_in_its_row(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1)])
    claim(engine, settings, clock, "w1")
    for attempt in range(2, MAX_ATTEMPTS + 1):
        clock.advance(LEASE + 1)
        claim(engine, settings, clock, f"w{attempt}")
    last_leased = clock.now()
    clock.advance(LEASE + 1)
    with transaction(engine) as c:
        assert lease.expire_exhausted(c, now=clock.now(), max_attempts=MAX_ATTEMPTS) == 1
    rows = attempts_of(engine, "D-1", 1)
    # every attempt shows: the crashed ones in the takeover rows, the last in lease-expired
    assert [(e, w, a) for e, w, a, *_ in rows[1:]] == [
        ("taken-over", "w1", 1),
        ("taken-over", "w2", 2),
        ("lease-expired", f"w{MAX_ATTEMPTS}", MAX_ATTEMPTS),
    ]
    assert (last_leased, clock.now()) == rows[-1][3:5]
    ends = [e["lease_until"] for e in events(engine, message(engine, "D-1", 1)["id"])[1:]]
    assert ends == [
        last_leased - timedelta(seconds=(LEASE + 1) * (MAX_ATTEMPTS - n) - LEASE)
        for n in range(1, MAX_ATTEMPTS + 1)
    ], "every unanswered attempt says when its lease ran out"


def test_a_message_cancelled_after_its_lease_expired_shows_that_attempt_in_its_row(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    claim(engine, settings, clock, "w1")
    leased_at = clock.now()
    clock.advance(LEASE + 1)
    take(engine, settings, clock, [price_row("SKU-1", 2)])
    with transaction(engine) as c:
        assert coalesce.coalesce(c, settings.policies, clock.now()) == 1
    (_, superseded) = attempts_of(engine, "SKU-1", 1)
    assert ("superseded", "w1", 1, leased_at, clock.now(), None) == superseded
    row = events(engine, message(engine, "SKU-1", 1)["id"])[-1]
    assert row["lease_until"] == leased_at + timedelta(seconds=LEASE)


def test_an_attempt_answered_in_time_has_no_lease_expiry_in_its_row(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    batch = claim(engine, settings, clock, "w1")
    clock.advance(1)
    record(engine, settings, clock, batch, retry_later(clock))
    assert [e["lease_until"] for e in events(engine, message(engine, "SKU-1", 1)["id"])] == [
        None,
        None,
    ]


def test_the_in_flight_check_ends_an_expired_attempt_at_its_lease_not_at_its_cancellation(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """A killed worker's v1 lease runs out; w2 leases v2 after it; a later cycle cancels v1 as
    superseded. The check (``dev.testing.in_flight_overlaps``, which the soak and the worker
    tests rely on) must not call that two versions in flight at once; it must when v1's lease
    really lasted past v2's start."""
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    claim(engine, settings, clock, "w1")
    clock.advance(LEASE + 1)
    take(engine, settings, clock, [price_row("SKU-1", 2)])
    second = claim(engine, settings, clock, "w2")
    assert leased(second) == [("SKU-1", 2)]
    clock.advance(1)
    with transaction(engine) as c:
        assert coalesce.coalesce(c, settings.policies, clock.now()) == 1
    clock.advance(1)
    record(engine, settings, clock, second, delivered(), "w2")
    assert in_flight_overlaps(engine) == []

    v1 = events(engine, message(engine, "SKU-1", 1)["id"])[-1]
    with transaction(engine) as c:  # as if v1's lease had been renewed past v2's start
        c.execute(
            history.update()
            .where(history.c.id == v1["id"])
            .values(lease_until=clock.now() + timedelta(seconds=LEASE))
        )
    assert in_flight_overlaps(engine) == ["price SKU-1 v1/v2"]


def test_the_biography_shows_an_attempt_in_flight_from_the_message(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    batch = claim(engine, settings, clock, "w1")
    with transaction(engine, read_only=True) as c:
        story = biography(c, batch.messages[0].message_id)["history"]
    assert ["taken", "leased"] == [e["event"] for e in story]
    in_flight = story[-1]
    assert ("new", "in_progress", "w1", 1) == (
        in_flight["from"],
        in_flight["to"],
        in_flight["worker"],
        in_flight["attempt"],
    )
    assert in_flight["at"] == in_flight["leased_at"] == clock.now().isoformat()
    assert in_flight["lease_until"] == batch.until.isoformat()
    clock.advance(1)
    record(engine, settings, clock, batch, delivered())
    with transaction(engine, read_only=True) as c:
        story = biography(c, batch.messages[0].message_id)["history"]
    assert ["taken", "delivered"] == [e["event"] for e in story]
    assert story[-1]["lease_until"] is None, "answered in time: no expiry to tell"


def test_the_biography_says_when_an_unanswered_attempts_lease_ran_out(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    old = claim(engine, settings, clock, "w1")
    clock.advance(LEASE + 1)
    claim(engine, settings, clock, "w2")
    with transaction(engine, read_only=True) as c:
        story = biography(c, old.messages[0].message_id)["history"]
    assert [("taken-over", old.until.isoformat())] == [
        (e["event"], e["lease_until"]) for e in story if e["event"] == "taken-over"
    ]


# -- a constant number of statements ---------------------------------------------------------


@contextmanager
def counting(engine: Engine) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


def claim_and_record_statements(
    engine: Engine, settings: Settings, clock: FakeClock, prefix: str, size: int
) -> tuple[int, int]:
    take(
        engine,
        settings,
        clock,
        [price_row(f"{prefix}-{i}", 1) for i in range(size)]
        + [posting_row(f"{prefix}-D-{i}", 1) for i in range(size)],
    )
    with counting(engine) as statements:
        batch = claim(engine, settings, clock, limit=2 * size)
    claimed = len(statements)
    assert len(batch.messages) == 2 * size
    outcomes = [
        (m, delivered() if i % 2 else retry_later(clock)) for i, m in enumerate(batch.messages)
    ]
    with counting(engine) as statements, transaction(engine) as c:
        recorded = recording.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=outcomes,
            kinds=settings.policies,
        )
    assert recorded == 2 * size
    return claimed, len(statements)


def test_claim_and_record_take_a_constant_number_of_statements(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    small = claim_and_record_statements(engine, settings, clock, "A", 5)
    large = claim_and_record_statements(engine, settings, clock, "B", 50)
    assert small == large, f"statements (claim, record): 5 -> {small}, 50 -> {large}"


# -- a claim's cost does not grow with the work already done ---------------------------------


def pick_buffers(engine: Engine, clock: FakeClock) -> int:
    """Pages PostgreSQL touched to pick the next 100 aggregates (EXPLAIN ANALYZE BUFFERS of
    the claim's own statement, with its own parameters)."""
    sql = lease._claim_sql(True, KindPolicies.of(DEFAULT_KINDS), False)

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> Any:
        return "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters

    event.listen(engine, "before_cursor_execute", explain, retval=True)
    try:
        with transaction(engine) as c:
            params = {
                "now": clock.now(),
                "max_attempts": MAX_ATTEMPTS,
                "limit": 100,
                "channel": 1,  # the one channel
            }
            [[plan]] = c.execute(sql.pick, params).all()
    finally:
        event.remove(engine, "before_cursor_execute", explain)
    root = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return int(root["Shared Hit Blocks"]) + int(root["Shared Read Blocks"])


def test_a_claim_reads_nothing_of_the_work_already_done_on_postgresql(
    pg_url: str, clock: FakeClock
) -> None:
    """The claim reads the waiting messages in claim order (the partial index of what may be
    claimed), so its cost does not grow with the work done: the id sweep it replaced needed a
    cursor to get there (4 ms a claim at 10,000 done without one). Compared by pages
    touched, not time, once the finished versions are vacuumed: until (auto)vacuum, or a scan
    that may mark them dead, passes, each finished message leaves dead entries in the index
    that the claim steps over (PostgreSQL's MVCC; on this shared server another database's
    open transaction kept them from being marked)."""
    engine = make_engine(pg_url)
    try:
        settings = fast_settings(pg_url, lease_seconds=LEASE, max_attempts=MAX_ATTEMPTS)
        take(engine, settings, clock, [price_row(f"SKU-{i:05d}", 1) for i in range(3_100)])
        intake.analyze(engine)  # statistics, as autovacuum (or intake, past 10,000) gives them
        done, touched = 0, {}
        while True:
            if done in (100, 3_000):
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    c.exec_driver_sql("VACUUM messages")
                    c.exec_driver_sql("VACUUM deliveries")
                touched[done] = pick_buffers(engine, clock)
            batch = claim(engine, settings, clock)
            if not batch.messages:
                break
            with transaction(engine) as c:
                recording.record(
                    c,
                    token=batch.token,
                    worker="w1",
                    now=clock.now(),
                    outcomes=[(m, delivered()) for m in batch.messages],
                    kinds=settings.policies,
                )
            done += len(batch.messages)
    finally:
        engine.dispose()
    assert set(touched) == {100, 3_000}
    assert touched[3_000] < 1.3 * touched[100], f"pages touched by the pick: {touched}"


# -- a state change finds its messages by id, whatever the backlog ----------------------------


def test_the_claims_update_finds_each_message_by_id_not_by_scanning_a_state(
    tmp_path: Path,
) -> None:
    """SQLite: a batch's shared values go once, but a condition on a constant (``state =
    'new'``) let the planner search the state's index and scan every message in that state
    for each change: 275 ms a claim of 100 with 9,600 pending (0.7 ms by id). The UPDATEs of
    a claim and its record must search the deliveries by primary key."""
    url = sqlite_copy(tmp_path / "plan.db")
    engine = make_engine(url)
    settings = fast_settings(url, lease_seconds=LEASE, max_attempts=MAX_ATTEMPTS)
    clock = FakeClock()
    take(engine, settings, clock, [price_row(f"SKU-{n}", 1) for n in range(300)])
    updates: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if statement.startswith("UPDATE deliveries"):
            updates.append((statement, parameters))

    event.listen(engine, "after_cursor_execute", seen)
    try:
        batch = claim(engine, settings, clock, "w1", limit=100)
        record(engine, settings, clock, batch, delivered())
    finally:
        event.remove(engine, "after_cursor_execute", seen)
    assert len(updates) == 2  # the claim's, the record's
    with engine.connect() as c:
        for statement, parameters in updates:
            plan = " | ".join(
                row[-1] for row in c.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            )
            # by (message, channel): the primary key's own index
            key = "SEARCH deliveries USING INDEX sqlite_autoindex_deliveries_1 "
            assert key + "(message_pk=? AND channel_id=?)" in plan, plan
            assert "SCAN deliveries" not in plan, plan
    engine.dispose()


def test_a_leased_delivery_carries_the_receipt_its_last_awaiting_stored(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """Work whose outcome is read later stays in the database (contract 13, issue 31 item 3):
    the claim hands the delivery's stored receipt to the target (a fresh worker's too)."""
    take(engine, settings, clock, [price_row("SKU-1", 1)])
    first = claim(engine, settings, clock)
    assert [None] == [m.receipt for m in first.messages]
    waits = Decision(
        Event.AWAITING_OUTCOME,
        State.DELAYED,
        "accepted; read back in 5 s",
        charged=False,
        next_try_at=clock.now() + timedelta(seconds=5),
        delay_s=5.0,
        http_status=200,
        receipt="ym-accepted:{}",
    )
    record(engine, settings, clock, first, waits)
    clock.advance(6)
    again = claim(engine, settings, clock, worker="w2")
    assert [("SKU-1", "ym-accepted:{}")] == [(m.aggregate, m.receipt) for m in again.messages]

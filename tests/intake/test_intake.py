"""Intake (contract 1): every staging row ends as a message, a duplicate or a quarantine record.

Runs on SQLite and on PostgreSQL (the ``engine`` fixture is parametrized over both).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, RowMapping, func, insert, select, update

from exchange.db.engine import make_engine, transaction
from exchange.db.migrate import upgrade
from exchange.db.schema import history, messages, staging
from exchange.dev.testing import (
    fast_settings,
    one_channel_messages,
    posting_row,
    price_row,
    raw_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.identity import legacy_message_id, message_id
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.intake.intents import stage_intents
from exchange.queue import lease, record
from exchange.settings import Settings

# -- helpers -------------------------------------------------------------------------------


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url)


def take(engine: Engine, settings: Settings, clock: FakeClock, **kw: Any) -> intake.IntakeReport:
    return intake.take(engine, None, settings.kinds, clock.now(), **kw)


def all_messages(engine: Engine) -> list[RowMapping]:
    """Each message with its delivery on the one channel (a rejected record: its own)."""
    m = one_channel_messages()
    with transaction(engine, read_only=True) as c:
        return list(c.execute(select(m).order_by(m.c.id)).mappings())


def staging_rows(engine: Engine) -> list[RowMapping]:
    with transaction(engine, read_only=True) as c:
        return list(c.execute(select(staging).order_by(staging.c.id)).mappings())


def history_of(engine: Engine, pk: int) -> list[RowMapping]:
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(history).where(history.c.message_pk == pk).order_by(history.c.id)
            ).mappings()
        )


def duplicate_rows(engine: Engine) -> list[RowMapping]:
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(history)
                .where(history.c.event == Event.DUPLICATE.value)
                .order_by(history.c.id)
            ).mappings()
        )


def staging_ids_recorded_as_duplicates(engine: Engine) -> list[int]:
    found = []
    for row in duplicate_rows(engine):
        match = re.search(r"#(\d+)", row["detail"] or "")
        assert match, f"a duplicate history row does not name its staging row: {row['detail']!r}"
        found.append(int(match.group(1)))
    return found


def deliver_everything_leased(engine: Engine, settings: Settings, clock: FakeClock) -> int:
    strict = settings.policies
    with transaction(engine) as c:
        batch = lease.claim(
            c,
            worker="w1",
            now=clock.now(),
            limit=100,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=strict,
        )
    ok = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="r-1")
    with transaction(engine) as c:
        return record.record(
            c,
            token=batch.token,
            worker="w1",
            now=clock.now(),
            outcomes=[(m, ok) for m in batch.messages],
            kinds=strict,
        )


def by_staging_id(engine: Engine) -> dict[int, RowMapping]:
    return {m["staging_id"]: m for m in all_messages(engine)}


# -- every row ends as exactly one outcome ---------------------------------------------------


def test_every_staging_row_ends_as_exactly_one_message_duplicate_or_quarantine_record(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(
        engine,
        [
            price_row("SKU-1", 1, "840.00"),  # message
            price_row("SKU-1", 1, "840.00"),  # duplicate
            price_row("SKU-2", 1, "-1"),  # invalid-contract
            price_row("SKU-3", 1, schema_version="2"),  # unsupported-schema
            raw_row("stock", "SKU-4", 1, "{}"),  # unknown-kind
            price_row("SKU-1", 1, "999.00"),  # version-conflict
            posting_row("D-1", 1),  # message
            price_row("SKU-5", 0),  # invalid-contract: a version below 1
        ],
    )
    report = take(engine, settings, clock)

    ids = [row["id"] for row in staging_rows(engine)]
    assert report.taken == len(ids) == 8
    assert (report.messages, report.duplicates, report.rejected) == (2, 1, 5)
    recorded = by_staging_id(engine)
    duplicates = staging_ids_recorded_as_duplicates(engine)
    outcomes = {i: int(i in recorded) + duplicates.count(i) for i in ids}
    assert outcomes == {i: 1 for i in ids}, "each row must end as exactly one outcome"
    assert sum(1 for m in recorded.values() if not m["rejected"]) == 2
    assert sum(1 for m in recorded.values() if m["rejected"]) == 5


def test_every_taken_row_has_taken_at_set(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(
        engine,
        [price_row("SKU-1", 1), price_row("SKU-1", 1), raw_row("stock", "X", 1, "{}")],
    )
    take(engine, settings, clock)
    assert [row["taken_at"] for row in staging_rows(engine)] == [clock.now()] * 3


def test_duplicate_is_recorded_on_the_existing_message_and_makes_no_new_message(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # the same payload written differently (keys in another order) is the same payload
    stage(engine, [price_row("SKU-1", 7, "840.00")])
    first = {"price_type": "retail", "currency": "RUB", "price": "840.00", "sku": "SKU-1"}
    stage(engine, [price_row("SKU-1", 7, payload=json.dumps(first))])
    report = take(engine, settings, clock)

    assert (report.messages, report.duplicates, report.rejected) == (1, 1, 0)
    [message] = all_messages(engine)
    assert message["message_id"] == message_id("price", "SKU-1", 7)
    events = [h["event"] for h in history_of(engine, message["id"])]
    assert events == [Event.TAKEN.value, Event.DUPLICATE.value]
    second_id = staging_rows(engine)[1]["id"]
    assert staging_ids_recorded_as_duplicates(engine) == [second_id]


def test_a_message_made_under_the_id_of_before_2026_12_keeps_it_when_its_intent_comes_again(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """A Cyrillic aggregate's id reads in Latin letters now (``Kofe-1``, was ``____-1``), but
    the id of a message already made never changes: the same intent staged again after the
    upgrade (by the table or the JSON intake) is that message's duplicate, or its version
    conflict, never a second message under a second Idempotency-Key; a new version gets the
    new form."""
    aggregate = "Кофе-1/retail"
    old = legacy_message_id("price", aggregate, 1)
    new = message_id("price", aggregate, 1)
    assert old.startswith("price.____-1_retail.") and new.startswith("price.Kofe-1_retail.")
    stage(engine, [price_row("Кофе-1", 1, "840.00", aggregate=aggregate)])
    take(engine, settings, clock)
    with transaction(engine) as c:  # as a release before 2026-12 wrote it
        c.execute(update(messages).values(message_id=old, message_id_key=old.lower()))

    stage(engine, [price_row("Кофе-1", 1, "840.0", aggregate=aggregate)])
    assert stage_intents(
        engine, None, settings.kinds, [price_row("Кофе-1", 1, "840.00", aggregate=aggregate)]
    ) == [{"status": "duplicate", "message_id": old}]
    stage(engine, [price_row("Кофе-1", 1, "999.00", aggregate=aggregate)])
    stage(engine, [price_row("Кофе-1", 2, "850.00", aggregate=aggregate)])
    report = take(engine, settings, clock)

    assert (report.messages, report.duplicates, report.rejected) == (1, 1, 1)
    first, second, conflict = all_messages(engine)
    assert first["message_id"] == old and conflict["reason"] == "version-conflict"
    assert old in (conflict["last_error"] or "")
    assert second["message_id"] == message_id("price", aggregate, 2)
    assert second["message_id"].startswith("price.Kofe-1_retail.v2.")


def test_duplicates_within_one_chunk_and_across_cycles_are_recorded_not_sent_again(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(engine, [posting_row("D-1", 1)] * 3)
    first = take(engine, settings, clock)
    assert (first.messages, first.duplicates) == (1, 2)

    clock.advance(10)
    stage(engine, [posting_row("D-1", 1)])
    second = take(engine, settings, clock)
    assert (second.messages, second.duplicates, second.rejected) == (0, 1, 0)

    [message] = all_messages(engine)
    events = [h["event"] for h in history_of(engine, message["id"])]
    assert events == [Event.TAKEN.value] + [Event.DUPLICATE.value] * 3
    assert message["state"] == State.NEW.value


# -- quarantine records of rejected rows -------------------------------------------------------


REJECTIONS = {  # what 1C wrote -> (reason, a word the explanation must contain)
    "price-with-exponent": (price_row("SKU-1", 1, "1e3"), "invalid-contract", "price"),
    "too-many-decimals": (price_row("SKU-1", 1, "1.00001"), "invalid-contract", "decimal places"),
    "broken-json": (price_row("SKU-1", 1, payload='{"sku": "SKU-1"'), "invalid-contract", "JSON"),
    "sku-not-aggregate": (price_row("SKU-1", 1, aggregate="SKU-2"), "invalid-contract", "sku"),
    "version-zero": (price_row("SKU-1", 0), "invalid-contract", "aggregate_version"),
    "negative-version": (price_row("SKU-1", -3), "invalid-contract", "aggregate_version"),
    "posting-not-an-object": (
        posting_row("D-1", 1, payload="[1, 2]"),
        "invalid-contract",
        "JSON object",
    ),
    "unsupported-schema": (
        price_row("SKU-1", 1, schema_version="2"),
        "unsupported-schema",
        "schema_version",
    ),
    "unknown-kind": (raw_row("stock", "SKU-1", 1, "{}"), "unknown-kind", "stock"),
}


def test_rejected_row_becomes_a_quarantine_record_with_its_own_id_reason_and_explanation(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(engine, [row for row, _, _ in REJECTIONS.values()])
    report = take(engine, settings, clock)
    assert (report.taken, report.messages, report.rejected) == (len(REJECTIONS), 0, len(REJECTIONS))

    records = by_staging_id(engine)
    for staged, (case, (_, reason, explains)) in zip(
        staging_rows(engine), REJECTIONS.items(), strict=True
    ):
        record = records[staged["id"]]
        assert record["message_id"] == f"rejected-{staged['id']}", case
        assert record["rejected"] is True, case
        assert record["state"] == State.QUARANTINED.value, case
        assert record["reason"] == reason, case
        assert record["aggregate_id"] is None, case
        assert record["payload"] == staged["payload"], f"{case}: keeps what 1C wrote"
        assert record["source_ref"] == staged["source_ref"], case
        assert explains in (record["last_error"] or ""), (case, record["last_error"])
        [event] = history_of(engine, record["id"])
        assert (event["event"], event["to_state"]) == (Event.REJECTED.value, "quarantined"), case
        assert reason in (event["detail"] or ""), case


def test_bad_row_in_the_middle_does_not_stop_the_rows_after_it(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(
        engine,
        [
            price_row("SKU-1", 1),
            price_row("SKU-2", 1, payload="not json"),
            raw_row("stock", "SKU-3", 1, "{}"),
            price_row("SKU-4", 1, "NaN"),
            price_row("SKU-5", 1),
            posting_row("D-1", 1),
        ],
    )
    report = take(engine, settings, clock, chunk=2)
    assert (report.taken, report.messages, report.rejected) == (6, 3, 3)
    good = {m["aggregate"] for m in all_messages(engine) if not m["rejected"]}
    assert good == {"SKU-1", "SKU-5", "D-1"}
    assert all(row["taken_at"] is not None for row in staging_rows(engine))


def test_row_that_the_database_cannot_store_as_given_does_not_stop_the_rows_after_it(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # Valid JSON (RFC 8259 grammar) in plain ASCII, which 1C can write; decoded, the escape is
    # a lone UTF-16 surrogate that no UTF-8 database column can hold.
    stage(
        engine,
        [
            posting_row("D-1", 1),
            posting_row("D-2", 1, payload='{"document": "D-2", "memo": "\\ud800"}'),
            posting_row("D-3", 1),
        ],
    )
    try:
        take(engine, settings, clock)
    except Exception as exc:  # the cycle itself must not fail on one row
        pytest.fail(f"one bad row made intake fail: {type(exc).__name__}: {exc}")
    taken = [row["taken_at"] for row in staging_rows(engine)]
    assert None not in taken
    outcome = by_staging_id(engine)
    assert {m["aggregate"] for m in outcome.values() if not m["rejected"]} >= {"D-1", "D-3"}
    assert len(outcome) == 3, "the bad row ends as a message or a quarantine record"


# -- version conflicts -----------------------------------------------------------------------


def test_same_version_with_a_different_payload_is_a_version_conflict_even_when_long_delivered(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(engine, [price_row("SKU-1", 3, "840.00")])
    take(engine, settings, clock)
    assert deliver_everything_leased(engine, settings, clock) == 1

    clock.advance(30 * 24 * 3600)
    stage(engine, [price_row("SKU-1", 3, "900.00")])
    report = take(engine, settings, clock)

    assert (report.messages, report.duplicates, report.rejected) == (0, 0, 1)
    original, record = all_messages(engine)
    assert original["state"] == State.DELIVERED.value
    assert json.loads(original["payload"])["price"] == "840.00"
    assert record["rejected"] is True
    assert record["reason"] == "version-conflict"
    assert record["message_id"] == f"rejected-{staging_rows(engine)[1]['id']}"
    assert record["message_id"] != original["message_id"]
    assert original["message_id"] in (record["last_error"] or "")


def test_same_version_with_a_different_payload_in_one_chunk_is_a_version_conflict(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(engine, [posting_row("D-1", 1, "10.00"), posting_row("D-1", 1, "10.01")])
    report = take(engine, settings, clock)
    assert (report.messages, report.rejected) == (1, 1)
    message, record = all_messages(engine)
    assert json.loads(message["payload"])["amount"] == "10.00"
    assert (record["reason"], record["state"]) == ("version-conflict", "quarantined")


def test_version_conflict_with_a_superseded_original_is_still_a_conflict(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    from exchange.queue.coalesce import coalesce

    stage(engine, [price_row("SKU-1", 1, "1.00"), price_row("SKU-1", 2, "2.00")])
    take(engine, settings, clock)
    with transaction(engine) as c:
        coalesce(c, settings.policies, clock.now())
    stage(engine, [price_row("SKU-1", 1, "1.50")])
    report = take(engine, settings, clock)
    assert report.rejected == 1
    assert all_messages(engine)[-1]["reason"] == "version-conflict"


# -- no id watermark ---------------------------------------------------------------------------


def test_row_committed_after_the_cycle_started_is_taken_by_the_next_call(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(engine, [price_row("SKU-1", 1)])
    assert take(engine, settings, clock).taken == 1
    stage(engine, [price_row("SKU-2", 1)])
    assert take(engine, settings, clock).taken == 1
    assert {m["aggregate"] for m in all_messages(engine)} == {"SKU-1", "SKU-2"}


def test_row_with_a_lower_id_that_commits_later_is_taken(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    if engine.dialect.name == "sqlite":
        # SQLite serialises writers: a row written later with an explicit lower id plays the
        # part of a concurrent 1C session whose id was allocated first.
        with transaction(engine) as c:
            for row_id, sku in ((10, "SKU-10"), (11, "SKU-11")):
                c.execute(insert(staging).values(id=row_id, **price_row(sku, 1)))
        assert take(engine, settings, clock).taken == 2
        with transaction(engine) as c:
            c.execute(insert(staging).values(id=5, **price_row("SKU-5", 1)))
    else:
        # PostgreSQL: a real concurrent session allocates the lower id and commits last.
        slow = engine.connect()
        slow_tx = slow.begin()
        slow.execute(insert(staging).values(**price_row("SKU-5", 1)))
        stage(engine, [price_row("SKU-10", 1), price_row("SKU-11", 1)])
        assert take(engine, settings, clock).taken == 2
        slow_tx.commit()
        slow.close()
    report = take(engine, settings, clock)
    assert report.taken == 1
    assert {m["aggregate"] for m in all_messages(engine)} == {"SKU-5", "SKU-10", "SKU-11"}
    assert all(row["taken_at"] is not None for row in staging_rows(engine))
    low = min(staging_rows(engine), key=lambda r: r["id"])
    assert low["aggregate"] == "SKU-5"


# -- chunking and history ----------------------------------------------------------------------


def test_chunking_takes_every_row(engine: Engine, settings: Settings, clock: FakeClock) -> None:
    stage(engine, [price_row(f"SKU-{i}", 1) for i in range(10)])
    report = take(engine, settings, clock, chunk=3)
    assert (report.taken, report.messages) == (10, 10)
    assert all(row["taken_at"] is not None for row in staging_rows(engine))
    assert take(engine, settings, clock, chunk=3).taken == 0


def test_every_new_message_has_a_taken_history_row(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(engine, [price_row(f"SKU-{i}", 1) for i in range(4)] + [posting_row("D-1", 1)])
    take(engine, settings, clock, chunk=2)
    found = all_messages(engine)
    assert len(found) == 5
    for message in found:
        [event] = history_of(engine, message["id"])
        assert event["event"] == Event.TAKEN.value
        assert (event["from_state"], event["to_state"]) == (None, State.NEW.value)
        assert event["at"] == clock.now()
        assert message["state"] == State.NEW.value
        assert message["taken_at"] == clock.now()


# -- a separate staging database ---------------------------------------------------------------


@pytest.fixture
def staging_engine(db_url: str, tmp_path: Any, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """A second migrated database of the same kind as the service's, holding staging."""
    if db_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'staging.db'}"
    else:
        url = str(request.getfixturevalue("empty_pg_url"))
    engine = make_engine(url)
    upgrade(engine)
    yield engine
    engine.dispose()


def test_separate_staging_database_rows_are_taken_into_the_service_database(
    engine: Engine, staging_engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(
        staging_engine, [price_row("SKU-1", 1), posting_row("D-1", 1), raw_row("x", "y", 1, "{}")]
    )
    report = intake.take(engine, staging_engine, settings.kinds, clock.now())
    assert (report.taken, report.messages, report.rejected) == (3, 2, 1)
    assert [r["taken_at"] for r in staging_rows(staging_engine)] == [clock.now()] * 3
    assert staging_rows(engine) == [], "nothing is read from or written to the service's table"
    assert len(all_messages(engine)) == 3


def test_separate_staging_row_taken_twice_after_a_crash_is_a_duplicate_not_a_second_message(
    engine: Engine, staging_engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    stage(
        staging_engine,
        [price_row("SKU-1", 1), posting_row("D-1", 1), raw_row("stock", "S", 1, "{}")],
    )
    intake.take(engine, staging_engine, settings.kinds, clock.now())
    before = all_messages(engine)

    # the crash: the outcome committed in the service database, taken_at never written
    with transaction(staging_engine) as c:
        c.execute(update(staging).values(taken_at=None))
    clock.advance(5)
    again = intake.take(engine, staging_engine, settings.kinds, clock.now())

    assert again.taken == 3
    assert again.messages == 0
    assert again.duplicates == 2
    after = all_messages(engine)
    assert [m["message_id"] for m in after] == [m["message_id"] for m in before]
    assert [m["state"] for m in after] == [m["state"] for m in before]
    with transaction(engine, read_only=True) as c:
        rejected_records = c.execute(
            select(func.count()).select_from(messages).where(messages.c.rejected)
        ).scalar_one()
    assert rejected_records == 1, "a rejected row taken twice is still one quarantine record"
    assert None not in [r["taken_at"] for r in staging_rows(staging_engine)]

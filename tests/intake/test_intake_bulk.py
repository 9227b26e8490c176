"""Intake's set-based storing (rows sent as one JSON parameter, on SQLite as one executemany)
keeps every value of every staging row exactly, on SQLite and PostgreSQL (``engine`` is
parametrized).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from mirror import differences
from sqlalchemy import Engine, delete, func, select, text

from exchange.db.engine import transaction
from exchange.db.schema import (
    aggregates,
    channel_aggregates,
    deliveries,
    history,
    messages,
    staging,
)
from exchange.dev.testing import one_channel_messages, posting_row, price_row, raw_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.policy import DEFAULT_KINDS
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.intake.contracts import Accepted, StagingRow, validate

KINDS = dict(DEFAULT_KINDS)
WRITTEN_AT = datetime(2026, 3, 1, 23, 59, 58, 123456, tzinfo=UTC)
TRICKY_REF = 'Реализация "ТД №5" \\ 0001\'s \u2028 😀'


def staged(engine: Engine) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as c:
        return [dict(r) for r in c.execute(select(staging).order_by(staging.c.id)).mappings()]


def rows_of(engine: Engine, table: Any) -> list[dict[str, Any]]:
    with transaction(engine, read_only=True) as c:
        return [dict(r) for r in c.execute(select(table).order_by(table.c.id)).mappings()]


def test_new_message_carries_every_value_of_its_staging_row_exactly(
    engine: Engine, clock: FakeClock
) -> None:
    stage(
        engine,
        [
            price_row("SKU-1", 1, created_at=WRITTEN_AT, source_ref=TRICKY_REF),
            price_row('SKU "q" \\ ü', 2**40, price="0.0001", source_ref=None),
            posting_row(
                "D-1",
                1,
                payload=json.dumps(
                    {"document": "D-1", "memo": 'a "b" \\ c \u2028 ё', "amount": 12.3400},
                    ensure_ascii=False,
                ),
                created_at=datetime(2026, 3, 2, 0, 0, 0, tzinfo=UTC),
            ),
            raw_row("price", "SKU-2", 3, '{"sku": "SKU-2", "price": 5}', source_ref=""),
        ],
    )
    before = staged(engine)

    report = intake.take(engine, None, KINDS, clock.now(), chunk=3)

    assert (report.taken, report.messages) == (4, 4)
    found = {m["staging_id"]: m for m in rows_of(engine, one_channel_messages())}
    aggregate_ids = {(a["kind"], a["aggregate"]): a["id"] for a in rows_of(engine, aggregates)}
    for row in before:
        verdict = validate(StagingRow(**{k: v for k, v in row.items() if k != "taken_at"}), KINDS)
        assert isinstance(verdict, Accepted)
        message = found[row["id"]]
        assert message["message_id"] == verdict.message_id
        assert message["payload"] == verdict.payload
        for column in ("kind", "aggregate", "schema_version", "source_ref", "created_at"):
            assert message[column] == row[column], column
        assert message["version"] == row["aggregate_version"]
        assert message["aggregate_id"] == aggregate_ids[(row["kind"], row["aggregate"])]
        assert (message["state"], message["attempts"], message["rejected"]) == ("new", 0, False)
        assert message["taken_at"] == message["waiting_since"] == message["updated_at"]
        assert message["taken_at"] == clock.now()
    assert found[before[0]["id"]]["created_at"] == WRITTEN_AT


def test_each_inserted_message_gets_one_taken_history_row_naming_its_staging_row(
    engine: Engine, clock: FakeClock
) -> None:
    stage(engine, [price_row(f"SKU-{i}", 1) for i in range(5)])
    intake.take(engine, None, KINDS, clock.now(), chunk=2)
    stage(engine, [price_row("SKU-0", 1), price_row("SKU-9", 1)])  # a duplicate and a new one

    intake.take(engine, None, KINDS, clock.now(), chunk=2)

    taken = [h for h in rows_of(engine, history) if h["event"] == Event.TAKEN.value]
    by_pk = {m["id"]: m for m in rows_of(engine, messages)}
    assert sorted(h["message_pk"] for h in taken) == sorted(by_pk)
    for event in taken:
        assert event["detail"] == f"from staging row #{by_pk[event['message_pk']]['staging_id']}"
        assert (event["from_state"], event["to_state"]) == (None, State.NEW.value)


def test_messages_inserted_after_the_newest_ones_were_deleted_still_get_their_history(
    engine: Engine, clock: FakeClock
) -> None:
    # SQLite finds what it inserted as the ids above the highest id before the insert: ids
    # freed by deleting (pruning) the newest messages must not confuse it.
    stage(engine, [price_row(f"SKU-{i}", 1) for i in range(3)])
    intake.take(engine, None, KINDS, clock.now())
    newest = max(m["id"] for m in rows_of(engine, messages))
    with transaction(engine) as c:
        c.execute(delete(history).where(history.c.message_pk == newest))
        c.execute(delete(messages).where(messages.c.id == newest))
    stage(engine, [price_row("SKU-7", 1), price_row("SKU-8", 1)])

    report = intake.take(engine, None, KINDS, clock.now())

    assert report.messages == 2
    taken = {h["message_pk"] for h in rows_of(engine, history) if h["event"] == "taken"}
    assert taken == {m["id"] for m in rows_of(engine, messages)}


def test_a_large_intake_refreshes_the_planner_statistics_at_once(
    engine: Engine, clock: FakeClock, monkeypatch: Any
) -> None:
    """After a full reload the planner must know the tables' shape: PostgreSQL planned a claim
    on empty statistics in ~1 s instead of a few ms; SQLite, which keeps no statistics unless
    asked, read every new message through the state index (5 ms per batch instead of 0.3)."""
    monkeypatch.setattr(intake, "ANALYZE_AFTER", 20)
    analyzed = spy_on_analyze(monkeypatch)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(10)])
    intake.take(engine, None, KINDS, clock.now())
    assert analyzed == [], "10 new messages are below the threshold"
    if engine.dialect.name != "postgresql":  # PostgreSQL's autovacuum may analyze them by now
        assert not is_analyzed(engine)
    stage(engine, [price_row(f"SKU-{n}", 2) for n in range(25)])
    intake.take(engine, None, KINDS, clock.now())
    assert analyzed == [engine]
    assert is_analyzed(engine)


def spy_on_analyze(monkeypatch: Any) -> list[Engine]:
    """Intake's own ANALYZE calls, made for real: whether intake asked for statistics is its
    decision, while pg_class alone cannot tell it from PostgreSQL's autovacuum, which on a
    pooled test database (whose tables took many writes before) may analyze at any moment."""
    calls: list[Engine] = []
    real = intake.analyze

    def analyze(engine: Engine) -> None:
        calls.append(engine)
        real(engine)

    monkeypatch.setattr(intake, "analyze", analyze)
    return calls


def test_a_reload_of_a_thousand_prices_refreshes_the_statistics(
    engine: Engine, clock: FakeClock, monkeypatch: Any
) -> None:
    """A marketplace's known-price lookup after a reload of 5,000 prices took 8-12 s on
    PostgreSQL without the aggregates' statistics (python -m bench.marketplace_pace): a
    thousand new messages are enough to refresh them."""
    analyzed = spy_on_analyze(monkeypatch)
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(999)])
    intake.take(engine, None, KINDS, clock.now())
    assert analyzed == [], "999 new messages are below the threshold"
    stage(engine, [price_row(f"SKU-{n}", 1) for n in range(1000, 2000)])
    intake.take(engine, None, KINDS, clock.now())
    assert analyzed == [engine]
    assert is_analyzed(engine)


def is_analyzed(engine: Engine) -> bool:
    """PostgreSQL: pg_class.reltuples is -1 until a table is first analyzed (or vacuumed), and
    ANALYZE writes it in its own transaction. SQLite: sqlite_stat1 exists, with rows for the
    message indexes, only after ANALYZE."""
    with transaction(engine, read_only=True) as c:
        if engine.dialect.name != "postgresql":
            if not c.execute(text("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'")).all():
                return False
            indexed = c.execute(text("SELECT idx FROM sqlite_stat1 WHERE tbl = 'messages'"))
            return "ix_messages_aggregate_id_version" in set(indexed.scalars())
        tuples = c.execute(
            text("SELECT reltuples FROM pg_class WHERE relname IN ('aggregates', 'messages')")
        ).scalars()
        return all(count >= 0 for count in tuples)


def test_every_new_aggregate_of_a_mixed_chunk_gets_one_cursor_and_every_message_one_delivery(
    engine: Engine, clock: FakeClock
) -> None:
    """A price's aggregate is made by the pin step, any other kind's with the messages: in a
    chunk of both (new aggregates and known ones), each aggregate ends with exactly one cursor
    on the channel and each message with its delivery, as ``messages`` and ``aggregates`` say."""
    stage(
        engine,
        [
            price_row("SKU-1", 1),
            posting_row("D-1", 1),
            price_row("SKU-2", 1),
            posting_row("D-1", 2),
            posting_row("D-2", 1),
            price_row("SKU-1", 2),
        ],
    )
    intake.take(engine, None, KINDS, clock.now())
    stage(engine, [posting_row("D-2", 2), posting_row("D-3", 1), price_row("SKU-3", 1)])
    intake.take(engine, None, KINDS, clock.now())

    with transaction(engine, read_only=True) as c:
        made = set(c.execute(select(aggregates.c.id)).scalars())
        cursors = list(c.execute(select(channel_aggregates.c.aggregate_id)).scalars())
        delivered = c.execute(select(func.count()).select_from(deliveries)).scalar_one()
        found = differences(c)
    assert len(made) == 6
    assert sorted(cursors) == sorted(made), "every aggregate has exactly one cursor"
    assert delivered == 9, "every message has its delivery"
    assert found == [], "\n".join(found)

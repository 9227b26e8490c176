"""``exchange prioritize`` (contract 6, issue 23): the named waiting message is claimed before
the backlog, and nothing else changes. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, history, messages
from exchange.dev.testing import fast_settings, message, posting_row, price_row
from exchange.domain.clock import FakeClock
from exchange.domain.states import State
from exchange.errors import OperatorError
from exchange.ops.prioritize import prioritize
from tests.queue.test_claim_order import claim, deliver, take


def put_first(engine: Engine, clock: FakeClock, *arguments: str) -> list[str]:
    with transaction(engine) as c:
        return prioritize(c, arguments, operator="alice", note="wrong price live", now=clock.now())


def test_a_prioritized_price_is_claimed_before_the_backlog_and_recorded_with_the_operator(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    settings = fast_settings(db_url)
    take(engine, settings, clock, [price_row(f"SKU-{n:03d}", 1) for n in range(200)])
    last = message(engine, "price", "SKU-199", 1)["message_id"]
    chosen = put_first(engine, clock, "SKU-150", last)  # an aggregate, then a message_id
    assert chosen == [message(engine, "price", "SKU-150", 1)["message_id"], last]
    batch = claim(engine, settings, clock, 3)
    assert [m.aggregate for m in batch.messages] == ["SKU-199", "SKU-150", "SKU-000"]
    with engine.connect() as c:
        rows = c.execute(
            select(history.c.event, history.c.operator, history.c.note, history.c.to_state)
            .join(messages, messages.c.id == history.c.message_pk)
            .where(messages.c.message_id == last)
            .order_by(history.c.id)
        ).all()
    assert tuple(rows[-1]) == ("operator-prioritize", "alice", "wrong price live", "new")


def test_priority_ends_with_its_message(engine: Engine, db_url: str, clock: FakeClock) -> None:
    """A newer version of the aggregate takes its own place: it is not put first."""
    settings = fast_settings(db_url)
    take(engine, settings, clock, [price_row(f"SKU-{n:03d}", 1) for n in range(50)])
    put_first(engine, clock, "SKU-040")
    deliver(engine, settings, clock, claim(engine, settings, clock, 1))
    assert message(engine, "price", "SKU-040", 1)["state"] == State.DELIVERED.value
    take(engine, settings, clock, [price_row(f"MORE-{n:03d}", 1) for n in range(50)])
    take(engine, settings, clock, [price_row("SKU-040", 2)])
    batch = claim(engine, settings, clock, 1)
    assert [m.aggregate for m in batch.messages] == ["SKU-000"]


def test_priority_never_bypasses_retry_after_nor_strict_order(
    engine: Engine, db_url: str, clock: FakeClock
) -> None:
    settings = fast_settings(db_url)
    rows = [price_row(f"SKU-{n:03d}", 1) for n in range(20)]
    take(engine, settings, clock, [*rows, posting_row("DOC-1", 1), posting_row("DOC-1", 2)])
    later = clock.now() + timedelta(seconds=60)
    with transaction(engine) as c:  # as a 429 with Retry-After: 60 leaves it
        pk = select(messages.c.id).where(messages.c.aggregate == "SKU-010").scalar_subquery()
        c.execute(
            update(deliveries)
            .where(deliveries.c.message_pk == pk)
            .values(state=State.DELAYED.value, next_try_at=later)
        )
    posting_2 = message(engine, "financial_posting", "DOC-1", 2)["message_id"]
    put_first(engine, clock, "SKU-010", posting_2)
    batch = claim(engine, settings, clock, 5)
    claimed = [(m.aggregate, m.version) for m in batch.messages]
    assert ("SKU-010", 1) not in claimed and ("DOC-1", 2) not in claimed
    assert claimed[0] == ("SKU-000", 1)


@pytest.mark.parametrize(
    ("argument", "words"),
    [("NO-SUCH", "no message has this id"), ("SKU-000", "no price of this aggregate")],
)
def test_what_cannot_be_put_first_is_refused_in_one_line_and_nothing_changes(
    engine: Engine, db_url: str, clock: FakeClock, argument: str, words: str
) -> None:
    settings = fast_settings(db_url)
    take(engine, settings, clock, [price_row("SKU-000", 1), price_row("SKU-001", 1)])
    deliver(engine, settings, clock, claim(engine, settings, clock, 1))  # SKU-000 delivered
    with pytest.raises(OperatorError, match=words):
        put_first(engine, clock, "SKU-001", argument)
    assert claim(engine, settings, clock, 1).messages[0].aggregate == "SKU-001"
    with engine.connect() as c:
        events = c.execute(select(history.c.event)).scalars().all()
    assert "operator-prioritize" not in events

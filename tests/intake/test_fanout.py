"""Intake's fan-out (contract 13, "A message, many deliveries"; issue 31 step 6), on SQLite
and PostgreSQL.

- A message accepted gets one delivery on every registered channel not dropped that takes
  its kind, whatever this process's configuration; none on a channel that does not take the
  kind or was dropped; a duplicate row and a rejected one get none.
- Each channel gets the aggregate's cursor: from version 1 when the aggregate begins (the gap
  rule holds on every channel), from the first version the channel receives when it came
  (or began taking the kind) after the aggregate was made, so its strict order starts there;
  a lower version that reaches that channel afterwards is not its to deliver: the sweep
  cancels it there, reason ``stale`` (never sent, never a gap), and the channels there from
  version 1 deliver it in order.
- Each channel deals a take in from its own head: the claim order is per channel.
- A change names its channel: an operator's retry of one channel's quarantined delivery does
  not move another channel's; a change naming no channel moves no delivery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select, update

from exchange.db.channels import register
from exchange.db.engine import transaction
from exchange.db.schema import channel_aggregates, channels, deliveries, history, messages
from exchange.dev.testing import posting_row, price_row, raw_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.policy import KindPolicies, Policy
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.ops.quarantine import Filters, retry
from exchange.queue import channels as channel_ops
from exchange.queue.coalesce import coalesce, quarantine_gaps
from exchange.queue.lease import claim
from exchange.queue.transitions import Change, apply

KINDS = {"price": Policy.LATEST_WINS, "financial_posting": Policy.STRICT}
POLICIES = KindPolicies.of(KINDS)


@dataclass(frozen=True)
class Configured:
    name: str
    target: str
    takes: tuple[str, ...]


SHOP = Configured("shop", "woocommerce", ("price",))
BOOKS = Configured("books", "api", ("financial_posting",))
GONE = Configured("gone", "api", ("price", "financial_posting"))


def take(engine: Engine, clock: FakeClock, rows: list[dict[str, Any]]) -> intake.IntakeReport:
    stage(engine, rows)
    return intake.take(engine, None, KINDS, clock.now())


def ids(engine: Engine) -> dict[str, int]:
    """The channels in use by name."""
    with transaction(engine, read_only=True) as c:
        found = c.execute(
            select(channels.c.name, channels.c.id).where(channels.c.dropped_at.is_(None))
        )
        return {name: id_ for name, id_ in found}


def given(engine: Engine) -> dict[str, set[tuple[str, int]]]:
    """Each channel's deliveries (in use or not) as (aggregate, version)."""
    with transaction(engine, read_only=True) as c:
        rows = c.execute(
            select(channels.c.name, messages.c.aggregate, deliveries.c.version)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .join(channels, channels.c.id == deliveries.c.channel_id)
        ).all()
    found: dict[str, set[tuple[str, int]]] = {}
    for name, aggregate, version in rows:
        found.setdefault(name, set()).add((aggregate, version))
    return found


def cursor(engine: Engine, channel: str, aggregate: str) -> tuple[int, int] | None:
    """(done_version, first_version) of the channel's cursor of the aggregate, or None."""
    with transaction(engine, read_only=True) as c:
        row = c.execute(
            select(channel_aggregates.c.done_version, channel_aggregates.c.first_version)
            .join(channels, channels.c.id == channel_aggregates.c.channel_id)
            .join(messages, messages.c.aggregate_id == channel_aggregates.c.aggregate_id)
            .where(channels.c.name == channel, channels.c.dropped_at.is_(None))
            .where(messages.c.aggregate == aggregate)
            .limit(1)
        ).first()
    return None if row is None else (row[0], row[1])


def drop(engine: Engine, clock: FakeClock, name: str) -> None:
    with transaction(engine) as c:
        channel_ops.drop(c, name, operator="ops", note="gone", now=clock.now())


def test_each_channel_taking_the_kind_gets_one_delivery_and_no_other_channel_any(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, [SHOP, BOOKS, GONE], clock.now())
    drop(engine, clock, "gone")
    report = take(engine, clock, [price_row("A", 1), price_row("B", 1), posting_row("D", 1)])
    assert report.messages == 3
    prices = {("A", 1), ("B", 1)}
    assert given(engine) == {
        "api": prices | {("D", 1)},  # the migration's channel takes both default kinds
        "shop": prices,
        "books": {("D", 1)},
    }  # and none on "gone", dropped before the take
    with transaction(engine, read_only=True) as c:
        states = c.execute(
            select(deliveries.c.state, deliveries.c.attempts, func.count()).group_by(
                deliveries.c.state, deliveries.c.attempts
            )
        ).all()
    assert states == [(State.NEW.value, 0, 6)]


def test_a_duplicate_and_a_rejected_row_get_no_delivery(engine: Engine, clock: FakeClock) -> None:
    register(engine, [SHOP], clock.now())
    take(engine, clock, [price_row("A", 1)])
    report = take(
        engine,
        clock,
        [price_row("A", 1), raw_row("telepathy", "X", 1, "{}"), price_row("A", 2, "x")],
    )
    assert (report.messages, report.duplicates, report.rejected) == (0, 1, 2)
    assert given(engine) == {"api": {("A", 1)}, "shop": {("A", 1)}}


def test_the_registry_decides_not_this_process_configuration(
    engine: Engine, clock: FakeClock
) -> None:
    """The take names only the kinds' policies; the deliveries follow ``channels.takes``:
    a channel that stops taking a kind gets no more of it."""
    register(engine, [SHOP], clock.now())
    register(engine, [Configured("shop", "woocommerce", ())], clock.now())
    take(engine, clock, [price_row("A", 1)])
    assert given(engine) == {"api": {("A", 1)}}


def test_every_channel_there_when_an_aggregate_begins_keeps_the_gap_rule(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, [BOOKS], clock.now())
    take(engine, clock, [posting_row("D", 2), price_row("A", 3)])
    for channel in ("api", "books"):
        assert cursor(engine, channel, "D") == (0, 1)  # version 1 is awaited: a gap
    assert cursor(engine, "shop", "A") is None  # not registered
    with transaction(engine) as c:
        books = ids(engine)["books"]
        batch = claim(
            c,
            worker="w",
            now=clock.now(),
            limit=10,
            lease_seconds=60,
            kinds=POLICIES,
            max_attempts=5,
            channel_id=books,
        )
    assert batch.messages == []  # version 2 waits for 1 on the channel too


def test_a_channel_that_came_later_starts_strict_order_at_the_first_version_it_receives(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [posting_row("D", 1), posting_row("D", 2), price_row("A", 1)])
    clock.advance(60)
    register(engine, [BOOKS, SHOP], clock.now())
    take(engine, clock, [posting_row("D", 3), posting_row("D", 4), price_row("A", 2)])
    assert cursor(engine, "books", "D") == (0, 3)  # 1 and 2 were accepted before it came
    assert cursor(engine, "api", "D") == (0, 1)  # the channel that was there keeps its own
    assert cursor(engine, "shop", "A") == (0, 2)
    assert given(engine)["books"] == {("D", 3), ("D", 4)}
    with transaction(engine) as c:
        batch = claim(
            c,
            worker="w",
            now=clock.now(),
            limit=10,
            lease_seconds=60,
            kinds=POLICIES,
            max_attempts=5,
            channel_id=ids(engine)["books"],
        )
    assert [(m.aggregate, m.version) for m in batch.messages] == [("D", 3)]


def books_claim(engine: Engine, clock: FakeClock) -> list[tuple[str, int]]:
    """What the books channel's claim takes now, as (aggregate, version)."""
    with transaction(engine) as c:
        batch = claim(
            c,
            worker="w",
            now=clock.now(),
            limit=10,
            lease_seconds=60,
            kinds=POLICIES,
            max_attempts=5,
            channel_id=ids(engine)["books"],
        )
    return [(m.aggregate, m.version) for m in batch.messages]


def delivery_of(engine: Engine, channel: str, aggregate: str, version: int) -> tuple[Any, ...]:
    """(state, reason, the detail of its last history row) of a delivery."""
    with transaction(engine, read_only=True) as c:
        state, reason, pk, channel_id = c.execute(
            select(deliveries.c.state, deliveries.c.reason, messages.c.id, channels.c.id)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .join(channels, channels.c.id == deliveries.c.channel_id)
            .where(channels.c.name == channel, channels.c.dropped_at.is_(None))
            .where(messages.c.aggregate == aggregate, messages.c.version == version)
        ).one()
        detail = c.execute(
            select(history.c.detail)
            .where(history.c.message_pk == pk, history.c.channel_id == channel_id)
            .order_by(history.c.id.desc())
            .limit(1)
        ).scalar()
    return state, reason, detail


def late_lower_version(engine: Engine, clock: FakeClock) -> None:
    """Books came after D's versions 1 and 2; its first is version 5; then 1C's version 3."""
    take(engine, clock, [posting_row("D", 1), posting_row("D", 2)])
    register(engine, [BOOKS], clock.now())
    take(engine, clock, [posting_row("D", 5)])
    take(engine, clock, [posting_row("D", 3)])
    assert cursor(engine, "books", "D") == (0, 5)
    assert given(engine)["books"] == {("D", 5), ("D", 3)}


def test_a_version_below_where_a_later_channel_starts_is_cancelled_stale_there_never_left_new(
    engine: Engine, clock: FakeClock
) -> None:
    late_lower_version(engine, clock)
    with transaction(engine) as c:
        coalesce(c, POLICIES, clock.now())
    state, reason, detail = delivery_of(engine, "books", "D", 3)
    assert (State.CANCELLED.value, "stale") == (state, reason)
    assert "version 3 is below version 5, where strict order on this channel starts" in detail
    # the channel that was there from version 1 delivers it in order, after 1 and 2
    assert (State.NEW.value, None) == delivery_of(engine, "api", "D", 3)[:2]
    assert [("D", 5)] == books_claim(engine, clock)  # the books channel goes on from 5


def test_a_version_below_where_a_later_channel_starts_is_never_a_gap(
    engine: Engine, clock: FakeClock
) -> None:
    late_lower_version(engine, clock)
    clock.advance(3600)
    with transaction(engine) as c:
        assert 0 == quarantine_gaps(c, POLICIES, clock.now(), gap_timeout=60)
    assert State.NEW.value == delivery_of(engine, "books", "D", 3)[0]  # the sweep's to cancel


def test_each_channel_deals_a_take_in_from_its_own_head(engine: Engine, clock: FakeClock) -> None:
    register(engine, [SHOP], clock.now())
    take(engine, clock, [price_row(f"S{n}", 1) for n in range(5)])
    channel = ids(engine)
    with transaction(engine) as c:  # the api channel delivered three, the shop all five
        done = deliveries.c.claim_rank < 3
        c.execute(
            update(deliveries)
            .where(deliveries.c.channel_id == channel["api"], done)
            .values(state=State.DELIVERED.value)
        )
        c.execute(
            update(deliveries)
            .where(deliveries.c.channel_id == channel["shop"])
            .values(state=State.DELIVERED.value)
        )
    take(engine, clock, [price_row("N1", 1), price_row("N2", 1)])
    with transaction(engine, read_only=True) as c:
        ranks = c.execute(
            select(deliveries.c.channel_id, messages.c.aggregate, deliveries.c.claim_rank)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .where(messages.c.aggregate.in_(["N1", "N2"]))
        ).all()
    by_channel = {(ch, aggregate): rank for ch, aggregate, rank in ranks}
    # api's head is the fourth of the first take (rank 3): the take is dealt in there
    assert (by_channel[channel["api"], "N1"], by_channel[channel["api"], "N2"]) == (3, 4)
    # nothing waits on the shop: its take starts at 0
    assert (by_channel[channel["shop"], "N1"], by_channel[channel["shop"], "N2"]) == (0, 1)


def test_a_retry_on_one_channel_does_not_move_another_channels_delivery(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, [SHOP], clock.now())
    take(engine, clock, [price_row("A", 1)])
    channel = ids(engine)
    with transaction(engine) as c:
        c.execute(update(deliveries).values(state=State.QUARANTINED.value, reason="http-4xx"))
        [mid] = c.execute(select(messages.c.message_id)).scalars().all()
        retry(
            c,
            [mid],
            Filters(channel="shop"),
            operator="ops",
            note=None,
            now=clock.now(),
            dry_run=False,
        )
    with transaction(engine, read_only=True) as c:
        states = dict(c.execute(select(deliveries.c.channel_id, deliveries.c.state)).all())
    assert states == {channel["api"]: State.QUARANTINED.value, channel["shop"]: State.NEW.value}


def test_a_change_that_names_no_channel_moves_no_delivery(engine: Engine, clock: FakeClock) -> None:
    """Only a rejected record's change names no channel; one on an accepted message cannot
    move its deliveries (on every channel at once, as it did while there was one)."""
    register(engine, [SHOP], clock.now())
    take(engine, clock, [price_row("A", 1)])
    with transaction(engine) as c:
        c.execute(update(deliveries).values(state=State.QUARANTINED.value))
        [pk] = c.execute(select(messages.c.id)).scalars().all()
        apply(
            c,
            [Change(pk, Event.OPERATOR_CANCEL, State.QUARANTINED, State.CANCELLED, operator="o")],
            clock.now(),
        )
    with transaction(engine, read_only=True) as c:
        states = set(c.execute(select(deliveries.c.state)).scalars())
    assert states == {State.QUARANTINED.value}

"""Coalescing and order (contract 3): latest wins for prices, strict order for postings, gaps.

Runs on SQLite and on PostgreSQL (the ``engine`` fixture is parametrized over both).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, RowMapping, func, select

from exchange.db import schema
from exchange.db.engine import transaction
from exchange.db.schema import history
from exchange.dev.testing import (
    fast_settings,
    one_channel_aggregates,
    one_channel_messages,
    posting_row,
    price_row,
    stage,
)
from exchange.domain.clock import FakeClock
from exchange.domain.identity import message_id
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.queue import coalesce as coalesce_module
from exchange.queue import lease
from exchange.queue import record as recording
from exchange.queue.coalesce import coalesce, quarantine_gaps
from exchange.settings import Settings
from exchange.words import error_words
from tests.support.follow import set_cursor

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()
aggregates = one_channel_aggregates()

GAP = 600.0

# -- helpers -------------------------------------------------------------------------------


@pytest.fixture
def settings(db_url: str) -> Settings:
    return fast_settings(db_url, gap_timeout=GAP)


def take(engine: Engine, settings: Settings, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings.kinds, clock.now())


def run_coalesce(engine: Engine, settings: Settings, clock: FakeClock) -> int:
    with transaction(engine) as c:
        return coalesce(c, settings.policies, clock.now())


def run_gaps(engine: Engine, settings: Settings, clock: FakeClock) -> int:
    with transaction(engine) as c:
        return quarantine_gaps(c, settings.policies, clock.now(), settings.gap_timeout)


def of(engine: Engine, aggregate: str) -> dict[int, RowMapping]:
    with transaction(engine, read_only=True) as c:
        rows = c.execute(
            select(messages)
            .where(messages.c.aggregate == aggregate, ~messages.c.rejected)
            .order_by(messages.c.version)
        ).mappings()
        return {row["version"]: row for row in rows}


def events(engine: Engine, pk: int) -> list[RowMapping]:
    with transaction(engine, read_only=True) as c:
        return list(
            c.execute(
                select(history).where(history.c.message_pk == pk).order_by(history.c.id)
            ).mappings()
        )


def claim(engine: Engine, settings: Settings, clock: FakeClock, worker: str = "w1") -> lease.Batch:
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker=worker,
            now=clock.now(),
            limit=settings.batch_size,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
        )


DELIVERED = Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="ok")
REFUSED = Decision(
    Event.QUARANTINED, State.QUARANTINED, "422 Unprocessable", reason="http-422", http_status=422
)


def record(
    engine: Engine,
    settings: Settings,
    clock: FakeClock,
    batch: lease.Batch,
    decision: Decision = DELIVERED,
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


def deliver_next(engine: Engine, settings: Settings, clock: FakeClock) -> list[tuple[str, int]]:
    batch = claim(engine, settings, clock)
    assert record(engine, settings, clock, batch) == len(batch.messages)
    return [(m.aggregate, m.version) for m in batch.messages]


def done_version(engine: Engine, kind: str, aggregate: str) -> int:
    with transaction(engine, read_only=True) as c:
        return int(
            c.execute(
                select(aggregates.c.done_version).where(
                    aggregates.c.kind == kind, aggregates.c.aggregate == aggregate
                )
            ).scalar_one()
        )


# -- latest wins -----------------------------------------------------------------------------


def test_latest_wins_only_the_highest_pending_version_is_kept(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", v, f"{v}.00") for v in range(1, 6)])
    assert run_coalesce(engine, settings, clock) == 4

    found = of(engine, "SKU-1")
    winner = message_id("price", "SKU-1", 5)
    assert found[5]["state"] == State.NEW.value
    assert found[5]["reason"] is None
    for version in range(1, 5):
        loser = found[version]
        assert (loser["state"], loser["reason"]) == ("cancelled", "superseded")
        assert loser["superseded_by"] == winner
        last = events(engine, loser["id"])[-1]
        assert (last["event"], last["from_state"], last["to_state"]) == (
            Event.SUPERSEDED.value,
            "new",
            "cancelled",
        )
        assert winner in (last["detail"] or "")
    assert run_coalesce(engine, settings, clock) == 0, "coalescing twice changes nothing more"


def test_latest_wins_coalesces_each_aggregate_on_its_own(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(
        engine,
        settings,
        clock,
        [
            price_row("SKU-1", 1),
            price_row("SKU-2", 7),
            price_row("SKU-1", 2),
            price_row("SKU-2", 3),
        ],
    )
    run_coalesce(engine, settings, clock)
    assert {v: m["state"] for v, m in of(engine, "SKU-1").items()} == {1: "cancelled", 2: "new"}
    assert {v: m["state"] for v, m in of(engine, "SKU-2").items()} == {3: "cancelled", 7: "new"}


def test_version_below_the_delivered_version_ends_cancelled_stale(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 5)])
    assert deliver_next(engine, settings, clock) == [("SKU-1", 5)]
    assert done_version(engine, "price", "SKU-1") == 5

    clock.advance(60)
    take(engine, settings, clock, [price_row("SKU-1", 3), price_row("SKU-1", 4)])
    assert run_coalesce(engine, settings, clock) == 2

    found = of(engine, "SKU-1")
    for version in (3, 4):
        assert (found[version]["state"], found[version]["reason"]) == ("cancelled", "stale")
        last = events(engine, found[version]["id"])[-1]
        assert (last["event"], last["to_state"]) == (Event.STALE.value, "cancelled")
    assert claim(engine, settings, clock).messages == [], "a stale version is never sent"


def test_version_at_the_delivered_version_ends_cancelled_stale(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 4)])
    with transaction(engine) as c:  # the site confirmed v4 through another way (a 409 stale)
        set_cursor(c, schema.aggregates.c.aggregate == "SKU-1", done_version=4)
    assert run_coalesce(engine, settings, clock) == 1
    assert (of(engine, "SKU-1")[4]["state"], of(engine, "SKU-1")[4]["reason"]) == (
        "cancelled",
        "stale",
    )


def test_a_stale_version_in_flight_when_its_lease_ran_out_is_never_said_never_sent(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """Review rev39 W1: a version whose worker died mid-send (its lease ran out) and that a
    newer delivered version made stale was cancelled "already delivered: never sent", while
    Ozon had taken its send and applied it late. Its history says it was not sent again and
    that the send in flight may have reached the channel; a version never claimed keeps
    "never sent"."""
    take(engine, settings, clock, [price_row("SKU-1", 4), price_row("SKU-2", 4)])
    batch = claim(engine, settings, clock)
    assert sorted(m.aggregate for m in batch.messages) == ["SKU-1", "SKU-2"]
    with transaction(engine) as c:  # SKU-2's v4 handed back before its send: pending again
        c.execute(
            schema.deliveries.update()
            .where(schema.deliveries.c.message_pk == of(engine, "SKU-2")[4]["id"])
            .values(state="delayed", locked_by=None, locked_until=None, lease_token=None)
        )
    clock.advance(settings.lease_seconds + 1)  # SKU-1's worker died: its lease ran out
    with transaction(engine) as c:  # v5 of both delivered another way (another worker)
        set_cursor(c, schema.aggregates.c.aggregate.in_(["SKU-1", "SKU-2"]), done_version=5)
    assert run_coalesce(engine, settings, clock) == 2

    in_flight = events(engine, of(engine, "SKU-1")[4]["id"])[-1]
    assert (in_flight["event"], in_flight["to_state"]) == ("stale", "cancelled")
    assert "never sent" not in in_flight["detail"], in_flight["detail"]
    assert "the send in flight when its lease ran out may have reached the channel" in str(
        in_flight["detail"]
    )
    assert "могла дойти до канала" in error_words(str(in_flight["detail"]), "ru")
    pending = events(engine, of(engine, "SKU-2")[4]["id"])[-1]
    assert pending["detail"] == "version 4 is at or below version 5, already delivered: never sent"


def test_late_lower_version_arriving_after_a_higher_pending_one_is_superseded(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 5)])
    assert run_coalesce(engine, settings, clock) == 0
    clock.advance(1)
    take(engine, settings, clock, [price_row("SKU-1", 3)])
    assert run_coalesce(engine, settings, clock) == 1

    found = of(engine, "SKU-1")
    assert found[5]["state"] == "new"
    assert (found[3]["state"], found[3]["reason"]) == ("cancelled", "superseded")
    assert found[3]["superseded_by"] == found[5]["message_id"]


def test_late_lower_version_arriving_while_a_higher_one_is_in_flight_is_superseded(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [price_row("SKU-1", 5)])
    batch = claim(engine, settings, clock)
    assert [m.version for m in batch.messages] == [5]
    take(engine, settings, clock, [price_row("SKU-1", 3)])
    assert run_coalesce(engine, settings, clock) == 1

    found = of(engine, "SKU-1")
    assert found[5]["state"] == "in_progress"
    assert (found[3]["state"], found[3]["superseded_by"]) == ("cancelled", found[5]["message_id"])


# -- strict: postings ------------------------------------------------------------------------


def test_postings_are_never_coalesced(engine: Engine, settings: Settings, clock: FakeClock) -> None:
    take(engine, settings, clock, [posting_row("D-1", v) for v in range(1, 6)])
    assert run_coalesce(engine, settings, clock) == 0
    found = of(engine, "D-1")
    assert {v: m["state"] for v, m in found.items()} == {v: "new" for v in range(1, 6)}

    delivered = []
    for _ in range(5):
        delivered += deliver_next(engine, settings, clock)
        run_coalesce(engine, settings, clock)
    assert delivered == [("D-1", v) for v in range(1, 6)], "every version is delivered, in order"
    assert {m["state"] for m in of(engine, "D-1").values()} == {"delivered"}


def test_a_gap_holds_the_later_version_and_quarantines_it_only_after_gap_timeout(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    clock.advance(100)
    take(engine, settings, clock, [posting_row("D-1", 4)])
    taken_4 = clock.now()

    assert deliver_next(engine, settings, clock) == [("D-1", 1)]
    assert deliver_next(engine, settings, clock) == [("D-1", 2)]
    assert claim(engine, settings, clock).messages == [], "version 4 waits for version 3"

    # the clock runs from when version 4 was taken, not from the first version
    clock.advance(GAP - 100 + 1)
    assert run_gaps(engine, settings, clock) == 0
    clock.advance(GAP - (clock.now() - taken_4).total_seconds() - 1)
    assert run_gaps(engine, settings, clock) == 0
    assert of(engine, "D-1")[4]["state"] == "new"

    clock.advance(2)
    assert run_gaps(engine, settings, clock) == 1
    waiting = of(engine, "D-1")[4]
    assert (waiting["state"], waiting["reason"]) == ("quarantined", "sequence-gap")
    assert "version 3" in (waiting["last_error"] or "")
    last = events(engine, waiting["id"])[-1]
    assert (last["event"], last["from_state"], last["to_state"]) == (
        Event.SEQUENCE_GAP.value,
        "new",
        "quarantined",
    )
    assert run_gaps(engine, settings, clock) == 0


def test_a_missing_first_version_is_a_gap(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 2)])
    assert claim(engine, settings, clock).messages == [], "the first version of a posting is 1"
    clock.advance(GAP + 1)
    assert run_gaps(engine, settings, clock) == 1
    assert of(engine, "D-1")[2]["reason"] == "sequence-gap"


def test_a_gap_does_not_hold_other_aggregates(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(
        engine,
        settings,
        clock,
        [
            posting_row("D-1", 2),
            posting_row("D-2", 1),
            posting_row("D-2", 2),
            price_row("SKU-1", 1),
        ],
    )
    assert sorted(deliver_next(engine, settings, clock)) == [("D-2", 1), ("SKU-1", 1)]
    assert deliver_next(engine, settings, clock) == [("D-2", 2)]
    clock.advance(GAP + 1)
    assert run_gaps(engine, settings, clock) == 1
    assert {v: m["state"] for v, m in of(engine, "D-2").items()} == {1: "delivered", 2: "delivered"}
    assert of(engine, "D-1")[2]["state"] == "quarantined"


def test_a_gap_closed_in_time_is_not_quarantined(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 3)])
    assert deliver_next(engine, settings, clock) == [("D-1", 1)]
    clock.advance(GAP / 2)
    take(engine, settings, clock, [posting_row("D-1", 2)])
    clock.advance(GAP / 2 + 1)
    assert run_gaps(engine, settings, clock) == 0
    assert deliver_next(engine, settings, clock) == [("D-1", 2)]
    assert deliver_next(engine, settings, clock) == [("D-1", 3)]


def test_message_behind_a_quarantined_predecessor_is_held_not_quarantined(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    take(engine, settings, clock, [posting_row("D-1", 1), posting_row("D-1", 2)])
    batch = claim(engine, settings, clock)
    assert record(engine, settings, clock, batch, REFUSED) == 1
    assert of(engine, "D-1")[1]["state"] == "quarantined"

    clock.advance(10 * GAP)
    assert run_gaps(engine, settings, clock) == 0
    assert of(engine, "D-1")[2]["state"] == "new"
    assert claim(engine, settings, clock).messages == [], "only a person can release it"


def test_version_behind_a_cancelled_one_that_still_waits_for_a_gap_is_quarantined_in_time(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    # Found by the model test: version 1 never arrives, version 2 is quarantined for the gap
    # and an operator cancels it; version 3 then waited forever, neither sent nor quarantined.
    from exchange.ops import quarantine

    take(engine, settings, clock, [posting_row("D-1", 2)])
    clock.advance(GAP + 1)
    assert run_gaps(engine, settings, clock) == 1
    with transaction(engine) as c:
        quarantine.cancel(
            c,
            [of(engine, "D-1")[2]["message_id"]],
            operator="op",
            note="wrong document",
            now=clock.now(),
            kinds=settings.policies,
        )
    take(engine, settings, clock, [posting_row("D-1", 3)])
    clock.advance(GAP - 1)
    assert run_gaps(engine, settings, clock) == 0
    clock.advance(2)
    assert run_gaps(engine, settings, clock) == 1
    waiting = of(engine, "D-1")[3]
    assert (waiting["state"], waiting["reason"]) == ("quarantined", "sequence-gap")
    assert "never arrived" in (waiting["last_error"] or "")


# -- a take-in's own aggregates (``since``) ---------------------------------------------------


def highest_id(engine: Engine) -> int:
    with transaction(engine, read_only=True) as c:
        return int(c.execute(select(func.coalesce(func.max(messages.c.id), 0))).scalar_one())


def states(engine: Engine, aggregate: str) -> dict[int, tuple[str, str | None]]:
    return {v: (m["state"], m["reason"]) for v, m in of(engine, aggregate).items()}


def test_a_take_in_coalesces_the_aggregates_it_brought_and_leaves_the_rest_to_the_sweep(
    engine: Engine, settings: Settings, clock: FakeClock
) -> None:
    """``coalesce(since=...)`` (a take-in within a cycle): the aggregates of the messages
    above ``since`` are coalesced at once, stale and superseded alike; another aggregate's
    superseded version waits for the next whole sweep, which cancels it."""
    take(engine, settings, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    take(engine, settings, clock, [price_row("SKU-3", 5)])
    assert sorted(deliver_next(engine, settings, clock)) == [
        ("SKU-1", 1),
        ("SKU-2", 1),
        ("SKU-3", 5),
    ]
    take(engine, settings, clock, [price_row("OTHER", 1), price_row("OTHER", 2)])
    since = highest_id(engine)
    # The take-in: a newer SKU-1 (its v2 pending then superseded by v3), and SKU-3's v4 (stale).
    take(
        engine,
        settings,
        clock,
        [price_row("SKU-1", 2), price_row("SKU-1", 3), price_row("SKU-3", 4)],
    )
    with transaction(engine) as c:
        assert coalesce(c, settings.policies, clock.now(), since=since) == 2
    assert states(engine, "SKU-1") == {
        1: ("delivered", None),
        2: ("cancelled", "superseded"),
        3: ("new", None),
    }
    assert states(engine, "SKU-3") == {4: ("cancelled", "stale"), 5: ("delivered", None)}
    assert states(engine, "OTHER") == {1: ("new", None), 2: ("new", None)}, "not this take's"
    with transaction(engine) as c:
        assert coalesce(c, settings.policies, clock.now(), since=highest_id(engine)) == 0
    assert run_coalesce(engine, settings, clock) == 1
    assert states(engine, "OTHER") == {1: ("cancelled", "superseded"), 2: ("new", None)}


def test_a_take_in_of_more_messages_than_a_list_holds_coalesces_the_whole_queue(
    engine: Engine, settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``AMONG_AT_MOST`` messages the list of their aggregates would cost more than the
    sweep: the take-in coalesces everything, as a sweep does."""
    monkeypatch.setattr(coalesce_module, "AMONG_AT_MOST", 1)
    take(engine, settings, clock, [price_row("OTHER", 1), price_row("OTHER", 2)])
    since = highest_id(engine)
    take(engine, settings, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    with transaction(engine) as c:
        assert coalesce(c, settings.policies, clock.now(), since=since) == 1
    assert states(engine, "OTHER") == {1: ("cancelled", "superseded"), 2: ("new", None)}


@pytest.mark.parametrize(
    ("since_last", "last_cost", "poll", "due"),
    [
        (0.19, 0.0, 0.2, False),  # never more than once per poll interval
        (0.2, 0.0, 0.2, True),
        (0.2, 0.45, 0.2, False),  # a 0.45 s sweep: at most one per 9 s (SWEEP_SHARE 0.05)
        (8.9, 0.45, 0.2, False),
        (9.0, 0.45, 0.2, True),
    ],
)
def test_a_sweep_within_a_cycle_takes_at_most_its_share_of_the_time(
    since_last: float, last_cost: float, poll: float, due: bool
) -> None:
    """``sweep_due``: the whole-queue sweep runs within a cycle at most once per poll
    interval, and no more often than keeps its cost to SWEEP_SHARE of the time."""
    assert coalesce_module.SWEEP_SHARE == 0.05
    assert coalesce_module.sweep_due(since_last, last_cost, poll) is due

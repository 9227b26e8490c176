"""The registry, seeding and dropping of channels (contract 13, issue 31 items 1 and 5), on
SQLite and PostgreSQL.

- Registration adds each configured channel once, with its target and the kinds it takes,
  writes the kinds again when the configuration changes them, refuses a configured name
  registered with another target (one line, nothing written), and two processes registering
  at once make one row per name.
- ``seed`` gives a channel exactly the latest accepted version of every aggregate of a
  coalescing kind it takes, whatever its state on other channels; the strictly ordered kinds
  from the channel's registration (or ``--from``, inclusive), strict order on the channel
  starting at the first version it receives; run again it creates nothing; stopped after a
  batch it goes on from its mark.
- ``drop`` cancels the channel's waiting deliveries (reason ``channel-removed``, the operator
  and the note in each history row), leaves delivered ones and one in flight under a live
  lease, touches no other channel, and marks the channel dropped; its name configured again
  is a new channel.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, literal, select, update

from exchange.db import schema
from exchange.db.channels import ChannelConflict, register, registry, taking
from exchange.db.engine import is_postgres, make_engine, transaction
from exchange.db.schema import channel_aggregates, channels, deliveries, history
from exchange.dev.testing import one_channel_messages, posting_row, price_row, raw_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.policy import KindPolicies, Policy
from exchange.errors import OperatorError
from exchange.intake import staging_table as intake
from exchange.ops.channels import list_channels
from exchange.queue import channels as channel_ops
from exchange.queue.channels import Seeded
from exchange.queue.lease import claim

# Migration 0026 dropped the one channel's copy from `messages` and `aggregates`: read each
# with its delivery and cursor on the one channel instead.
messages = one_channel_messages()

KINDS = {"price": Policy.LATEST_WINS, "financial_posting": Policy.STRICT}
POLICIES = KindPolicies.of(KINDS)


@dataclass(frozen=True)
class Configured:
    name: str
    target: str
    takes: tuple[str, ...]


SHOP = Configured("shop", "woocommerce", ("price",))
BOTH = Configured("books", "api", ("price", "financial_posting"))


def take(engine: Engine, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, KINDS, clock.now())


def channel_id(engine: Engine, name: str) -> int:
    with transaction(engine, read_only=True) as c:
        return int(
            c.execute(
                select(channels.c.id).where(
                    channels.c.name == name, channels.c.dropped_at.is_(None)
                )
            ).scalar_one()
        )


def given(engine: Engine, name: str) -> dict[tuple[str, int], dict[str, Any]]:
    """The channel's deliveries by (aggregate, version)."""
    with transaction(engine, read_only=True) as c:
        rows = c.execute(
            select(messages.c.aggregate, deliveries)
            .join(messages, messages.c.id == deliveries.c.message_pk)
            .where(deliveries.c.channel_id == channel_id(engine, name))
        ).mappings()
        return {(row["aggregate"], row["version"]): dict(row) for row in rows}


def cursors(engine: Engine, name: str) -> dict[int, tuple[int, int]]:
    with transaction(engine, read_only=True) as c:
        rows = c.execute(
            select(
                channel_aggregates.c.aggregate_id,
                channel_aggregates.c.done_version,
                channel_aggregates.c.first_version,
            ).where(channel_aggregates.c.channel_id == channel_id(engine, name))
        )
        return {row[0]: (row[1], row[2]) for row in rows}


# -- the registry ---------------------------------------------------------------------------------


def test_registration_adds_each_configured_channel_once_with_its_target_and_takes(
    engine: Engine, clock: FakeClock
) -> None:
    assert register(engine, [SHOP, BOTH], clock.now()) == ["shop", "books"]
    clock.advance(60)
    assert register(engine, [SHOP, BOTH], clock.now()) == []  # idempotent
    with transaction(engine, read_only=True) as c:
        found = {r.name: r for r in registry(c)}
    assert found["shop"].target == "woocommerce" and found["shop"].takes == ("price",)
    assert found["books"].takes == ("price", "financial_posting")
    assert found["shop"].added_at == found["books"].added_at  # the first registration's time
    assert found["api"].dropped_at is None  # the migration's own channel stays registered


def test_registration_writes_the_kinds_again_when_the_configuration_changes_them(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, [BOTH], clock.now())
    register(engine, [Configured("books", "api", ("financial_posting",))], clock.now())
    with transaction(engine, read_only=True) as c:
        found = {r.name: r for r in registry(c)}
    assert found["books"].takes == ("financial_posting",)


def test_a_configured_name_registered_with_another_target_is_refused_and_nothing_written(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, [SHOP], clock.now())
    with pytest.raises(ChannelConflict) as refused:
        register(engine, [BOTH, Configured("shop", "bitrix", ("price",))], clock.now())
    said = str(refused.value)
    assert "\n" not in said
    assert "channel shop is registered with target woocommerce, configured with bitrix" in said
    with transaction(engine, read_only=True) as c:
        names = [r.name for r in registry(c)]
    assert "books" not in names  # one transaction: the channel before the conflict is not kept


def test_two_processes_registering_at_once_make_one_row_per_name(
    db_url: str, clock: FakeClock
) -> None:
    engines = [make_engine(db_url) for _ in range(6)]
    start = threading.Barrier(len(engines))
    errors: list[BaseException] = []
    added: list[list[str]] = []

    def one(engine: Engine) -> None:
        try:
            start.wait()
            added.append(register(engine, [SHOP, BOTH], clock.now()))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert errors == []
        assert sorted(name for names in added for name in names) == ["books", "shop"]
        with transaction(engines[0], read_only=True) as c:
            names = sorted(r.name for r in registry(c))
        assert names == ["api", "books", "shop"]
    finally:
        for engine in engines:
            engine.dispose()


def test_a_dropped_name_configured_again_is_a_new_channel(engine: Engine, clock: FakeClock) -> None:
    register(engine, [SHOP], clock.now())
    before = channel_id(engine, "shop")
    with transaction(engine) as c:
        channel_ops.drop(c, "shop", operator="ops", note="moved", now=clock.now())
    clock.advance(60)
    assert register(engine, [SHOP], clock.now()) == ["shop"]
    assert channel_id(engine, "shop") != before
    with transaction(engine, read_only=True) as c:
        rows = [r for r in registry(c) if r.name == "shop"]
    assert [r.dropped_at is None for r in rows] == [False, True]


def test_a_dropped_name_registered_again_warns_that_it_starts_afresh_and_needs_a_seed(
    engine: Engine, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Promise: a name registered again after a drop is never a silent new channel: a WARNING
    says it starts afresh and needs ``exchange channels seed``; a first registration says
    nothing of the kind."""
    with caplog.at_level(logging.WARNING, logger="exchange.db.channels"):
        register(engine, [SHOP], clock.now())
        assert not caplog.records
        with transaction(engine) as c:
            channel_ops.drop(c, "shop", operator="ops", note="moved", now=clock.now())
        register(engine, [SHOP], clock.now())
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    said = record.getMessage()
    assert "shop" in said and "afresh" in said and "exchange channels seed shop" in said


def test_which_channels_take_a_kind_is_read_from_the_registry_alone(
    engine: Engine, clock: FakeClock
) -> None:
    """What intake's fan-out asks (``db.channels.taking``), whatever the process's own
    configuration: the kinds each registration stored."""
    register(engine, [SHOP, BOTH, Configured("odd", "api", ("a'b", "x y"))], clock.now())
    with transaction(engine, read_only=True) as c:
        postgres = is_postgres(c)

        def named(kind: str) -> list[str]:
            query = select(channels.c.name).where(taking(literal(kind), postgres))
            return sorted(c.execute(query.order_by(channels.c.name)).scalars())

        assert named("price") == ["api", "books", "shop"]
        # api as `exchange migrate` registers it with the default kinds (tests' dbkit)
        assert named("financial_posting") == ["api", "books"]
        assert named("x y") == ["odd"] and named("a'b") == ["odd"] and named("nothing") == []


# -- seed -----------------------------------------------------------------------------------------


def prices(engine: Engine, clock: FakeClock) -> None:
    """S1 v1..v3, S2 v1 (delivered on api), S3 v5 then a late v4 (a message, stale), and
    refused rows, S1 v9 and S4 v1 (records: no version became a message)."""
    take(
        engine,
        clock,
        [
            price_row("S1", 1, "10.00"),
            price_row("S1", 2, "11.00"),
            price_row("S2", 1, "20.00"),
            price_row("S3", 5, "50.00"),
        ],
    )
    take(engine, clock, [price_row("S1", 3, "12.00"), price_row("S3", 4, "40.00")])
    take(engine, clock, [raw_row("price", "S1", 9, "not json"), raw_row("price", "S4", 1, "{")])
    with transaction(engine) as c:  # whatever its state on the first channel
        c.execute(
            update(deliveries)
            .where(
                deliveries.c.message_pk.in_(
                    select(messages.c.id).where(messages.c.aggregate == "S2")
                )
            )
            .values(state="delivered")
        )


def test_seed_gives_exactly_the_latest_accepted_version_of_each_coalescing_aggregate(
    engine: Engine, clock: FakeClock
) -> None:
    prices(engine, clock)
    api_before = given(engine, "api")
    clock.advance(60)
    register(engine, [SHOP], clock.now())
    seeded = channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    found = given(engine, "shop")
    assert sorted(found) == [("S1", 3), ("S2", 1), ("S3", 5)]
    assert seeded.created == 3
    assert {d["state"] for d in found.values()} == {"new"}
    assert given(engine, "api") == api_before  # the other channel is not touched
    with transaction(engine, read_only=True) as c:
        seeded_history = c.execute(
            select(history.c.message_pk, history.c.event, history.c.to_state).where(
                history.c.channel_id == channel_id(engine, "shop")
            )
        ).all()
    assert sorted(seeded_history) == sorted(
        (d["message_pk"], "seeded", "new") for d in found.values()
    )
    # each aggregate's cursor on the new channel: nothing delivered, starting at its version
    assert sorted(cursors(engine, "shop").values()) == [(0, 1), (0, 3), (0, 5)]
    again = channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    assert again.created == 0 and given(engine, "shop") == found


def test_seed_ranks_its_deliveries_behind_what_the_channel_has_waiting(
    engine: Engine, clock: FakeClock
) -> None:
    """Fresh changes first: intake deals them in at the head; a seed goes to the tail."""
    prices(engine, clock)
    register(engine, [SHOP], clock.now())
    shop = channel_id(engine, "shop")
    with transaction(engine) as c:  # something already waits on the channel, ranked 1000
        pk = c.execute(select(messages.c.id).where(messages.c.aggregate == "S2")).scalar_one()
        row = c.execute(select(deliveries).where(deliveries.c.message_pk == pk)).mappings().one()
        c.execute(
            deliveries.insert().values(
                {**dict(row), "channel_id": shop, "state": "new", "claim_rank": 1000}
            )
        )
    channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    ranks = {key: d["claim_rank"] for key, d in given(engine, "shop").items()}
    assert ranks[("S2", 1)] == 1000
    assert min(ranks[("S1", 3)], ranks[("S3", 5)]) > 1000


def test_seed_stopped_after_a_batch_goes_on_from_its_mark(engine: Engine, clock: FakeClock) -> None:
    take(engine, clock, [price_row(f"S{n}", 1) for n in range(7)])
    register(engine, [SHOP], clock.now())

    class Crash(Exception):
        pass

    def crash_after_two(done: Seeded) -> None:
        if done.batches == 2:
            raise Crash

    with pytest.raises(Crash):
        channel_ops.seed(
            engine, "shop", POLICIES, now=clock.now(), batch=2, progress=crash_after_two
        )
    assert len(given(engine, "shop")) == 4  # two batches committed, with the mark
    walked: list[int | None] = []
    rest = channel_ops.seed(
        engine, "shop", POLICIES, now=clock.now(), batch=2, progress=lambda d: walked.append(d.mark)
    )
    assert rest.created == 3 and len(walked) == 2  # the three left, not the whole walk again
    assert sorted(given(engine, "shop")) == [(f"S{n}", 1) for n in range(7)]


def postings(engine: Engine, clock: FakeClock) -> None:
    """D1 v1, v2 before the channel is registered; D1 v3 and D2 v1 after."""
    take(engine, clock, [posting_row("D1", 1), posting_row("D1", 2), price_row("P1", 1)])
    clock.advance(60)
    register(engine, [BOTH], clock.now())
    clock.advance(60)
    take(engine, clock, [posting_row("D1", 3), posting_row("D2", 1)])


def aggregate_ids(engine: Engine) -> dict[str, int]:
    with transaction(engine, read_only=True) as c:
        return {
            r.aggregate: r.aggregate_id
            for r in c.execute(select(messages.c.aggregate, messages.c.aggregate_id).distinct())
        }


def test_seed_gives_strictly_ordered_kinds_from_the_channels_registration(
    engine: Engine, clock: FakeClock
) -> None:
    postings(engine, clock)
    channel_ops.seed(engine, "books", POLICIES, now=clock.now())
    assert sorted(given(engine, "books")) == [("D1", 3), ("D2", 1), ("P1", 1)]
    ids = aggregate_ids(engine)
    found = cursors(engine, "books")
    assert found[ids["D1"]] == (0, 3)  # strict order on the channel starts at version 3
    assert found[ids["D2"]] == (0, 1)


def test_seed_from_a_message_gives_strict_kinds_from_it_inclusive(
    engine: Engine, clock: FakeClock
) -> None:
    postings(engine, clock)
    channel_ops.seed(engine, "books", POLICIES, now=clock.now())
    with transaction(engine, read_only=True) as c:
        d1v2 = c.execute(
            select(messages.c.message_id).where(
                messages.c.aggregate == "D1", messages.c.version == 2
            )
        ).scalar_one()
    again = channel_ops.seed(engine, "books", POLICIES, now=clock.now(), from_message=d1v2)
    assert again.created == 1  # D1 v2; what the first seed gave is not made twice
    assert sorted(given(engine, "books")) == [("D1", 2), ("D1", 3), ("D2", 1), ("P1", 1)]
    assert cursors(engine, "books")[aggregate_ids(engine)["D1"]] == (0, 2)
    with pytest.raises(OperatorError, match="no such message: nope"):
        channel_ops.seed(engine, "books", POLICIES, now=clock.now(), from_message="nope")


def test_seed_of_a_channel_not_in_use_is_refused(engine: Engine, clock: FakeClock) -> None:
    with pytest.raises(OperatorError, match="no channel ghost is in use"):
        channel_ops.seed(engine, "ghost", POLICIES, now=clock.now())


# -- drop -----------------------------------------------------------------------------------------


def test_drop_cancels_waiting_deliveries_with_reason_operator_and_note_and_leaves_the_rest(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [price_row(f"S{n}", 1) for n in range(6)])
    register(engine, [SHOP], clock.now())
    channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    shop = channel_id(engine, "shop")
    live = clock.now() + timedelta(seconds=300)
    gone = clock.now() - timedelta(seconds=1)
    states = {
        "S0": {"state": "new"},
        "S1": {"state": "delayed", "next_try_at": live},
        "S2": {"state": "quarantined", "reason": "retry-limit"},
        "S3": {"state": "delivered"},
        "S4": {"state": "in_progress", "locked_by": "w1", "locked_until": live, "lease_token": "t"},
        "S5": {"state": "in_progress", "locked_by": "w2", "locked_until": gone, "lease_token": "u"},
    }
    with transaction(engine) as c:
        for aggregate, values in states.items():
            pk = select(messages.c.id).where(messages.c.aggregate == aggregate).scalar_subquery()
            c.execute(
                update(deliveries)
                .where(deliveries.c.message_pk == pk, deliveries.c.channel_id == shop)
                .values(**values)
            )
    api_before = given(engine, "api")
    with transaction(engine, read_only=True) as c:
        messages_before = c.execute(select(messages.c.id, messages.c.state)).all()
    clock.advance(5)
    with transaction(engine) as c:
        dropped = channel_ops.drop(c, "shop", operator="anna", note="shop closed", now=clock.now())
    assert (dropped.cancelled, dropped.in_flight) == (4, 1)
    with transaction(engine, read_only=True) as c:
        after = {
            r.aggregate: (r.state, r.reason, r.lease_token)
            for r in c.execute(
                select(
                    messages.c.aggregate,
                    deliveries.c.state,
                    deliveries.c.reason,
                    deliveries.c.lease_token,
                )
                .join(messages, messages.c.id == deliveries.c.message_pk)
                .where(deliveries.c.channel_id == shop)
            )
        }
        written = c.execute(
            select(
                messages.c.aggregate,
                history.c.event,
                history.c.from_state,
                history.c.to_state,
                history.c.operator,
                history.c.note,
                history.c.worker,
            )
            .join(messages, messages.c.id == history.c.message_pk)
            .where(history.c.channel_id == shop, history.c.event == "channel-removed")
        ).all()
        row = c.execute(select(channels).where(channels.c.id == shop)).mappings().one()
        messages_after = c.execute(select(messages.c.id, messages.c.state)).all()
    removed = ("cancelled", "channel-removed", None)
    assert after == {
        "S0": removed,
        "S1": removed,
        "S2": removed,
        "S3": ("delivered", None, None),
        "S4": ("in_progress", None, "t"),  # in flight under a live lease: its worker records it
        "S5": removed,
    }
    assert sorted(written) == [
        ("S0", "channel-removed", "new", "cancelled", "anna", "shop closed", None),
        ("S1", "channel-removed", "delayed", "cancelled", "anna", "shop closed", None),
        ("S2", "channel-removed", "quarantined", "cancelled", "anna", "shop closed", None),
        ("S5", "channel-removed", "in_progress", "cancelled", "anna", "shop closed", "w2"),
    ]
    assert row["dropped_at"] is not None
    assert given(engine, "api") == api_before  # the other channel is not touched
    assert sorted(messages_after) == sorted(messages_before)  # nor the one channel's columns


def test_dropping_the_one_channel_cancels_its_deliveries_and_leaves_the_messages_rows_alone(
    engine: Engine, clock: FakeClock
) -> None:
    """A message's state is its deliveries' (migration 0026): dropping the one channel
    cancels its deliveries; an accepted message's row holds no state of its own."""
    take(engine, clock, [price_row("S1", 1), posting_row("D1", 1)])
    with transaction(engine) as c:
        dropped = channel_ops.drop(c, "api", operator="anna", note="gone", now=clock.now())
    assert dropped.cancelled == 2
    with transaction(engine, read_only=True) as c:
        assert set(c.execute(select(deliveries.c.state, deliveries.c.reason)).all()) == {
            ("cancelled", "channel-removed")
        }
        own = schema.messages.c
        assert set(c.execute(select(own.state, own.reason)).all()) == {(None, None)}


def test_drop_needs_a_note_and_a_channel_in_use(engine: Engine, clock: FakeClock) -> None:
    with transaction(engine) as c, pytest.raises(OperatorError, match="--note is required"):
        channel_ops.drop(c, "api", operator="anna", note=" ", now=clock.now())
    with transaction(engine) as c, pytest.raises(OperatorError, match="no channel ghost is in use"):
        channel_ops.drop(c, "ghost", operator="anna", note="x", now=clock.now())


# -- list -----------------------------------------------------------------------------------------


def test_list_counts_each_channels_deliveries_and_says_which_are_configured_here(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [price_row("S1", 1), price_row("S2", 1)])
    register(engine, [SHOP, BOTH], clock.now())
    channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    with transaction(engine) as c:
        channel_ops.drop(c, "books", operator="anna", note="never used", now=clock.now())
        rows = {row["name"]: row for row in list_channels(c, ["api", "books"])}
    assert rows["api"]["counts"]["new"] == 2 and rows["api"]["configured"] is True
    assert rows["shop"]["counts"]["new"] == 2 and rows["shop"]["configured"] is False
    assert rows["shop"]["takes"] == ["price"] and rows["shop"]["target"] == "woocommerce"
    assert rows["books"]["dropped_at"] is not None and rows["books"]["configured"] is False
    assert sum(rows["books"]["counts"].values()) == 0


def test_a_delivery_handed_back_on_a_dropped_channel_is_cancelled_by_the_next_sweep(
    engine: Engine, clock: FakeClock
) -> None:
    """A delivery in flight when its channel was dropped and later handed back by its worker
    (a stop: ``new`` again) must not wait there for good (found by the shop owner's
    walk-through: it stayed ``new`` on the dropped channel, counted in the backlog, and no
    command could end it)."""
    take(engine, clock, [price_row("S1", 1)])
    register(engine, [SHOP], clock.now())
    channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    shop = channel_id(engine, "shop")
    live = clock.now() + timedelta(seconds=300)
    on_shop = deliveries.c.channel_id == shop
    with transaction(engine) as c:
        c.execute(
            update(deliveries)
            .where(on_shop)
            .values(state="in_progress", locked_by="w1", locked_until=live, lease_token="t")
        )
        channel_ops.drop(c, "shop", operator="anna", note="shop closed", now=clock.now())
        # the worker stops and hands it back, unsent
        c.execute(
            update(deliveries)
            .where(on_shop)
            .values(state="new", locked_by=None, locked_until=None, lease_token=None)
        )
    with transaction(engine) as c:
        assert 1 == channel_ops.close_dropped(c, clock.now())
        assert 0 == channel_ops.close_dropped(c, clock.now()), "once"
    with transaction(engine, read_only=True) as c:
        ended = c.execute(select(deliveries.c.state, deliveries.c.reason).where(on_shop)).one()
        api = c.execute(
            select(deliveries.c.state).where(deliveries.c.channel_id == channel_id(engine, "api"))
        ).scalar_one()
    assert tuple(ended) == ("cancelled", "channel-removed")
    assert api == "new", "the other channel's delivery is not touched"


def test_a_dropped_channels_worker_claims_nothing_there_before_the_sweep(
    engine: Engine, clock: FakeClock
) -> None:
    """A worker started before its channel was dropped serves that channel's row: a delivery
    handed back there for a retry (its send's answer lost) is never claimed and sent again
    (review ozon 35: the old worker sent 1100 again on the dropped channel 6 s after the drop,
    before the sweep cancelled it); only the sweep ends it."""
    take(engine, clock, [price_row("S1", 1)])
    register(engine, [SHOP], clock.now())
    channel_ops.seed(engine, "shop", POLICIES, now=clock.now())
    shop = channel_id(engine, "shop")
    on_shop = deliveries.c.channel_id == shop
    with transaction(engine) as c:
        c.execute(
            update(deliveries)
            .where(on_shop)
            .values(state="in_progress", locked_by="w1", locked_until=clock.now(), attempts=1)
        )
        channel_ops.drop(c, "shop", operator="anna", note="shop closed", now=clock.now())
        # the worker records its timeout: due again at once
        c.execute(
            update(deliveries)
            .where(on_shop)
            .values(state="delayed", locked_by=None, locked_until=None, next_try_at=None)
        )
    with transaction(engine) as c:
        batch = claim(
            c,
            worker="w1",
            now=clock.now() + timedelta(seconds=60),
            limit=10,
            lease_seconds=30,
            kinds=POLICIES,
            max_attempts=10,
            channel_id=shop,
        )
    assert batch.messages == []

"""The delivery pipeline reads each channel's own deliveries and cursors (contract 13; issue 31,
step 3): what only the reading of ``deliveries`` and ``channel_aggregates`` can keep.

A second channel is simulated as the fan-out will make it (step 6): a ``channels`` row, and
deliveries and cursors on it written directly, so that one message has two deliveries whose
states part (migration 0026 dropped the one channel's copy on ``messages`` and ``aggregates``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, and_, insert, literal, select, update

from exchange.db.engine import transaction
from exchange.db.schema import (
    DELIVERY_COLUMNS,
    channel_aggregates,
    channels,
    deliveries,
    history,
    messages,
)
from exchange.dev.testing import fast_settings, posting_row, price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.intake import staging_table as intake
from exchange.queue import coalesce, idle, lease
from exchange.queue import record as recording
from exchange.queue.deliveries import COPIED
from exchange.settings import Settings

ONE = 1  # the one channel a fresh database has (migration 0024)
GAP_TIMEOUT = 60.0


def settings_of(engine: Engine) -> Settings:
    return fast_settings(engine.url.render_as_string(hide_password=False), max_attempts=3)


def take(engine: Engine, clock: FakeClock, rows: list[dict[str, Any]]) -> None:
    stage(engine, rows)
    intake.take(engine, None, settings_of(engine).kinds, clock.now())


def add_channel(engine: Engine, clock: FakeClock, name: str) -> int:
    with transaction(engine) as c:
        return int(
            c.execute(
                insert(channels)
                .values(name=name, target="api", added_at=clock.now())
                .returning(channels.c.id)
            ).scalar_one()
        )


def copy_deliveries(engine: Engine, channel: int, aggregate: str, *versions: int) -> None:
    """The one channel's deliveries of ``aggregate`` at ``versions`` (all when none), as they
    stand, given to ``channel`` too; and the aggregate's cursor on it (nothing done yet)."""
    names = [*COPIED, *DELIVERY_COLUMNS]
    d = deliveries.c
    chosen = and_(d.channel_id == ONE, d.aggregate_id == _aggregate_id(aggregate))
    if versions:
        chosen = and_(chosen, d.version.in_(versions))
    with transaction(engine) as c:
        c.execute(
            insert(deliveries).from_select(
                ["message_pk", "channel_id", *names],
                select(d.message_pk, literal(channel), *(d[name] for name in names)).where(chosen),
            )
        )
        known = c.execute(
            select(channel_aggregates.c.aggregate_id).where(
                channel_aggregates.c.channel_id == channel,
                channel_aggregates.c.aggregate_id == _aggregate_id(aggregate),
            )
        ).first()
        if known is None:
            c.execute(
                insert(channel_aggregates).from_select(
                    ["aggregate_id", "channel_id"],
                    select(_aggregate_id(aggregate), literal(channel)),
                )
            )


def _aggregate_id(aggregate: str) -> Any:
    return (
        select(messages.c.aggregate_id)
        .where(messages.c.aggregate == aggregate)
        .limit(1)
        .scalar_subquery()
    )


def set_cursor(engine: Engine, channel: int, aggregate: str, **values: Any) -> None:
    c_ = channel_aggregates.c
    with transaction(engine) as c:
        c.execute(
            update(channel_aggregates)
            .where(c_.channel_id == channel, c_.aggregate_id == _aggregate_id(aggregate))
            .values(**values)
        )


def set_delivery(engine: Engine, channel: int, aggregate: str, version: int, **values: Any) -> None:
    d = deliveries.c
    with transaction(engine) as c:
        c.execute(
            update(deliveries)
            .where(
                d.channel_id == channel,
                d.aggregate_id == _aggregate_id(aggregate),
                d.version == version,
            )
            .values(**values)
        )


def delivery(engine: Engine, channel: int, aggregate: str, version: int) -> Any:
    d = deliveries.c
    with transaction(engine, read_only=True) as c:
        return (
            c.execute(
                select(deliveries).where(
                    d.channel_id == channel,
                    d.aggregate_id == _aggregate_id(aggregate),
                    d.version == version,
                )
            )
            .mappings()
            .one()
        )


def claim(engine: Engine, clock: FakeClock, channel: int, worker: str = "w1") -> lease.Batch:
    settings = settings_of(engine)
    with transaction(engine) as c:
        return lease.claim(
            c,
            worker=worker,
            now=clock.now(),
            limit=100,
            lease_seconds=30,
            max_attempts=settings.max_attempts,
            kinds=settings.policies,
            channel_id=channel,
        )


def delivered() -> Decision:
    return Decision(Event.DELIVERED, State.DELIVERED, "200 OK", http_status=200, receipt="{}")


def record(engine: Engine, clock: FakeClock, batch: lease.Batch, worker: str = "w1") -> int:
    with transaction(engine) as c:
        return recording.record(
            c,
            token=batch.token,
            worker=worker,
            now=clock.now(),
            outcomes=[(m, delivered()) for m in batch.messages],
            kinds=settings_of(engine).policies,
        )


def claimed(batch: lease.Batch) -> list[tuple[str, int, int]]:
    return sorted((m.aggregate, m.version, m.channel_id) for m in batch.messages)


# -- the claim -------------------------------------------------------------------------------


def test_a_claim_reads_its_channels_deliveries_not_another_channels(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    ozon = add_channel(engine, clock, "ozon")
    copy_deliveries(engine, ozon, "SKU-1")
    copy_deliveries(engine, ozon, "SKU-2")
    # SKU-1 was delivered on the one channel (its delivery and cursor say so) and waits on
    # ozon; SKU-2 waits on both.
    set_delivery(engine, ONE, "SKU-1", 1, state=State.DELIVERED.value)
    set_cursor(engine, ONE, "SKU-1", done_version=1)
    assert claimed(claim(engine, clock, ONE)) == [("SKU-2", 1, ONE)]
    assert claimed(claim(engine, clock, ozon)) == [("SKU-1", 1, ozon), ("SKU-2", 1, ozon)]
    assert claimed(claim(engine, clock, ozon)) == [], "each channel's deliveries once"


def test_a_lease_on_one_channel_does_not_block_another_channels_lease_on_the_aggregate(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [price_row("SKU-1", 1)])
    ozon = add_channel(engine, clock, "ozon")
    copy_deliveries(engine, ozon, "SKU-1")
    on_one = claim(engine, clock, ONE, "w1")
    on_ozon = claim(engine, clock, ozon, "w2")
    assert claimed(on_one) == [("SKU-1", 1, ONE)]
    assert claimed(on_ozon) == [("SKU-1", 1, ozon)], "one in flight per aggregate and channel"
    assert claim(engine, clock, ONE, "w3").messages == [], "but one only on each channel"
    # Recorded on ozon: its delivery and cursor move; the one channel's lease holds.
    assert record(engine, clock, on_ozon, "w2") == 1
    assert delivery(engine, ozon, "SKU-1", 1)["state"] == State.DELIVERED.value
    assert delivery(engine, ONE, "SKU-1", 1)["state"] == State.IN_PROGRESS.value
    with transaction(engine, read_only=True) as c:
        cursors = dict(
            c.execute(
                select(channel_aggregates.c.channel_id, channel_aggregates.c.done_version)
            ).all()
        )
        named = c.execute(
            select(history.c.event, history.c.channel_id).where(history.c.event == "delivered")
        ).all()
    assert cursors == {ONE: 0, ozon: 1}
    assert named == [("delivered", ozon)], "the history row names its channel"
    assert record(engine, clock, on_one, "w1") == 1, "ozon's record took nothing of one's lease"
    assert delivery(engine, ONE, "SKU-1", 1)["state"] == State.DELIVERED.value


def test_strict_order_is_kept_on_each_channel_from_the_first_version_it_received(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [posting_row("DOC-1", 1), posting_row("DOC-1", 2)])
    ozon = add_channel(engine, clock, "ozon")
    late = add_channel(engine, clock, "late")
    copy_deliveries(engine, ozon, "DOC-1")
    copy_deliveries(engine, late, "DOC-1", 2)  # registered after version 1 was taken
    set_cursor(engine, late, "DOC-1", first_version=2)
    assert record(engine, clock, claim(engine, clock, ONE)) == 1
    # Version 1 is done on the one channel, not on ozon: each sends its own next version.
    assert claimed(claim(engine, clock, ONE)) == [("DOC-1", 2, ONE)]
    assert claimed(claim(engine, clock, ozon)) == [("DOC-1", 1, ozon)]
    # A channel's strict order starts at the first version it received (contract 13).
    assert claimed(claim(engine, clock, late)) == [("DOC-1", 2, late)]


# -- coalescing and gaps ---------------------------------------------------------------------


def run_sweep(engine: Engine, clock: FakeClock) -> tuple[int, int]:
    policies = settings_of(engine).policies
    with transaction(engine) as c:
        cancelled = coalesce.coalesce(c, policies, clock.now())
        gaps = coalesce.quarantine_gaps(c, policies, clock.now(), GAP_TIMEOUT)
    return cancelled, gaps


def test_one_sweep_coalesces_each_channel_against_its_own_versions_and_cursor(
    engine: Engine, clock: FakeClock
) -> None:
    take(engine, clock, [price_row("SKU-1", 1), price_row("SKU-2", 1)])
    ozon = add_channel(engine, clock, "ozon")
    copy_deliveries(engine, ozon, "SKU-1")
    copy_deliveries(engine, ozon, "SKU-2")
    take(engine, clock, [price_row("SKU-1", 2)])  # intake gives it to the one channel only
    set_cursor(engine, ozon, "SKU-2", done_version=1)  # ozon has SKU-2 v1 already
    assert run_sweep(engine, clock) == (2, 0)
    one_v1, ozon_v1 = delivery(engine, ONE, "SKU-1", 1), delivery(engine, ozon, "SKU-1", 1)
    assert (one_v1["state"], one_v1["reason"]) == ("cancelled", "superseded")
    assert ozon_v1["state"] == "new", "ozon has no newer version of SKU-1: v1 is its latest"
    assert (
        delivery(engine, ozon, "SKU-2", 1)["state"],
        delivery(engine, ozon, "SKU-2", 1)["reason"],
    ) == ("cancelled", "stale")
    assert delivery(engine, ONE, "SKU-2", 1)["state"] == "new", "not delivered on one"
    with transaction(engine, read_only=True) as c:
        moves = sorted(
            c.execute(
                select(history.c.event, history.c.channel_id).where(
                    history.c.event.in_(["superseded", "stale"])
                )
            ).all()
        )
    assert moves == [("stale", ozon), ("superseded", ONE)]
    assert delivery(engine, ONE, "SKU-2", 1)["state"] == "new", "ozon's stale left one's alone"


def test_a_gap_is_checked_on_each_channel(engine: Engine, clock: FakeClock) -> None:
    take(engine, clock, [posting_row("DOC-1", 1), posting_row("DOC-1", 2)])
    ozon = add_channel(engine, clock, "ozon")
    late = add_channel(engine, clock, "late")
    copy_deliveries(engine, ozon, "DOC-1", 2)  # version 1 never reached ozon
    copy_deliveries(engine, late, "DOC-1", 2)  # nor late, whose order starts at 2
    set_cursor(engine, late, "DOC-1", first_version=2)
    clock.advance(GAP_TIMEOUT + 1)
    assert run_sweep(engine, clock) == (0, 1)
    gap = delivery(engine, ozon, "DOC-1", 2)
    assert (gap["state"], gap["reason"]) == ("quarantined", "sequence-gap")
    assert gap["last_error"] == f"version 1 never arrived within {GAP_TIMEOUT:g} s"
    assert delivery(engine, ONE, "DOC-1", 2)["state"] == "new", "v1 waits before it on one"
    assert delivery(engine, late, "DOC-1", 2)["state"] == "new", "the first late received"


# -- idle ------------------------------------------------------------------------------------


def test_idle_is_told_per_channel(engine: Engine, clock: FakeClock) -> None:
    take(engine, clock, [price_row("SKU-1", 1)])
    ozon = add_channel(engine, clock, "ozon")
    copy_deliveries(engine, ozon, "SKU-1")
    assert record(engine, clock, claim(engine, clock, ONE)) == 1
    policies = settings_of(engine).policies
    with transaction(engine, read_only=True) as c:
        assert idle.held_or_none(c, policies, [ONE]), "nothing left on the one channel"
        assert not idle.held_or_none(c, policies, [ozon]), "SKU-1 still waits on ozon"
        assert not idle.held_or_none(c, policies, [ONE, ozon])
    assert idle.is_idle(engine, None, policies, [ONE])


def test_an_exhausted_lease_expires_on_its_own_channel(engine: Engine, clock: FakeClock) -> None:
    take(engine, clock, [price_row("SKU-1", 1)])
    ozon = add_channel(engine, clock, "ozon")
    copy_deliveries(engine, ozon, "SKU-1")
    claim(engine, clock, ONE)
    claim(engine, clock, ozon)
    set_delivery(engine, ozon, "SKU-1", 1, attempts=3)  # its last allowed attempt
    clock.advance(31)
    with transaction(engine) as c:
        assert lease.expire_exhausted(c, now=clock.now(), max_attempts=3) == 1
    assert delivery(engine, ozon, "SKU-1", 1)["state"] == "quarantined"
    assert delivery(engine, ONE, "SKU-1", 1)["state"] == "in_progress", "one may take it over"


# -- withheld ----------------------------------------------------------------------------------


def test_a_withheld_version_is_superseded_only_by_a_newer_version_delivered_on_its_channel(
    engine: Engine, clock: FakeClock
) -> None:
    """Contract 13: withheld ends ``cancelled``/``superseded`` when a newer version is
    delivered *there*; a newer version delivered to another shop never reached this one's
    buyers, so the withheld one stays for its channel's person to decide."""
    take(engine, clock, [price_row("SKU-1", 1), price_row("SKU-1", 2)])
    ozon = add_channel(engine, clock, "ozon")
    copy_deliveries(engine, ozon, "SKU-1")
    for channel in (ONE, ozon):  # version 1 withheld on both shops, version 2 waiting
        set_delivery(engine, channel, "SKU-1", 1, state=State.WITHHELD.value)
    record(engine, clock, claim(engine, clock, ONE))  # version 2 delivered on the one channel
    assert delivery(engine, ONE, "SKU-1", 2)["state"] == State.DELIVERED.value
    assert delivery(engine, ONE, "SKU-1", 1)["state"] == State.CANCELLED.value
    assert delivery(engine, ozon, "SKU-1", 1)["state"] == State.WITHHELD.value
    record(engine, clock, claim(engine, clock, ozon))
    assert delivery(engine, ozon, "SKU-1", 1)["state"] == State.CANCELLED.value
    assert delivery(engine, ozon, "SKU-1", 1)["reason"] == "superseded"

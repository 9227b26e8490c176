"""``DbSentTimes.lost_since`` and a send in flight: a priced mark never answered is a lost send
for the product's next send (Ozon may still apply it, research §1.5), except while the worker
that marked it is alive, sending now under its lease (it records its own answer). A lease is
alive until its ``locked_until``, not for as long as nobody has handed the delivery back:
review rev39 H1 (two workers on PostgreSQL, one killed mid-send with Ozon holding its import
of 1020; its lease ran out, the other worker's next batch took 1C's 1030 before anything
handed the dead one's delivery back, sent it at once, and the held 1020 landed over it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select, update

from exchange.db.engine import transaction
from exchange.db.schema import deliveries, messages
from exchange.db.sent_times import DbSentTimes
from exchange.dev.testing import price_row, stage
from exchange.domain.policy import DEFAULT_KINDS
from exchange.intake.staging_table import take
from exchange.targets.ozon.hours import LOST, SENDING, sending_receipt

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)  # the lease's start
LEASE = timedelta(seconds=30)


def _in_flight(engine: Engine) -> tuple[DbSentTimes, float]:
    """SKU-1's delivery leased at T0 for LEASE and marked as its send leaves, a second later,
    with the prices it carries (``reserve``, as the Ozon target marks a send): the mark's time."""
    stage(engine, [price_row("SKU-1", 2, "1020.00")])
    take(engine, None, dict(DEFAULT_KINDS), T0)
    with transaction(engine) as connection:
        connection.execute(
            update(deliveries).values(
                state="in_progress", locked_by="w-dead", leased_at=T0, locked_until=T0 + LEASE
            )
        )
        message_id = connection.execute(select(messages.c.message_id)).scalar_one()
    sent = DbSentTimes(engine)
    at = (T0 + timedelta(seconds=1)).timestamp()
    full, taken = sent.reserve(
        {"SKU-1": [message_id]},
        sending_receipt(at),
        T0 - timedelta(hours=1),
        10,
        SENDING,
        priced={"SKU-1": "price=1020"},
    )
    assert (full, taken) == ({}, {}), "the send was not marked: the test tests nothing"
    return sent, at


def _lost(sent: DbSentTimes, now: datetime) -> dict[str, list[str]]:
    return sent.lost_since(["SKU-1"], T0 - timedelta(minutes=10), LOST, SENDING, now=now)


def test_a_send_under_a_running_lease_is_a_live_workers_not_lost(engine: Engine) -> None:
    sent, _ = _in_flight(engine)
    assert _lost(sent, T0 + LEASE - timedelta(seconds=1)) == {}


def test_a_send_whose_lease_ran_out_is_lost_before_anyone_hands_it_back(engine: Engine) -> None:
    """The delivery is still ``in_progress`` under the dead worker's lease (no sweep, no
    take-over yet): past ``locked_until`` its send is a lost one, and the newer price waits."""
    sent, at = _in_flight(engine)
    assert _lost(sent, T0 + LEASE + timedelta(seconds=1)) == {
        "SKU-1": [f"{LOST}{at:.3f}:price=1020"]
    }

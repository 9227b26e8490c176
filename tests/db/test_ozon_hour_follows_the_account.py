"""Ozon's 10 updates of a product an hour are the account's (research §1.3), not one channel
row's: a channel dropped and added again under its name (``channels drop``, ``channels seed``)
still counts the hour's sends and refusals of the one dropped (review ozon 34b: the re-added
channel sent R1 again and Ozon refused it, limit exceeded). SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine, select, update

from exchange.db.channels import register
from exchange.db.engine import transaction
from exchange.db.schema import channels, deliveries, messages
from exchange.db.sent_times import DbSentTimes
from exchange.dev.testing import price_row, stage
from exchange.domain.clock import FakeClock
from exchange.domain.policy import KindPolicies, Policy
from exchange.intake import staging_table as intake
from exchange.queue import channels as channel_ops

KINDS = {"price": Policy.LATEST_WINS}


@dataclass(frozen=True)
class Configured:
    name: str
    target: str
    takes: tuple[str, ...]


OZON = Configured("ozon", "ozon", ("price",))
SENDING = "ozon-sending:"


def _live(engine: Engine) -> int:
    with transaction(engine, read_only=True) as c:
        return int(
            c.execute(
                select(channels.c.id).where(
                    channels.c.name == "ozon", channels.c.dropped_at.is_(None)
                )
            ).scalar_one()
        )


def _ten_sends_then_drop_and_add_again(engine: Engine, clock: FakeClock) -> None:
    """R1 sent 10 times within the hour on ``ozon`` (each accepted), R3 refused for the hour;
    then the channel dropped, added again and seeded."""
    register(engine, [OZON], clock.now())
    for version in range(1, 11):
        stage(engine, [price_row("R1", version, f"{100 + version}.00")])
        intake.take(engine, None, KINDS, clock.now())
    stage(engine, [price_row("R3", 1, "30.00")])
    intake.take(engine, None, KINDS, clock.now())
    first = _live(engine)
    with transaction(engine) as c:
        pks = dict(
            c.execute(
                select(messages.c.id, messages.c.version).where(messages.c.aggregate == "R1")
            ).all()
        )
        for pk, version in pks.items():
            c.execute(
                update(deliveries)
                .where(deliveries.c.message_pk == pk, deliveries.c.channel_id == first)
                .values(
                    state="delivered",
                    last_status=200,
                    updated_at=clock.now() + timedelta(minutes=version),
                )
            )
        refused_at = (clock.now() + timedelta(minutes=20)).timestamp()
        c.execute(
            update(deliveries)
            .where(
                deliveries.c.message_pk.in_(
                    select(messages.c.id).where(messages.c.aggregate == "R3")
                ),
                deliveries.c.channel_id == first,
            )
            .values(
                state="delayed",
                receipt=f"ozon-refused:{refused_at}",
                updated_at=clock.now() + timedelta(minutes=20),
            )
        )
    clock.advance(30 * 60)
    with transaction(engine) as c:
        channel_ops.drop(c, "ozon", operator="ops", note="x", now=clock.now())
    register(engine, [OZON], clock.now())
    channel_ops.seed(engine, "ozon", KindPolicies.of(KINDS), now=clock.now())
    assert _live(engine) != first


def test_a_channel_dropped_and_added_again_keeps_the_hours_sends_of_its_account(
    engine: Engine, clock: FakeClock
) -> None:
    start = clock.now()
    _ten_sends_then_drop_and_add_again(engine, clock)
    sent = DbSentTimes(engine, "ozon")
    hour_ago = clock.now() - timedelta(hours=1)
    assert hour_ago < start
    assert len(sent.since(["R1"], hour_ago)["R1"]) == 10
    with transaction(engine, read_only=True) as c:
        seeded = c.execute(
            select(messages.c.message_id, messages.c.aggregate)
            .join(deliveries, deliveries.c.message_pk == messages.c.id)
            .where(deliveries.c.channel_id == _live(engine))
        ).all()
    items = {sku: [m for m, s in seeded if s == sku] for sku in ("R1", "R3")}
    assert items["R1"] and items["R3"]
    full, _ = sent.reserve(items, f"{SENDING}{clock.now().timestamp()}:x", hour_ago, 10, SENDING)
    assert set(full) == {"R1"}  # R1 holds: its 10 sends of the hour were the account's
    assert len(full["R1"]) == 10
    refusals = sent.receipts_since(["R3"], hour_ago, "ozon-refused:")
    assert len(refusals.get("R3", [])) == 1  # Ozon's refusal of R3 still holds its hour

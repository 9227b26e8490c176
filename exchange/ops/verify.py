"""``exchange verify`` (contract 15): read prices back from the shop and list where it differs
from the latest delivered price of each SKU and price type.

What was delivered comes from the queue (the highest delivered version of each price
aggregate); what the shop holds comes from the target's read-back seam
(``targets.base.ReadsPrices``), so a marketplace's target offers verify by implementing one
method. A target without the seam (the shop API, 1C-Bitrix: their protocols cannot read a
price back) is refused in one line, exit 2, as is a channel that is not there.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, and_, exists, select

from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids, on
from exchange.db.schema import channels, deliveries, history, messages
from exchange.domain.clock import local_time
from exchange.domain.states import Event, State
from exchange.errors import OperatorError
from exchange.ops.find import price_of, sku_of
from exchange.ops.waits import wait_of
from exchange.queue.deliveries import one_channel as deliveries_one_channel
from exchange.settings import Channel
from exchange.targets.base import HeldPrice, OutgoingMessage, ReadsPrices, Target

# Prices only: a financial posting is an event, not a value a shop holds to compare.
PRICE_KIND = "price"


@dataclass(frozen=True, slots=True)
class Delivered:
    """The latest delivered price of one aggregate, as it left for the shop."""

    message: OutgoingMessage
    sku: str


@dataclass(frozen=True, slots=True)
class Newer:
    """1C's newest version of a price above the one delivered, not delivered (yet) on the
    channel: what a difference may come from (rev32p: verify said "delivered 1000, holds
    1100" of a channel holding 1C's newer 1100 whose answer was lost, and "holds 0" of an old
    price the service removed because 1C replaced it with one in quarantine)."""

    message_id: str
    version: int
    state: str
    awaiting: bool  # delayed, waiting for the channel rather than for a retry (ops.waits)
    price: str | None
    # of a delayed one that waits, what for (``ops.waits.wait_of``): the channel, 1C, a person
    wait: str = ""


@dataclass(frozen=True, slots=True)
class Verification:
    channel: str
    held: list[HeldPrice]
    not_delivered: list[str]  # SKUs asked for (--sku) with no delivered price to compare
    # the differing ones' newer versions from 1C (by the delivered message's id)
    newer: dict[str, Newer] = field(default_factory=dict)

    @property
    def differing(self) -> list[HeldPrice]:
        return [h for h in self.held if not h.agrees]

    def as_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "checked": len(self.held),
            "agree": len(self.held) - len(self.differing),
            "differ": [_held_json(h, self.newer.get(h.message_id)) for h in self.differing],
            "not_delivered": self.not_delivered,
        }


def chosen_channel(channels: Sequence[Channel], name: str | None, source: str) -> Channel:
    """The channel ``--channel`` names; without it, the one configured. Any other name, or no
    name among several, is refused, naming where the channels were written (``source``:
    ``Settings.channels_source``, the place the operator used)."""
    names = ", ".join(repr(channel.name) for channel in channels)
    found = [channel for channel in channels if name in (None, channel.name)]
    if len(found) == 1:
        return found[0]
    if name is None:
        raise OperatorError(f"give --channel NAME: the channels are {names} ({source})")
    if len(channels) == 1:
        raise OperatorError(f"no channel {name!r}: the one channel is {names} ({source})")
    raise OperatorError(f"no channel {name!r}: the channels are {names} ({source})")


def dropped_said(
    engine: Engine, name: str | None, channels_: Sequence[Channel], zone: str
) -> str | None:
    """``--channel NAME`` of a channel not configured here that was dropped (``exchange
    channels drop``): the words saying so, when and by whom (the operator the drop's cancelled
    deliveries name, when it cancelled any), and what to do, rather than «no channel». None
    for a name configured, or never dropped."""
    if name is None or any(channel.name == name for channel in channels_):
        return None
    with transaction(engine, read_only=True) as connection:
        rows = connection.execute(
            select(channels.c.id, channels.c.dropped_at)
            .where(channels.c.name == name)
            .order_by(channels.c.id.desc())
        ).all()
        if not rows or rows[0].dropped_at is None:
            return None  # never registered, or registered and not dropped: «no channel» is right
        operator = connection.execute(
            select(history.c.operator)
            .where(
                history.c.channel_id == rows[0].id,
                history.c.event == Event.CHANNEL_REMOVED.value,
                history.c.operator.is_not(None),
            )
            .limit(1)
        ).scalar()
    when = local_time(rows[0].dropped_at, zone, seconds=False)
    names = ", ".join(channel.name for channel in channels_)
    by = f" by {operator}" if operator else ""
    return (
        f"channel {name} was dropped {when}{by}: nothing is delivered to it any more; verify "
        f"a channel configured now ({names}), or configure it again and give it every current "
        f"price: exchange channels seed {name}"
    )


def channel_target(target: Target) -> ReadsPrices:
    """The channel's target, when it can read prices back."""
    if not isinstance(target, ReadsPrices):
        raise OperatorError(
            f"the {target.name} target cannot read a price back from the shop (its protocol "
            "has no way to): exchange verify reads prices back from woocommerce, ozon, "
            "wildberries and yandex-market"
        )
    return target


def one_channel(engine: Engine) -> int:
    """Without EXCHANGE_CHANNELS: the one channel's id (the oldest not dropped), whatever
    name the registry gave it."""
    with transaction(engine, read_only=True) as connection:
        return deliveries_one_channel(connection)


def latest_delivered(engine: Engine, channel: str | int | None = None) -> list[Delivered]:
    """The highest version delivered of every price aggregate to ``channel``'s shop (an id
    or a name; every channel's for None, each message once), in one statement."""
    d = deliveries
    newer = deliveries.alias("newer")
    m = messages.c
    query = (
        select(m.message_id, m.kind, m.aggregate, m.version, m.payload, m.created_at)
        .select_from(d.join(messages, m.id == d.c.message_pk))
        .where(d.c.state == State.DELIVERED.value, d.c.kind == PRICE_KIND)
        .where(
            ~exists().where(
                and_(
                    newer.c.aggregate_id == d.c.aggregate_id,
                    newer.c.channel_id == d.c.channel_id,
                    newer.c.state == State.DELIVERED.value,
                    newer.c.version > d.c.version,
                )
            )
        )
        .order_by(m.aggregate, d.c.channel_id)
    )
    with transaction(engine, read_only=True) as connection:
        named = select(channels.c.id).where(channels.c.name == channel).limit(1)
        if isinstance(channel, str) and connection.execute(named).first() is None:
            return []  # a channel configured, not yet registered (no run yet): none delivered
        ids = channel_ids(connection, channel)
        rows = connection.execute(query.where(on(d.c.channel_id, ids))).all()
    once = {r[0]: r for r in rows}  # a message delivered to several channels: once
    return [
        Delivered(OutgoingMessage(r[0], r[1], r[2], r[3], r[4], r[5]), sku_of(r[4], r[2]))
        for r in once.values()
    ]


def choose(
    delivered: Sequence[Delivered],
    *,
    skus: Sequence[str] = (),
    sample: int | None = None,
    rng: random.Random | None = None,
) -> tuple[list[Delivered], list[str]]:
    """The prices to read back: every one, those of the SKUs asked for (and which of those
    have none delivered), or a random sample of ``sample`` SKUs with all their price types."""
    if skus:
        wanted = set(skus)
        chosen = [d for d in delivered if d.sku in wanted]
        return chosen, sorted(wanted - {d.sku for d in chosen})
    if sample is not None:
        every = sorted({d.sku for d in delivered})
        picked = set((rng or random.Random()).sample(every, min(sample, len(every))))
        return [d for d in delivered if d.sku in picked], []
    return list(delivered), []


async def verify(
    target: ReadsPrices,
    chosen: Sequence[Delivered],
    *,
    channel: str,
    not_delivered: list[str],
    engine: Engine | None = None,
    channel_ref: str | int | None = None,
) -> Verification:
    """Read the chosen prices back; with ``engine``, each differing one's newer version from
    1C on the channel (``channel_ref``: its name or id, as ``latest_delivered`` takes it)."""
    held = await target.read_prices([d.message for d in chosen]) if chosen else []
    differing = [h.message_id for h in held if not h.agrees]
    newer = newer_versions(engine, channel_ref, differing) if engine and differing else {}
    return Verification(channel, held, not_delivered, newer)


def newer_versions(
    engine: Engine, channel: str | int | None, of: Sequence[str]
) -> dict[str, Newer]:
    """For each delivered message in ``of``, the newest version of its aggregate above it on
    the same channel that is not delivered (in flight, waiting, withheld, in quarantine,
    cancelled), if any: one statement."""
    done, dm = deliveries.alias("done"), messages.alias("done_message")
    d, m = deliveries, messages
    query = (
        select(
            dm.c.message_id.label("of"),
            m.c.message_id,
            m.c.version,
            m.c.kind,
            m.c.payload,
            d.c.state,
            wait_of(d.c.message_pk, d.c.channel_id, d.c.state).label("wait"),
        )
        .select_from(
            dm.join(done, done.c.message_pk == dm.c.id)
            .join(
                d,
                and_(
                    d.c.aggregate_id == done.c.aggregate_id,
                    d.c.channel_id == done.c.channel_id,
                    d.c.version > done.c.version,
                    d.c.state != State.DELIVERED.value,
                ),
            )
            .join(m, m.c.id == d.c.message_pk)
        )
        .where(dm.c.message_id.in_(list(of)))
        .order_by(m.c.version)
    )
    found: dict[str, Newer] = {}
    with transaction(engine, read_only=True) as connection:
        query = query.where(on(done.c.channel_id, channel_ids(connection, channel)))
        for r in connection.execute(query):  # by version: the newest stays
            price = price_of(r.kind, r.payload)["price"]
            wait = r.wait or ""
            found[r.of] = Newer(r.message_id, r.version, r.state, bool(wait), price, wait)
    return found


def _held_json(held: HeldPrice, newer: Newer | None) -> dict[str, Any]:
    return {
        "message_id": held.message_id,
        "sku": held.sku,
        "field": held.where,
        "delivered": None if held.sent is None else str(held.sent),
        "shop": None if held.held is None else str(held.held),
        "found": held.found,
        "unreadable": held.unreadable,
        "newer": None
        if newer is None
        else {
            "message_id": newer.message_id,
            "version": newer.version,
            "state": newer.state,
            "price": newer.price,
        },
    }

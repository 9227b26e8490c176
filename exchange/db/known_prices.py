"""The latest known price of each (SKU, price type): the database side of the targets'
``KnownPrices`` port (exchange/targets/prices.py), built by ``exchange.app`` for the 1C-Bitrix
target (contract 10: every ``Предложение`` carries every mapped price type whose latest price the
service knows, because receivers such as wc1c read an offer's prices as its whole set).

"Known" is the latest version delivered or being delivered (``in_progress``) to the channel's
shop (its ``deliveries``, contract 13) of each price aggregate of the SKU (``aggregates.sku``
and ``price_type``, fixed by the first accepted version); a version only waiting (new, delayed)
or quarantined is not what the shop holds. Prune keeps what this reads however old
(``exchange.ops.prune``, contract 13): the latest delivered message of each price, and one being
delivered is never final, so never pruned. Only a price whose messages were pruned before that
rule (a database pruned by an earlier release) is not known, until 1C sends it again.

A channel that withholds prices or accepts them before it shows them (Yandex Market, contract
14) asks for more (``taken``): a version it withholds (``withheld``: it took it, and an older one
sent over it would replace it) and one waiting for its read-back (delayed, its receipt beginning
with ``awaiting_receipt``, e.g. ``ym-accepted:``, also once superseded) are what it holds
too, after a restart as before one.

``waiting`` serves the marketplace targets' ``WaitingPrices`` port (issue 32): the newest
version of each price type of the SKU still to be given to the channel (new or delayed, and in
flight unless ``in_flight`` is False: a marketplace channel's in flight is the asking batch's
own), with when it is due, so that an item that cannot go without it waits for it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    FromClause,
    Select,
    and_,
    func,
    or_,
    select,
)

from exchange.db.on_channels import Channel, channel_ids, on
from exchange.db.schema import aggregates, channel_aggregates, deliveries, history, messages
from exchange.domain.prices import DEFAULT_CURRENCY, PAIR_RULE, KnownPrice, WaitingPrice
from exchange.domain.reasons import Reason
from exchange.domain.states import Event, State

CHUNK = 500  # SKUs per SELECT ... IN
Key = tuple[str, str]  # (SKU, price type)
KNOWN_STATES = (State.DELIVERED.value, State.IN_PROGRESS.value)
# The states of a delivery that may be in doubt: not delivered, not in flight, and an earlier
# attempt of it may have reached the channel (``in_doubt``); new again after an uncharged one.
DOUBT_STATES = (
    State.NEW.value,
    State.DELAYED.value,
    State.QUARANTINED.value,
    State.CANCELLED.value,
)
# What ``exchange.queue.record`` writes before the detail of an attempt whose result is unknown.
RESULT_UNKNOWN = "result-unknown: "


class DbKnownPrices:
    """What the shop of ``channel`` (an id or a name) holds; None: every channel's, the
    highest version known on any (with one channel, that channel's)."""

    def __init__(
        self,
        engine: Engine,
        channel: Channel = None,
        *,
        delivered_only: bool = False,
        awaiting_receipt: str | None = None,
        in_flight: bool = True,
        in_doubt: bool = False,
        doubt_receipts: tuple[str, ...] = (),
        replaced: bool = False,
    ) -> None:
        """``delivered_only``: the latest version delivered, not one being delivered, and only
        while what the marketplace holds is known (a price equal to it is not sent again,
        contract 14): a later version of the price that was sent or may have been (a request
        cut off, in flight at a crash, a timeout, then superseded: its claim charged an
        attempt that its answer did not give back) leaves that price out, as not known.
        ``awaiting_receipt``: the channel took a version withheld, or delayed with a receipt
        beginning with this (accepted, its read-back awaited), or cancelled as superseded with
        such a receipt (the channel took it all the same; its successor may never go): those
        are known too.
        ``in_flight`` False: a version being delivered (``in_progress``) is not known. A
        marketplace channel (contract 14) has at most one item per SKU in flight, so every
        version of the SKU in flight there is in the batch asking: the batch carries each as
        new, or refuses it before sending (``invalid-for-channel``), and a refused one is not
        what the marketplace holds: the item carries the version delivered before it (review
        32: a discount base with kopecks beside a new price sent the price without any
        discount base, and Yandex dropped the discount).
        ``replaced``: each known price says when the service took in the newest later version
        of its type the channel never took (quarantined, or cancelled by a person), if any
        (``KnownPrice.replaced_at``): a marketplace item never carries a dependent price 1C
        replaced again (review b_pair2: the old price cleared beside a new price came back
        beside the next one)."""
        self.engine = engine
        self.replaced = replaced and not delivered_only
        self.channel = channel
        self.delivered_only = delivered_only
        self.states = (State.DELIVERED.value,) if delivered_only or not in_flight else KNOWN_STATES
        self.awaiting_receipt = None if delivered_only else awaiting_receipt
        self.in_doubt = in_doubt and not delivered_only
        self.doubt_receipts = doubt_receipts
        self.pending = (
            (State.NEW.value, State.DELAYED.value, State.IN_PROGRESS.value)
            if in_flight
            else (State.NEW.value, State.DELAYED.value)
        )

    def _known(self, table: FromClause) -> ColumnElement[bool]:
        """A delivery of ``table`` whose version the channel holds (or is being given, or
        may hold: ``in_doubt``)."""
        held: list[ColumnElement[bool]] = []
        if self.awaiting_receipt is None:
            held.append(table.c.state.in_(self.states))
        else:
            held += [
                table.c.state.in_((*self.states, State.WITHHELD.value)),
                and_(
                    or_(
                        table.c.state == State.DELAYED.value,
                        # Superseded while its read-back was awaited: the channel took it all
                        # the same, and holds it until a later version it takes (known then,
                        # the newer) replaces it. Its successor may never go (refused before
                        # sending, quarantined): the one it took is still what it holds
                        # (review rev40y H1: 1000 accepted, then 1C's value 0 refused; the
                        # accepted 1000 was dropped with its cancellation, and 1C's next
                        # discountBase 1600 quarantined, "no price mapped to value known").
                        and_(
                            table.c.state == State.CANCELLED.value,
                            table.c.reason == Reason.SUPERSEDED.value,
                        ),
                    ),
                    table.c.receipt.startswith(self.awaiting_receipt, autoescape=True),
                ),
            ]
        if self.in_doubt:
            held.append(_doubted(table, self.doubt_receipts))
        return held[0] if len(held) == 1 else or_(*held)

    def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
        wanted = sorted(set(skus))
        found: dict[tuple[str, str], KnownPrice] = {}
        d = deliveries
        known = deliveries.alias("known")
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                of_skus = select(aggregates.c.id).where(
                    aggregates.c.kind == "price",
                    aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                )
                newest = (
                    select(
                        d.c.aggregate_id.label("aggregate_id"),
                        func.max(d.c.version).label("version"),
                    )
                    .where(
                        d.c.aggregate_id.in_(of_skus),
                        on(d.c.channel_id, ids),
                        self._known(d),
                    )
                    .group_by(d.c.aggregate_id)
                    .subquery()
                )
                if self.delivered_only:
                    # The outcome of a later version's send is unknown: so is what it holds.
                    # Charged, or released with its result unknown (an answer lost after
                    # the marketplace applied it charges nothing: review ozon, v2 800 applied,
                    # 1C's 700 again was answered "unchanged" while Ozon held 800).
                    # Not the asking batch's own: a later version on its first attempt under
                    # the aggregate's lease now (one delivery of an aggregate in flight on a
                    # channel, lease.py) is not sent yet, so the channel holds the delivered
                    # one still (review 32c: otherwise no price is known while its successor
                    # is being sent, and only a worker's memory, older than another worker's
                    # delivery, said what Ozon held). One left in flight by a crash keeps its
                    # old token: unknown.
                    later = deliveries.alias("later")
                    cursor = channel_aggregates.alias("cursor")
                    leased_now = (
                        select(cursor.c.aggregate_id)
                        .where(
                            cursor.c.aggregate_id == later.c.aggregate_id,
                            cursor.c.channel_id == later.c.channel_id,
                            cursor.c.lease_token == later.c.lease_token,
                        )
                        .exists()
                    )
                    first_try_now = and_(
                        later.c.state == State.IN_PROGRESS.value,
                        later.c.attempts == 1,
                        later.c.lease_token.is_not(None),
                        leased_now,
                    )
                    unsettled = (
                        select(later.c.aggregate_id)
                        .where(
                            later.c.aggregate_id == newest.c.aggregate_id,
                            on(later.c.channel_id, ids),
                            later.c.version > newest.c.version,
                            or_(later.c.attempts > 0, _unknown_attempt(later)),
                            ~first_try_now,
                        )
                        .exists()
                    )
                else:
                    unsettled = None
                query = select(
                    aggregates.c.sku,
                    aggregates.c.price_type,
                    messages.c.version,
                    messages.c.payload,
                ).select_from(
                    newest.join(
                        known,
                        and_(
                            known.c.aggregate_id == newest.c.aggregate_id,
                            known.c.version == newest.c.version,
                            on(known.c.channel_id, ids),
                            self._known(known),
                        ),
                    )
                    .join(messages, messages.c.id == known.c.message_pk)
                    .join(aggregates, aggregates.c.id == newest.c.aggregate_id)
                )
                if unsettled is not None:
                    query = query.where(~unsettled)
                rows = connection.execute(query)
                for sku, price_type, version, payload in rows:
                    price = _price(sku, price_type, int(version), payload)
                    if price is not None:
                        found[(price.sku, price.price_type)] = price
                if self.replaced:
                    _replaced(connection, ids, of_skus, found)
        return list(found.values())

    def waiting(self, skus: Iterable[str]) -> list[WaitingPrice]:
        """The newest version of each price type of ``skus`` still to be given to the
        channel (``WaitingPrices``): new or delayed, in flight too unless ``in_flight`` is
        False."""
        return _waiting(self, skus)

    def taken_first(self, message_ids: Iterable[str]) -> dict[str, datetime]:
        """When the service took in the first of 1C's posts of each message's price still
        undelivered (``WaitingPrices.taken_first``): 1C's re-post of the same price never
        restarts a wait counted from its intake (review rev40 B4)."""
        return _taken_first(self, message_ids)


def _replaced(
    connection: Connection, ids: list[int], of_skus: Select[Any], found: dict[Key, KnownPrice]
) -> None:
    """Each known price of ``found`` with ``replaced_at``: when the service took in the newest
    later version of its type on the channel that the channel never took and that goes
    nowhere unless a person says so: quarantined, or cancelled by a person (``operator``). A
    later one still to be given (new, delayed, in flight) replaces nothing yet (it goes); one
    cancelled as superseded leaves it to its successor. Every known version is at most the
    known price's, so a later one here is never what the channel may hold. Each also says
    the newest later version quarantined for a rule of two price types (``PAIR_RULE``), if any
    (``KnownPrice.quarantined``)."""
    d = deliveries
    query = (
        select(
            aggregates.c.sku,
            aggregates.c.price_type,
            d.c.version,
            messages.c.taken_at,
            d.c.state,
            d.c.receipt,
            messages.c.message_id,
        )
        .select_from(
            d.join(aggregates, aggregates.c.id == d.c.aggregate_id).join(
                messages, messages.c.id == d.c.message_pk
            )
        )
        .where(
            d.c.aggregate_id.in_(of_skus),
            on(d.c.channel_id, ids),
            or_(
                d.c.state == State.QUARANTINED.value,
                and_(d.c.state == State.CANCELLED.value, d.c.reason == Reason.OPERATOR.value),
            ),
        )
    )
    for sku, price_type, version, taken_at, state, receipt, message_id in connection.execute(query):
        known = found.get((sku, price_type))
        if known is None or int(version) <= known.version:
            continue
        if (
            state == State.QUARANTINED.value
            and receipt == PAIR_RULE
            and int(version) > known.quarantined_version
        ):
            # Quarantined by a rule of two price types: a person decides on it, and a new
            # price of the other type waits for that (``KnownPrice.quarantined``).
            known = replace(known, quarantined=message_id, quarantined_version=int(version))
            found[(sku, price_type)] = known
        if taken_at is None:
            continue
        if known.replaced_at is None or known.replaced_at < taken_at:
            found[(sku, price_type)] = replace(known, replaced_at=taken_at)


def _unknown_attempt(table: FromClause) -> ColumnElement[bool]:
    """An attempt of the delivery of ``table`` ended with its result unknown
    (``exchange.queue.record`` writes ``result-unknown:`` before its detail: a release that
    charged nothing, e.g. the answer lost after the channel applied the price) or was taken
    over from an expired lease."""
    h = history.c
    return (
        select(h.id)
        .where(
            h.message_pk == table.c.message_pk,
            h.channel_id == table.c.channel_id,
            or_(
                h.detail.startswith(RESULT_UNKNOWN, autoescape=True),
                h.event == Event.TAKEN_OVER.value,
            ),
        )
        .exists()
    )


def _doubted(table: FromClause, receipts: tuple[str, ...]) -> ColumnElement[bool]:
    """A delivery of ``table`` not delivered nor in flight that may have reached the channel:
    an attempt of it ended with its result unknown (``exchange.queue.record`` writes
    ``result-unknown:`` before its detail) or was taken over from an expired lease, it was
    quarantined ``unknown-response``, or its receipt begins with one of ``receipts``."""
    why: list[ColumnElement[bool]] = [
        table.c.reason == Reason.UNKNOWN_RESPONSE.value,
        _unknown_attempt(table),
    ]
    why += [table.c.receipt.startswith(r, autoescape=True) for r in receipts]
    return and_(table.c.state.in_(DOUBT_STATES), or_(*why))


def _waiting(db: DbKnownPrices, skus: Iterable[str]) -> list[WaitingPrice]:
    wanted = sorted(set(skus))
    found: dict[tuple[str, str], WaitingPrice] = {}
    d = deliveries
    with db.engine.connect() as connection:
        ids = channel_ids(connection, db.channel)
        for start in range(0, len(wanted), CHUNK):
            query = (
                select(
                    aggregates.c.sku,
                    aggregates.c.price_type,
                    d.c.version,
                    d.c.next_try_at,
                    d.c.waiting_since,
                )
                .select_from(d.join(aggregates, aggregates.c.id == d.c.aggregate_id))
                .where(
                    aggregates.c.kind == "price",
                    aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    on(d.c.channel_id, ids),
                    d.c.state.in_(db.pending),
                )
            )
            for sku, price_type, version, next_try_at, since in connection.execute(query):
                if not sku or price_type is None:
                    continue
                held = found.get((sku, price_type))
                if held is None or held.version < int(version):
                    due = next_try_at if next_try_at is not None else since
                    found[(sku, price_type)] = WaitingPrice(sku, price_type, int(version), due)
    return list(found.values())


def _taken_first(db: DbKnownPrices, message_ids: Iterable[str]) -> dict[str, datetime]:
    """For each of ``message_ids``, the intake of the oldest version of the run just below it
    on its channel of versions cancelled ``superseded`` (coalesced into it, never sent) that
    carry its amount and currency; the walk down stops at the first version of another
    price, or one not coalesced (delivered, quarantined, ...): the floor, read newest first
    along ``ix_deliveries_aggregate_id_channel_id_version``, so a long history costs
    nothing. Left out: a message with no such run."""
    wanted = sorted(set(message_ids))
    given, given_message = deliveries.alias("given"), messages.alias("given_message")
    below, floor = deliveries.alias("below"), deliveries.alias("floor")
    coalesced = and_(
        below.c.state == State.CANCELLED.value, below.c.reason == Reason.SUPERSEDED.value
    )
    lowest = (
        select(floor.c.version)
        .where(
            floor.c.aggregate_id == given.c.aggregate_id,
            floor.c.channel_id == given.c.channel_id,
            floor.c.version < given.c.version,
            or_(
                floor.c.state != State.CANCELLED.value,
                floor.c.reason.is_(None),
                floor.c.reason != Reason.SUPERSEDED.value,
            ),
        )
        .order_by(floor.c.version.desc())
        .limit(1)
        .scalar_subquery()
    )
    found: dict[str, datetime] = {}
    with db.engine.connect() as connection:
        ids = channel_ids(connection, db.channel)
        for start in range(0, len(wanted), CHUNK):
            # Each message with its floor, found once (a LIMIT keeps both databases from
            # merging it into the join below, which would look for the floor per row there):
            # the run is then one range of the index.
            run = (
                select(
                    given_message.c.message_id,
                    given_message.c.payload,
                    given.c.aggregate_id,
                    given.c.channel_id,
                    given.c.version,
                    func.coalesce(lowest, 0).label("floor"),
                )
                .select_from(given_message.join(given, given.c.message_pk == given_message.c.id))
                .where(
                    given_message.c.message_id.in_(wanted[start : start + CHUNK]),
                    on(given.c.channel_id, ids),
                    # Leased now: the asking batch's own (one in flight per aggregate on the
                    # channel: a marketplace's channel is named, or the one registered).
                    given.c.state == State.IN_PROGRESS.value,
                )
                .limit(CHUNK * max(len(ids), 1))
                .subquery("run")
            )
            query = (
                select(
                    run.c.message_id,
                    run.c.channel_id,
                    run.c.payload,
                    messages.c.payload,
                    messages.c.taken_at,
                )
                .select_from(
                    run.join(
                        below,
                        and_(
                            below.c.aggregate_id == run.c.aggregate_id,
                            below.c.channel_id == run.c.channel_id,
                            below.c.version < run.c.version,
                            below.c.version > run.c.floor,
                        ),
                    ).join(messages, messages.c.id == below.c.message_pk)
                )
                .where(coalesced)
                .order_by(run.c.message_id, run.c.channel_id, below.c.version.desc())
            )
            ended: set[tuple[str, int]] = set()
            for message_id, channel, payload, earlier, taken_at in connection.execute(query):
                key = (message_id, channel)
                if key in ended:
                    continue
                same = _amount(earlier)
                if same is None or same != _amount(payload):
                    ended.add(key)  # another price: the run of this one starts above it
                    continue
                if taken_at is not None and (
                    message_id not in found or taken_at < found[message_id]
                ):
                    found[message_id] = taken_at
    return found


def _amount(payload: str) -> tuple[Decimal, str] | None:
    """A price payload's amount and currency; None: no price."""
    try:
        body = json.loads(payload, parse_float=Decimal)
        return Decimal(str(body["price"])), str(body.get("currency", DEFAULT_CURRENCY))
    except (ValueError, KeyError, TypeError, InvalidOperation):
        return None


def _price(
    sku: str | None, price_type: str | None, version: int, payload: str
) -> KnownPrice | None:
    priced = _amount(payload)
    if not sku or price_type is None or priced is None:
        return None
    return KnownPrice(sku, price_type, *priced, version)

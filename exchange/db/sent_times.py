"""When a marketplace channel's prices were accepted lately, per SKU: the database side of the
``ozon`` target's ``SentTimes`` port (exchange/targets/ozon/hours.py), built by
``exchange.app``, so that Ozon's 10 updates of a product an hour are counted across a restart
(contract 14: "the target counts its own accepted sends per product").

An accepted send is a delivery of the channel that ended ``delivered`` with the marketplace's
200 (``last_status``); one delivered without a request (an unchanged price) has none. Its time
is the delivery's ``updated_at``, when the worker recorded the answer, a moment after the
request: the count errs on the side of waiting. The deliveries of one item, recorded together,
are one send (one time).

Ozon's refusals for the limit are read from the receipts the target gave their AWAITING
(``ozon-refused:<time>``, exchange/targets/ozon/hours.py: the prefix it asks for), which a
superseded version keeps: a restart still waits the product's hour after a refusal
(contract 14).

``unsettled_since`` serves the ``yandex-market`` target's ``EarlierSends`` port
(exchange/targets/yandex_market/target.py): the channel's updates of a SKU's prices that may
still land on the marketplace, whichever worker sent them. A delivery is one when its receipt
begins with one of the prefixes the target names (what it writes for a send taken but not shown
yet, or whose answer never came) and it has not ended shown (delivered, or withheld: the
marketplace decided it), or when it is in flight though not the asking batch's (on a
marketplace channel one item per SKU is in flight: another one in flight is a crashed worker's
request, its outcome unknown). ``updated_at`` is at or after the moment the update was sent, so
``updated_at >= moment`` keeps every send since ``moment`` (and a few older ones: the target
reads the time its receipt names)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from sqlalchemy import (
    ColumnElement,
    Engine,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
    update,
)

from exchange.db.engine import transaction
from exchange.db.on_channels import Channel, channel_ids, on
from exchange.db.schema import aggregates, cml_catalog, deliveries, messages
from exchange.domain.states import State

CHUNK = 500
# What a marketplace trims from an offer's id (Python's ``str.strip`` for the usual ones).
WHITESPACE = " \t\n\r\x0b\x0c"


class DbSentTimes:
    def __init__(self, engine: Engine, channel: Channel = None) -> None:
        self.engine = engine
        self.channel = channel

    def since(self, skus: Iterable[str], moment: datetime) -> dict[str, list[float]]:
        wanted = sorted(set(skus))
        found: dict[str, set[float]] = {}
        d = deliveries.c
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(aggregates.c.sku, d.updated_at)
                    .select_from(deliveries.join(aggregates, aggregates.c.id == d.aggregate_id))
                    .where(
                        on(d.channel_id, ids),
                        d.state == State.DELIVERED.value,
                        d.updated_at >= moment,
                        d.last_status == 200,
                        aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    )
                )
                for sku, at in rows:
                    found.setdefault(str(sku), set()).add(at.timestamp())
        return {sku: sorted(times) for sku, times in found.items()}

    def receipts_since(
        self, skus: Iterable[str], moment: datetime, prefix: str
    ) -> dict[str, list[str]]:
        wanted = sorted(set(skus))
        found: dict[str, list[str]] = {}
        d = deliveries.c
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(aggregates.c.sku, d.receipt)
                    .select_from(deliveries.join(aggregates, aggregates.c.id == d.aggregate_id))
                    .where(
                        on(d.channel_id, ids),
                        d.updated_at >= moment,
                        d.receipt.startswith(prefix, autoescape=True),
                        aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    )
                )
                for sku, receipt in rows:
                    found.setdefault(str(sku), []).append(str(receipt))
        return found

    def unsettled_since(
        self,
        skus: Iterable[str],
        moment: datetime,
        prefixes: Iterable[str],
        leaving_out: Iterable[str] = (),
    ) -> dict[str, list[str | None]]:
        """Per SKU, the receipts of the channel's deliveries of its prices updated since
        ``moment`` that may still land: a receipt beginning with one of ``prefixes`` and not
        ended shown (delivered, withheld), or in flight (its receipt, None when it has none);
        the messages ``leaving_out`` (the asking batch's) left out."""
        wanted = sorted(set(skus))
        starts = list(prefixes)
        mine = sorted(set(leaving_out))
        found: dict[str, list[str | None]] = {}
        d = deliveries.c
        shown = (State.DELIVERED.value, State.WITHHELD.value)
        may_land = or_(
            and_(
                d.state.not_in(shown),
                or_(*(d.receipt.startswith(p, autoescape=True) for p in starts)),
            ),
            and_(d.state == State.IN_PROGRESS.value, d.attempts > 0),
        )
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                query = (
                    select(aggregates.c.sku, d.receipt)
                    .select_from(
                        deliveries.join(aggregates, aggregates.c.id == d.aggregate_id).join(
                            messages, messages.c.id == d.message_pk
                        )
                    )
                    .where(
                        on(d.channel_id, ids),
                        d.updated_at >= moment,
                        may_land,
                        aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    )
                )
                if mine:
                    query = query.where(messages.c.message_id.not_in(mine))
                for sku, receipt in connection.execute(query):
                    found.setdefault(str(sku), []).append(receipt)
        return found

    def sending(self, receipts: Mapping[str, str]) -> None:
        """Before a request leaves: each message's delivery on the channel, in flight, gets
        its receipt (``message_id`` -> receipt), committed at once. A worker killed before
        the answer leaves it there, so the send still counts (``unsettled_since``) once a
        newer version supersedes the delivery or its lease runs out (review ymfix, finding 2:
        a cancelled delivery with no receipt was forgotten)."""
        if not receipts:
            return
        d = deliveries.c
        pk = (
            select(messages.c.id)
            .where(messages.c.message_id == bindparam("sent_message"))
            .scalar_subquery()
        )
        rows = [{"sent_message": k, "sent_receipt": v} for k, v in receipts.items()]
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.channel)
            connection.execute(
                update(deliveries)
                .where(
                    d.message_pk == pk,
                    on(d.channel_id, ids),
                    d.state == State.IN_PROGRESS.value,
                )
                .values(receipt=bindparam("sent_receipt")),
                rows,
            )

    def offer_holders(
        self,
        offers: Iterable[str],
        prefixes: Iterable[str],
        *,
        by_article: bool = False,
    ) -> dict[str, list[str]]:
        """The marketplaces' ``OfferHolders`` port (exchange/targets/marketplace/holders.py):
        for each of ``offers``, the SKUs whose prices the channel gave it or is giving it
        (delivered, withheld, in flight or tried and due again, or a receipt beginning with one
        of ``prefixes``), the asking batch's own among them: the SKU trimmed (``by_article``:
        its article trimmed, as ``cml_catalog`` holds it) is the offer.

        Each offer's SKUs come in the order ``_rank`` gives, the one that keeps the offer
        first, the same for every worker that reads the same rows: two workers that claimed
        both SKUs of one offer at once agree on which goes (issue 32)."""
        wanted = sorted(set(offers))
        starts = list(prefixes)
        found: dict[str, dict[str, tuple[int, datetime, int]]] = {}
        d = deliveries.c
        shown = d.state.in_((State.DELIVERED.value, State.WITHHELD.value))
        gone = or_(shown, *(d.receipt.startswith(p, autoescape=True) for p in starts))
        sent = or_(
            gone,
            # In flight, or tried and due again: an attempt whose answer was lost (or a 5xx)
            # may have reached the channel (review-wb: Wildberries keeps such a good held).
            and_(d.state.in_((State.IN_PROGRESS.value, State.DELAYED.value)), d.attempts > 0),
        )
        # 0: the price went (or may have gone) to the channel; 1: only claimed (in flight, or
        # due again, without a receipt saying it left).
        tier = func.min(case((gone, 0), else_=1))
        since = func.min(func.coalesce(d.leased_at, d.updated_at))
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                part = wanted[start : start + CHUNK]
                offer: ColumnElement[str]
                if by_article:
                    c = cml_catalog.c
                    offer = func.trim(c.value, WHITESPACE)
                    source = deliveries.join(aggregates, aggregates.c.id == d.aggregate_id).join(
                        cml_catalog, and_(c.kind == "article", c.key == aggregates.c.sku)
                    )
                else:
                    offer = func.trim(aggregates.c.sku, WHITESPACE)
                    source = deliveries.join(aggregates, aggregates.c.id == d.aggregate_id)
                query = (
                    select(offer, aggregates.c.sku, tier, since, func.min(d.message_pk))
                    .select_from(source)
                    .where(
                        aggregates.c.kind == "price",
                        offer.in_(part),
                        on(d.channel_id, ids),
                        sent,
                    )
                    .group_by(offer, aggregates.c.sku)
                )
                for name, sku, first_tier, first_at, first_pk in connection.execute(query):
                    found.setdefault(str(name), {})[str(sku)] = (
                        int(first_tier),
                        _utc(first_at),
                        int(first_pk),
                    )
        return {name: _rank(held) for name, held in found.items()}


def _rank(held: Mapping[str, tuple[int, datetime, int]]) -> list[str]:
    """An offer's SKUs, the one that keeps it first: a SKU whose price went (or may have gone)
    to the channel before one only claimed (``offer_holders``: a worker that found no other
    SKU sends at once, so one claimed later but checked earlier went first); then the
    earliest lease of its marks (``leased_at``: when the claim took it), the earliest
    message, the SKU's name. Every worker reading the same rows ranks alike."""
    return sorted(held, key=lambda sku: (*held[sku], sku))


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)

"""When a marketplace channel's prices were accepted lately, per SKU: the database side of the
``ozon`` target's ``SentTimes`` port (exchange/targets/ozon/hours.py), built by
``exchange.app``, so that Ozon's 10 updates of a product an hour are counted across a restart
(contract 14: "the target counts its own accepted sends per product").

An accepted send is a delivery of the channel that ended ``delivered`` with the marketplace's
200 (``last_status``); one delivered without a request (an unchanged price) has none. Its time
is the delivery's ``updated_at``, when the worker recorded the answer, a moment after the
request: the count errs on the side of waiting. The deliveries of one item, recorded together,
are one send (one time).

Across workers the count is taken, not only read (``reserve``): one worker at a time per SKU
(SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock of the SKU held to the commit), the
sends of the hour counted and, under the limit, the send's mark (``ozon-sending:<time>:…``,
before the marks of the delivery's earlier attempts within the hour, space-separated) written
on the item's deliveries and committed before its request leaves; a marked delivery
not accepted (its answer never came, or it was refused otherwise than for the limit, or its
worker died) counts at its mark's time, since Ozon may have counted it (review 32: two workers
that each read 9 both sent, and Ozon refused the 11th). A request that never left gives its
mark back (``unmark``).

Ozon's refusals for the limit are read from the receipts the target gave their AWAITING
(``ozon-refused:<time>``, exchange/targets/ozon/hours.py: the prefix it asks for), which a
superseded version keeps: a restart still waits the product's hour after a refusal
(contract 14).

A send whose answer was lost (Ozon may still apply it, research §1.5) adds a word after its
mark (``lost``: ``ozon-lost:<time>:<prices>``, exchange/targets/marketplace/late.py), whatever
becomes of the delivery after (delayed, superseded, quarantined, cancelled by ``channels
drop``); the SKU's next send reads it (``lost_since``) and waits for Ozon to show those prices.
It is read, and taken out, over the account's channels as the hour is (``account_ids``): Ozon
may still apply a lost send of a channel dropped since over the price of the one added again
under its name (review ozon 35). ``settle`` takes it out once Ozon shows them; the next mark
written on that delivery (``reserve``) drops it too, and a word past the target's bound is not
read.

``unsettled_since`` serves the ``yandex-market`` target's ``EarlierSends`` port
(exchange/targets/yandex_market/target.py): the channel's updates of a SKU's prices that may
still land on the marketplace, whichever worker sent them, and those of a channel of its name
dropped since (``account_ids``: the offer is the business's, not the channel row's; review
ozon 35's shape). A delivery is one when its receipt begins with one of the prefixes the target
names (what it writes for a send taken but not shown yet, or whose answer never came) and it has
not ended shown (delivered, or withheld: the marketplace decided it), or when it is in flight
though not the asking batch's (on a marketplace channel one item per SKU is in flight: another
one in flight is a crashed worker's request, its outcome unknown). ``updated_at`` is at or after
the moment the update was sent, so ``updated_at >= moment`` keeps every send since ``moment``
(and a few older ones: the target reads the time its receipt names)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    String,
    and_,
    bindparam,
    case,
    func,
    not_,
    or_,
    select,
    text,
    update,
)

from exchange.db.engine import is_postgres, transaction
from exchange.db.on_channels import Channel, account_ids, channel_ids, on
from exchange.db.schema import aggregates, channels, cml_catalog, deliveries, messages
from exchange.domain.reasons import Reason
from exchange.domain.search_key import search_key
from exchange.domain.states import State

CHUNK = 500
# PostgreSQL's advisory lock of a product's hour (``reserve``), in the one-key space (the
# claim's lock of a channel takes the two-key one): this constant's high bits and the SKU's.
HOUR_LOCK = 0x0E7C_0000_0000
# The advisory lock of a marketplace good (``lock_goods``), in the same one-key space: this
# constant's high bits and the channel's and offer's.
GOOD_LOCK = 0x0E7D_0000_0000
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
            ids = account_ids(connection, self.channel)  # the account's hour
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

    def reserve(
        self,
        items: Mapping[str, Sequence[str]],
        mark: str,
        moment: datetime,
        limit: int,
        prefix: str,
        goods: Mapping[str, str] | None = None,
        prefixes: Iterable[str] = (),
        *,
        by_article: bool = False,
        priced: Mapping[str, str] | None = None,
    ) -> tuple[dict[str, list[float]], dict[str, str]]:
        """Ozon's hour across workers (contract 14, research §1.3): for each SKU of ``items``
        (SKU -> the messages its item carries), one at a time across workers (SQLite: the
        write transaction is ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock per SKU, held
        to the commit), count its sends since ``moment`` (``_hour``: accepted ones, and the
        ones marked before their request left) and, under ``limit``, write ``mark`` on its
        deliveries, committed before the request leaves: a worker counting after this one
        sees it (review 32: two workers that each read 9 both sent, and Ozon refused the
        11th). With ``goods`` (SKU -> its offer), one good at a time across workers too, as
        ``sending_first`` (issue 32): each offer locked to the commit (``lock_goods``) and a
        SKU whose offer another SKU was already sent to (``taken``: a receipt beginning with
        one of ``prefixes``, delivered, withheld) is not marked. Returns the SKUs that may not
        go: those whose hour is full, with the times of their sends (epoch seconds), and those
        whose offer another SKU was sent to first, with that SKU; the others are marked.
        ``priced`` (SKU -> ``late.pairs``): each SKU's mark is ``mark:pairs``, the prices the
        send sets, read by ``lost_since`` while the send is never answered."""
        full: dict[str, list[float]] = {}
        lost: dict[str, str] = {}
        d = deliveries.c
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.channel)
            postgres = is_postgres(connection)
            wanted = sorted(items)
            named = goods or {}
            offers = {sku: named[sku] for sku in wanted if sku in named}
            if postgres:
                # The products' hours and their goods, in one statement: one order for every
                # worker (``sending_first`` and ``put_first`` take goods' keys alone).
                keys = {HOUR_LOCK | zlib.crc32(sku.encode()) for sku in wanted}
                named_as = _lock_name(connection, self.channel)
                _lock_all(connection, keys | _good_keys(named_as, offers.values()))
            if offers:
                pairs = {(offer, sku) for sku, offer in offers.items()}
                held = taken(connection, ids, pairs, list(prefixes), by_article)
                lost = {s: held[(o, s)] for s, o in offers.items() if (o, s) in held}
            # The account's hour: a dropped channel of this name counts too (``account_ids``).
            hour_ids = account_ids(connection, self.channel)
            counted = _hours(
                connection, hour_ids, [s for s in wanted if s not in lost], moment, prefix
            )
            going: list[str] = []
            sku_of = {m: sku for sku in wanted for m in items[sku]}
            for sku in wanted:
                if sku in lost:
                    continue
                times = counted.get(sku, [])
                if len(times) >= limit:
                    full[sku] = times
                else:
                    going += items[sku]
            since = moment.timestamp()
            rows: list[dict[str, object]] = []
            for start in range(0, len(going), CHUNK):
                # Not over a delivery another worker recorded delivered meanwhile (a lease
                # that ran out): that send counts already, and its receipt is Ozon's answer.
                found = connection.execute(
                    select(d.message_pk, d.channel_id, d.receipt, messages.c.message_id)
                    .select_from(deliveries.join(messages, messages.c.id == d.message_pk))
                    .where(
                        messages.c.message_id.in_(going[start : start + CHUNK]),
                        on(d.channel_id, ids),
                        d.state != State.DELIVERED.value,
                    )
                )
                for message_pk, channel_id, before, message_id in found:
                    # An earlier attempt's mark within the hour stays beside this one: its
                    # answer never came, and Ozon may have counted it too.
                    kept = [m for m in _marks(before, prefix) if _mark_at(m, prefix) >= since]
                    sets = (priced or {}).get(sku_of.get(str(message_id), ""))
                    rows.append(
                        {
                            "marked_pk": message_pk,
                            "marked_channel": channel_id,
                            "marked": " ".join([f"{mark}:{sets}" if sets else mark, *kept]),
                        }
                    )
            if rows:
                connection.execute(
                    update(deliveries)
                    .where(
                        d.message_pk == bindparam("marked_pk"),
                        d.channel_id == bindparam("marked_channel"),
                    )
                    .values(receipt=bindparam("marked")),
                    rows,
                )
        return full, lost

    def unmark(self, receipts: Mapping[str, str | None], mark: str) -> None:
        """A send ``reserve`` marked whose request never left (no key, no connection): each
        message's delivery still holding ``mark`` (first, before the earlier attempts' marks
        it kept) gets ``receipts``' (its receipt before)."""
        self._set_receipts(receipts, deliveries.c.receipt.startswith(mark, autoescape=True))

    def lost(self, message_ids: Iterable[str], mark: str, word: str) -> None:
        """A send ``reserve`` marked whose answer was lost (Ozon may still apply it, research
        §1.5): each message's delivery on the channel still holding ``mark`` first gets
        ``word`` after its receipt, committed before the attempt is recorded, so that the
        SKU's next claim (any worker's) finds it (``lost_since``)."""
        wanted = sorted(set(message_ids))
        if not wanted:
            return
        d = deliveries.c
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                pks = select(messages.c.id).where(
                    messages.c.message_id.in_(wanted[start : start + CHUNK])
                )
                connection.execute(
                    update(deliveries)
                    .where(
                        d.message_pk.in_(pks),
                        on(d.channel_id, ids),
                        d.receipt.startswith(mark, autoescape=True),
                    )
                    .values(receipt=d.receipt + " " + word)
                )

    def answered(self, priced: Mapping[str, str], mark: str) -> None:
        """A send ``reserve`` marked was answered (any HTTP answer: Ozon took it, refused it,
        or said nothing of it, a 5xx then getting its ``lost`` word): each message's delivery
        on the channel still holding ``mark`` first with its prices (``priced``: message_id ->
        ``late.pairs``) keeps the mark without them (``mark:pairs`` -> ``mark``), committed
        before the answer is recorded. The mark still counts in the hour (``_hours``), but
        ``lost_since`` reads a priced mark first as a send never answered (its worker died,
        review ozlost38 H1): answered ones must never make the next send wait."""
        if not priced:
            return
        d = deliveries.c
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.channel)
            wanted = sorted(priced)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(d.message_pk, d.channel_id, d.receipt, messages.c.message_id)
                    .select_from(deliveries.join(messages, messages.c.id == d.message_pk))
                    .where(
                        messages.c.message_id.in_(wanted[start : start + CHUNK]),
                        on(d.channel_id, ids),
                        d.receipt.startswith(mark + ":", autoescape=True),
                    )
                ).all()
                changes = []
                for message_pk, channel_id, receipt, message_id in rows:
                    first, _, rest = str(receipt).partition(" ")
                    if first != f"{mark}:{priced[str(message_id)]}":
                        continue
                    changes.append(
                        {
                            "answered_pk": message_pk,
                            "answered_channel": channel_id,
                            "answered_was": receipt,
                            "answered_now": f"{mark} {rest}" if rest else mark,
                        }
                    )
                if changes:
                    connection.execute(
                        update(deliveries)
                        .where(
                            d.message_pk == bindparam("answered_pk"),
                            d.channel_id == bindparam("answered_channel"),
                            d.receipt == bindparam("answered_was"),
                        )
                        .values(receipt=bindparam("answered_now")),
                        changes,
                    )

    def lost_since(
        self,
        skus: Iterable[str],
        moment: datetime,
        prefix: str,
        marked: str | None = None,
        *,
        now: datetime,
    ) -> dict[str, list[str]]:
        """For each of ``skus``, the receipts of its deliveries on the account's channels
        (``account_ids``: a lost send of a channel dropped since may still land over the price
        of the one added again under its name) recorded since ``moment`` (any state: a lost
        send's delivery superseded or cancelled since still names it) that hold a word
        beginning with ``prefix`` after the first (``lost``).

        With ``marked`` (the send's mark, ``reserve``'s ``prefix``): and, as a ``prefix`` word
        of the mark's time and prices (``mark:pairs``), each send marked on the channel and
        never answered since ``moment`` (its priced mark still first on a delivery not
        delivered: ``answered`` takes the prices off at any answer; its worker died, killed
        mid-send, and Ozon may still apply it: review ozlost38 H1), and each send marked on a
        dropped channel of the account and never answered: in flight (its worker may still be
        waiting for Ozon, or died), handed back for a retry the drop forbids, or cancelled by
        the drop (``channel-removed``), with its mark still first. Ozon may apply it over the
        price of the channel added again under its name (review ozon 35: the new worker sent
        1200 while the old one's 1100 was held, and 1100 landed last); ``settle`` takes the
        prices off the mark once it is over. ``now``: a send still in flight under the lease
        that marked it is a live worker's only while that lease runs (``locked_until`` after
        ``now``); one whose lease ran out is a dead worker's, before anyone has handed the
        delivery back (review rev39 H1: a worker killed mid-send, its lease out, the other
        worker's next batch took 1C's newer price and sent it at once, and the dead one's
        held 1020 landed over 1030)."""
        found = self._receipts(
            skus,
            moment,
            deliveries.c.receipt.contains(" " + prefix, autoescape=True),
            account=True,
        )
        if marked is None:
            return found
        wanted = sorted(set(skus))
        d = deliveries.c
        unanswered = or_(
            d.state.in_((State.IN_PROGRESS.value, State.DELAYED.value)),
            and_(d.state == State.CANCELLED.value, d.reason == Reason.CHANNEL_REMOVED.value),
        )
        with self.engine.connect() as connection:
            own = channel_ids(connection, self.channel)
            others = [i for i in account_ids(connection, self.channel) if i not in set(own)]
            # The channel's own: a priced mark still first on a delivery not delivered is a
            # send never answered (``answered`` takes the prices off at any answer): its
            # worker died (kill -9) and its request may still land (review ozlost38 H1),
            # whatever became of the delivery after (taken over once its lease ran out,
            # superseded, quarantined).
            mine = and_(
                on(d.channel_id, own),
                d.state != State.DELIVERED.value,
                d.updated_at >= moment,
            )
            theirs = and_(on(d.channel_id, others), unanswered) if others else None
            mine_ids = set(own)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(
                        aggregates.c.sku,
                        d.receipt,
                        d.channel_id,
                        d.state,
                        d.leased_at,
                        d.locked_until,
                    )
                    .select_from(deliveries.join(aggregates, aggregates.c.id == d.aggregate_id))
                    .where(
                        mine if theirs is None else or_(mine, theirs),
                        d.receipt.startswith(marked, autoescape=True),
                        aggregates.c.sku.in_(wanted[start : start + CHUNK]),
                    )
                )
                for sku, receipt, channel_id, state, leased_at, locked_until in rows:
                    first = str(receipt).split()[0]
                    if (
                        channel_id in mine_ids
                        and state == State.IN_PROGRESS.value
                        and not (
                            leased_at is not None
                            and _utc(leased_at).timestamp() > _mark_at(first, marked)
                        )
                        and locked_until is not None
                        and _utc(locked_until) > now
                    ):
                        # In flight on the channel under the lease that marked it, and that
                        # lease runs: a live worker's send now (it records its own answer),
                        # not a dead one's, which a later lease took over or whose lease ran
                        # out (review rev39 H1).
                        continue
                    word = _unanswered(first, marked, prefix)
                    if word is not None:
                        found.setdefault(str(sku), []).append(word)
        return found

    def settle(self, skus: Iterable[str], words: Iterable[str]) -> None:
        """The lost sends ``words`` (``lost``'s) landed, or their wait is over: each taken out
        of the receipts of these SKUs' deliveries on the account's channels (``lost_since``'s),
        committed."""
        wanted = sorted(set(skus))
        said = sorted(set(words))
        if not wanted or not said:
            return
        d = deliveries.c
        with transaction(self.engine) as connection:
            ids = account_ids(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                of_skus = select(aggregates.c.id).where(
                    aggregates.c.sku.in_(wanted[start : start + CHUNK])
                )
                for word in said:
                    connection.execute(
                        update(deliveries)
                        .where(
                            d.aggregate_id.in_(of_skus),
                            on(d.channel_id, ids),
                            d.receipt.contains(" " + word, autoescape=True),
                        )
                        .values(receipt=func.replace(d.receipt, " " + word, ""))
                    )
                    _unprice(connection, ids, of_skus, word)

    def receipts_since(
        self, skus: Iterable[str], moment: datetime, prefix: str
    ) -> dict[str, list[str]]:
        """Per SKU, the receipts beginning with ``prefix`` (Ozon's refusals for the hour) of
        its deliveries updated since ``moment`` on the account's channels (``account_ids``: a
        refusal on a channel dropped since still holds the product's hour)."""
        return self._receipts(
            skus, moment, deliveries.c.receipt.startswith(prefix, autoescape=True), account=True
        )

    def _receipts(
        self,
        skus: Iterable[str],
        moment: datetime,
        matching: ColumnElement[bool],
        *,
        account: bool = False,
    ) -> dict[str, list[str]]:
        """Per SKU, the receipts ``matching`` of its deliveries on the channel (``account``: on
        the account's channels, ``account_ids``) updated since ``moment`` (any state)."""
        wanted = sorted(set(skus))
        found: dict[str, list[str]] = {}
        d = deliveries.c
        with self.engine.connect() as connection:
            ids = (account_ids if account else channel_ids)(connection, self.channel)
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(
                    select(aggregates.c.sku, d.receipt)
                    .select_from(deliveries.join(aggregates, aggregates.c.id == d.aggregate_id))
                    .where(
                        on(d.channel_id, ids),
                        d.updated_at >= moment,
                        matching,
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
        """Per SKU, the receipts of the deliveries of its prices on the account's channels
        (``account_ids``: the channel's, and a dropped one's of its name, whose update may
        still land over the price of the channel added again) updated since ``moment`` that
        may still land: a receipt beginning with one of ``prefixes`` and not ended shown
        (delivered, withheld), or in flight (its receipt, None when it has none); the messages
        ``leaving_out`` (the asking batch's) left out."""
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
            ids = account_ids(connection, self.channel)  # a dropped channel's may land too
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
        self._set_receipts(receipts, deliveries.c.state == State.IN_PROGRESS.value)

    def _set_receipts(self, receipts: Mapping[str, str | None], which: Any) -> None:
        """Each named message's delivery on the channel that ``which`` (a condition on
        ``deliveries``) holds gets its receipt (``message_id`` -> receipt, None: none), in
        one statement executed for every row, committed at once: ``sending`` and
        ``unmark``'s one update."""
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
                .where(d.message_pk == pk, on(d.channel_id, ids), which)
                .values(receipt=bindparam("sent_receipt")),
                rows,
            )

    def sending_first(
        self,
        receipts: Mapping[str, str],
        goods: Mapping[str, tuple[str, str]],
        prefixes: Iterable[str],
        *,
        by_article: bool = False,
    ) -> dict[str, str]:
        """``sending``, one good at a time across workers (issue 32): each message's good
        (``goods``: ``message_id`` -> (offer, SKU)) locked to the commit (``lock_goods``), the
        good's SKUs already sent read again (``taken``), and a message whose good another SKU
        was sent to keeps its receipt and is not marked. Returns those: ``message_id`` -> the
        SKU that keeps its good. Two workers that each read the holders before the other's
        claim or mark was in (each ranked its own SKU first) thus never both send: the later
        one to mark finds the other's mark."""
        if not receipts:
            return {}
        d = deliveries.c
        pk = (
            select(messages.c.id)
            .where(messages.c.message_id == bindparam("sent_message"))
            .scalar_subquery()
        )
        with transaction(self.engine) as connection:
            ids = channel_ids(connection, self.channel)
            wanted = {goods[m] for m in receipts if m in goods}
            lock_goods(
                connection, _lock_name(connection, self.channel), {offer for offer, _ in wanted}
            )
            held = taken(connection, ids, wanted, list(prefixes), by_article)
            refused = {m: held[goods[m]] for m in receipts if m in goods and goods[m] in held}
            rows = [
                {"sent_message": k, "sent_receipt": v}
                for k, v in receipts.items()
                if k not in refused
            ]
            if rows:
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
        return refused

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
        with self.engine.connect() as connection:
            ids = channel_ids(connection, self.channel)
            found = _held(connection, ids, sorted(set(offers)), list(prefixes), by_article)
        return {name: _rank(held) for name, held in found.items()}


def _unanswered(mark: str, marked: str, prefix: str) -> str | None:
    """A send's mark with its prices (``marked<time>:<nonce>:<pairs>``, ``reserve``) as a lost
    send's word (``prefix<time>:<pairs>``); None: a mark without prices."""
    at, _, rest = mark[len(marked) :].partition(":")
    _nonce, _, sets = rest.partition(":")
    return f"{prefix}{at}:{sets}" if sets else None


def _unprice(connection: Connection, ids: Sequence[int], of_skus: Any, word: str) -> None:
    """The lost send ``word`` (``prefix<time>:<pairs>``) is over: the marks of that time and
    prices (``mark:pairs``) lose their prices, so that ``lost_since`` reads them no more."""
    _prefix, _, rest = word.partition(":")
    at, _, sets = rest.partition(":")
    if not at or not sets:
        return
    d = deliveries.c
    rows = connection.execute(
        select(d.message_pk, d.channel_id, d.receipt).where(
            d.aggregate_id.in_(of_skus),
            on(d.channel_id, ids),
            d.receipt.contains(f":{at}:", autoescape=True),
            d.receipt.contains(f":{sets}", autoescape=True),
        )
    ).all()
    for message_pk, channel_id, receipt in rows:
        parts = []
        for part in str(receipt).split(" "):
            head, _, tail = part.rpartition(":")
            fields = head.split(":")
            if tail == sets and len(fields) == 3 and fields[1] == at:
                part = head
            parts.append(part)
        connection.execute(
            update(deliveries)
            .where(d.message_pk == message_pk, d.channel_id == channel_id)
            .values(receipt=" ".join(parts))
        )


def lock_goods(connection: Connection, channel: str, offers: Iterable[str]) -> None:
    """One worker at a time per marketplace good (``offers`` of ``channel``) until the
    transaction ends: PostgreSQL's advisory locks, every key in one statement, in the keys'
    order (one order for every worker: no deadlock between them); SQLite's write transaction
    is ``BEGIN IMMEDIATE``, one writer at a time already."""
    if not is_postgres(connection):
        return
    _lock_all(connection, _good_keys(channel, offers))


def _lock_name(connection: Connection, channel: Channel) -> str:
    """The name a channel's goods are locked under (``lock_goods``): its name, also when the
    port was given its row's id (the Ozon target's worker), so that every process sending to
    the channel takes one lock per good."""
    if isinstance(channel, int) and not isinstance(channel, bool):
        found = connection.execute(select(channels.c.name).where(channels.c.id == channel))
        return str(found.scalar_one_or_none() or channel)
    return str(channel)


def _good_keys(channel: str, offers: Iterable[str]) -> set[int]:
    """The advisory lock keys of ``offers``' goods on ``channel`` (``lock_goods``)."""
    return {GOOD_LOCK | zlib.crc32(f"{channel}\0{o}".encode()) for o in offers}


def _lock_all(connection: Connection, keys: set[int]) -> None:
    """PostgreSQL's advisory lock of each of ``keys`` until the transaction ends, in one
    statement, in the keys' order (an array's elements come out of unnest in order): one order
    for every worker, no deadlock between them."""
    if keys:
        connection.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(CAST(:keys AS bigint[])) AS k"
            ),
            {"keys": sorted(keys)},
        )


def taken(
    connection: Connection,
    ids: Sequence[int],
    wanted: Iterable[tuple[str, str]],
    prefixes: list[str],
    by_article: bool,
    sent: Mapping[str, set[str]] | None = None,
) -> dict[tuple[str, str], str]:
    """Of ``wanted`` ((offer, SKU) about to leave, their goods locked: ``lock_goods``), the
    ones whose offer another SKU was already sent to (``_held``'s tier 0, or ``sent``: offer ->
    SKUs the caller counts as sent), ranked before this SKU by ``_rank``: (offer, SKU) -> that
    SKU. Two SKUs only claimed are left to the ranking each worker read before (one of them,
    the later to mark, finds the other sent here)."""
    pairs = sorted(set(wanted))
    found = _held(connection, ids, sorted({o for o, _ in pairs}), prefixes, by_article)
    out: dict[tuple[str, str], str] = {}
    for offer, sku in pairs:
        held = dict(found.get(offer, {}))
        for other in (sent or {}).get(offer, ()):
            mark = held.get(other)
            held[other] = (0, *mark[1:]) if mark else (0, datetime.max.replace(tzinfo=UTC), 0)
        ranked = _rank(held)
        if ranked and ranked[0] != sku and held[ranked[0]][0] == 0:
            out[(offer, sku)] = ranked[0]
    return out


def _held(
    connection: Connection,
    ids: Sequence[int],
    wanted: list[str],
    starts: list[str],
    by_article: bool,
) -> dict[str, dict[str, tuple[int, datetime, int]]]:
    """``offer_holders``' rows: for each of ``wanted`` (sorted), its SKUs the channel gave it
    or is giving it, each with its mark (tier, earliest lease, earliest message), what
    ``_rank`` orders."""
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
    for start in range(0, len(wanted), CHUNK):
        # The offers' aggregates first, found by an index (``_candidates``); then their
        # deliveries on the channel by theirs: never a scan of every price SKU.
        offer_of = _candidates(connection, wanted[start : start + CHUNK], by_article)
        chosen = sorted(offer_of)
        for first in range(0, len(chosen), CHUNK):
            query = (
                select(d.aggregate_id, tier, since, func.min(d.message_pk))
                .where(
                    d.aggregate_id.in_(chosen[first : first + CHUNK]),
                    on(d.channel_id, ids),
                    sent,
                )
                .group_by(d.aggregate_id)
            )
            for aggregate, first_tier, first_at, first_pk in connection.execute(query):
                name, sku = offer_of[aggregate]
                # A SKU's aggregates (one a price type) make one mark: the earliest.
                mark = (int(first_tier), _utc(first_at), int(first_pk))
                held = found.setdefault(name, {})
                was = held.get(sku, mark)
                held[sku] = (
                    min(was[0], mark[0]),
                    min(was[1], mark[1]),
                    min(was[2], mark[2]),
                )
    return found


def _rank(held: Mapping[str, tuple[int, datetime, int]]) -> list[str]:
    """An offer's SKUs, the one that keeps it first: a SKU whose price went (or may have gone)
    to the channel before one only claimed (``offer_holders``: a worker that found no other
    SKU sends at once, so one claimed later but checked earlier went first); then the
    earliest lease of its marks (``leased_at``: when the claim took it), the earliest
    message, the SKU's name. Every worker reading the same rows ranks alike."""
    return sorted(held, key=lambda sku: (*held[sku], sku))


def _candidates(
    connection: Connection, offers: list[str], by_article: bool
) -> dict[int, tuple[str, str]]:
    """The price aggregates whose SKU trimmed (``by_article``: its article trimmed, as
    ``cml_catalog`` holds it) is one of ``offers``: aggregate id -> (offer, SKU). Found by the
    case-folded keys' indexes (``_may_trim_to``), the trim deciding among those alone."""
    postgres = is_postgres(connection)
    a = aggregates.c
    if not by_article:
        offer = func.trim(a.sku, WHITESPACE)
        # No ``kind`` here: SQLite would walk its index instead (only a price has a SKU).
        found = connection.execute(
            select(a.id, offer, a.sku).where(
                _may_trim_to(a.sku_key, offers, postgres), offer.in_(offers)
            )
        )
        return {int(i): (str(name), str(sku)) for i, name, sku in found}
    c = cml_catalog.c
    article = func.trim(c.value, WHITESPACE)
    named = {
        str(key): str(name)
        for key, name in connection.execute(
            select(c.key, article).where(
                _may_trim_to(c.value_key, offers, postgres, c.kind == "article"),
                article.in_(offers),
            )
        )
    }
    held: dict[int, tuple[str, str]] = {}
    keys = sorted(named)
    for start in range(0, len(keys), CHUNK):
        part = keys[start : start + CHUNK]
        rows = connection.execute(
            select(a.id, a.sku).where(
                a.kind == "price",
                a.sku_key.in_(sorted({search_key(k) for k in part})),  # ix_aggregates_sku_key
                a.sku.in_(part),
            )
        )
        for i, sku in rows:
            held[int(i)] = (str(named[sku]), str(sku))
    return held


def _may_trim_to(
    key: ColumnElement[str | None], offers: Sequence[str], postgres: bool, *also: Any
) -> Any:
    """Whether a text whose case-folded ``key`` (``search_key``: ``aggregates.sku_key``,
    ``cml_catalog.value_key``, each with an index) is this may be one of ``offers`` once
    trimmed: the key begins with an offer's key (trailing whitespace), or with whitespace
    (leading). Each a range of the key's index: LIKE on PostgreSQL (its ``varchar_pattern_ops``
    index), GLOB on SQLite (case-sensitive, as its BINARY index). A superset: the trim decides.
    ``also``: the conditions on the index's columns before ``key``, in each range."""
    # An empty offer: a text of whitespace only, which begins with whitespace.
    starts = sorted({search_key(o) for o in offers if o} | set(WHITESPACE))
    # Written into the statement: SQLite ranges an index for a pattern it reads there, never
    # for one bound as a parameter.
    if postgres:
        return or_(*(and_(*also, key.like(_inline(_like(t) + "%"), escape="\\")) for t in starts))
    return or_(*(and_(*also, key.op("GLOB")(_inline(_glob(t) + "*"))) for t in starts))


def _inline(pattern: str) -> Any:
    return bindparam(None, pattern, type_=String(), literal_execute=True)


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _glob(text: str) -> str:
    """``text`` as itself in a GLOB pattern: each wildcard in brackets."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in text)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _hours(
    connection: Connection, ids: Sequence[int], skus: list[str], moment: datetime, prefix: str
) -> dict[str, list[float]]:
    """The sends of each of ``skus`` on the channel since ``moment`` (epoch seconds, sorted):
    each accepted one (delivered with a 200) at its ``updated_at``, and each marked before its
    request left and not accepted (``prefix``, then the time: a send whose answer never came,
    or that a worker is making now, or that a worker made and died before recording it) at its
    mark's time. The deliveries of one item, marked or recorded together, are one send; two
    marks of one moment (a clock that did not move) are two."""
    d = deliveries.c
    accepted = and_(d.state == State.DELIVERED.value, d.last_status == 200)
    at_times: dict[str, set[float]] = {}
    marks: dict[str, set[str]] = {}
    of_sku = deliveries.join(aggregates, aggregates.c.id == d.aggregate_id)
    for start in range(0, len(skus), CHUNK):
        part = skus[start : start + CHUNK]
        rows = connection.execute(
            select(aggregates.c.sku, d.updated_at)
            .select_from(of_sku)
            .where(
                on(d.channel_id, ids),
                accepted,
                d.updated_at >= moment,
                aggregates.c.sku.in_(part),
            )
        )
        for sku, at in rows:
            at_times.setdefault(str(sku), set()).add(at.timestamp())
        rows = connection.execute(
            select(aggregates.c.sku, d.receipt)
            .select_from(of_sku)
            .where(
                on(d.channel_id, ids),
                not_(accepted),
                d.receipt.startswith(prefix, autoescape=True),
                aggregates.c.sku.in_(part),
            )
        )
        for sku, receipt in rows:
            marks.setdefault(str(sku), set()).update(_marks(receipt, prefix))
    since = moment.timestamp()
    found: dict[str, list[float]] = {}
    for sku in skus:
        times = list(at_times.get(sku, ()))
        times += [at for at in (_mark_at(m, prefix) for m in marks.get(sku, ())) if at >= since]
        found[sku] = sorted(times)
    return found


def _marks(receipt: str | None, prefix: str) -> list[str]:
    """The marks a receipt holds (``reserve``: the latest attempt's first, then the earlier
    attempts' within the hour, space-separated)."""
    return [part for part in (receipt or "").split() if part.startswith(prefix)]


def _mark_at(mark: str, prefix: str) -> float:
    """A mark's time (epoch seconds); -inf when unreadable (never within the hour)."""
    try:
        return float(mark[len(prefix) :].split(":", 1)[0])
    except ValueError:
        return float("-inf")

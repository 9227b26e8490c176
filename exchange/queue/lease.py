"""The SQL that claims work, renews it and records its outcome (contract 4).

A claim is for one channel (contract 13). The lease lives on the aggregate's cursor on that
channel (``channel_aggregates``): claiming an aggregate is one row lock (PostgreSQL
``FOR UPDATE SKIP LOCKED``; SQLite: the whole claim in one ``BEGIN IMMEDIATE``), so at most
one delivery of an aggregate is in flight on a channel across all workers, whatever the other
channels hold. Each claim has a fresh lease token, written on the cursors and on the
deliveries it leased; renewing, recording and releasing all match on that token, so a worker
that lost its lease records nothing over the new owner's. A claim and the recording of a
batch are each a constant number of statements.

On a marketplace channel (contract 14, "one item per SKU carrying every mapped price type's
latest price, at most one item per SKU in flight per channel") a claim also passes over the
aggregates whose SKU has another aggregate leased on the channel (a retail price and an old
price of one SKU are one item there, carrying the other's latest known price: two in flight at
once could each carry the other's older one), and takes along, under the same lease, every
sibling of a SKU it picked (another aggregate of that SKU on the channel) whose delivery is due
now, or waits for a price of its SKU (``AWAITS_COMPANION``), and is the one its aggregate may
send as far as order goes: so the price types 1C staged together go in one item, however the
claim order and ``limit`` cut the backlog (review ymtogether: Yandex showed the new ``value``
beside the replaced ``discountBase`` for a while, and every SKU went twice). ``limit`` counts
the aggregates picked, so a marketplace batch holds at most ``limit`` SKUs (items), each with
its siblings: a target's ``requests`` keep each request within the marketplace's most items.
On PostgreSQL the claims of such a channel take turns (a transaction-scoped advisory lock on
the channel), so that two workers never each pick one aggregate of a SKU before either sees the
other's lease; SQLite's claim is one ``BEGIN IMMEDIATE`` already.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Integer,
    Select,
    Text,
    TypeDecorator,
    and_,
    any_,
    bindparam,
    cast,
    func,
    literal,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import aliased
from sqlalchemy.sql.dml import Update

from exchange.db.engine import PLANNED_FOR_VALUES, is_postgres
from exchange.db.schema import (
    Delivery,
    UTCDateTime,
    aggregates,
    channel_aggregates,
    channels,
    deliveries,
    messages,
)
from exchange.domain.policy import KindPolicies
from exchange.domain.prices import AWAITS_COMPANION
from exchange.domain.reasons import Reason
from exchange.domain.states import DUE, Event, State, values
from exchange.queue import order
from exchange.queue.deliveries import one_channel
from exchange.queue.transitions import Change, apply


@dataclass(frozen=True, slots=True)
class Leased:
    pk: int
    message_id: str
    aggregate_id: int
    kind: str
    aggregate: str
    version: int
    payload: str
    created_at: datetime
    attempt: int  # the number of the attempt this lease is for
    channel_id: int  # the channel it is delivered to
    leased_at: datetime | None = None  # when the lease began: the attempt's row carries it
    receipt: str | None = None  # the delivery's stored receipt (its last AWAITING's, if any)
    taken_at: datetime | None = None  # when intake took the message in (``messages.taken_at``)


@dataclass(frozen=True, slots=True)
class Batch:
    token: str
    until: datetime
    messages: list[Leased]
    takeovers: int = 0  # messages taken over from an expired lease


_STATES = {state.value: state for state in State}
_IN_PROGRESS = State.IN_PROGRESS.value


def new_token() -> str:
    return secrets.token_hex(16)


class _IdList(TypeDecorator[list[int]]):
    """A list of ids bound as one JSON text (SQLite's ``json_each`` reads it)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: list[int] | None, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value)


def one_of(
    column: ColumnElement[int], name: str, postgres: bool, ids: Sequence[int] | None = None
) -> ColumnElement[bool]:
    """``column`` in the list of ids bound as ``name`` (given at execution, or ``ids`` bound
    here), one statement text whatever the list's length. PostgreSQL: ``= ANY(array)``, so
    psycopg prepares it once and the server plans it once (an expanded ``IN (...)`` was a new
    statement for every length). SQLite: ``IN (SELECT value FROM json_each(:name))``, one
    parameter: an expanded ``IN`` cost SQLAlchemy more per id than the database spent on it."""
    bound: dict[str, Any] = {} if ids is None else {"value": list(ids)}
    if postgres:
        return column == any_(bindparam(name, type_=ARRAY(BigInteger()), **bound))
    each = func.json_each(bindparam(name, type_=_IdList(), **bound)).table_valued("value")
    return column.in_(select(each.c.value))


def _eligible(
    m: type[Delivery], name: str | None, now: Any, kinds: KindPolicies, max_attempts: Any
) -> ColumnElement[bool]:
    """The delivery ``m`` may be claimed at ``now`` (its cursor, ``channel_aggregates``, joined
    by the caller). With ``name`` (``m``'s alias; the pick, along the claim
    order), the claimable states are stated once, as the claim order's partial index says them
    (``order.claimable``), and what is due among them is told apart by ``in_progress`` alone:
    a second list of states (the due ones, or the lease's) is a second selectivity of one
    column, which PostgreSQL multiplies with the first as if independent, and an arm of an
    ``OR`` that lists two states does not prove the index's predicate. Either way the pick's
    plan read, joined and sorted every waiting message behind a long history (74 ms a claim
    behind 100,000 done messages, where the walk of the index to the first ``limit`` takes
    1 ms; issue 35). Without ``name`` (the candidates, found by aggregate), the due states
    are listed: so that no plan walks the claim order for them (11 ms a claim behind
    1,000,000 done messages, against by aggregate)."""
    in_flight = m.state == State.IN_PROGRESS.value
    waiting = not_(in_flight) if name is not None else m.state.in_(values(DUE))
    due = or_(
        and_(waiting, or_(m.next_try_at.is_(None), m.next_try_at <= now)),
        # A lease that expired on the last allowed attempt is not taken over: expire_exhausted
        # quarantines it instead (RetryPolicy.exhausted).
        and_(in_flight, m.locked_until < now, m.attempts < max_attempts),
    )
    # Order at the moment of the claim (contract 3), whatever ran before it: a latest-wins
    # version at or below the delivered one, or below another live version, is not eligible
    # (the next coalesce cancels it, so it is never sent); a strict one only as the next.
    # Checked here because coalescing runs only at the start of a cycle, and a version delayed
    # while a newer one was staged, delivered or retried by an operator became due meanwhile.
    claimable = [order.claimable(name)] if name is not None else []
    return and_(*claimable, due, order.in_order(m, kinds))


@dataclass(frozen=True, slots=True)
class _ClaimSQL:
    """A claim's statements, built once per shape (parameters: channel, now, max_attempts,
    limit, exclude, ids, token, worker, until): building them cost more than running them."""

    pick: Select[Any]
    lease: Update  # on the channel's cursors
    candidates: Any  # a Select of 15 columns (its generic form differs in SQLAlchemy 2.0/2.1)
    siblings: Select[Any] | None = None  # one_per_sku: the picked SKUs' other aggregates


# The advisory lock's first key (its second is the channel's id): the claims of one marketplace
# channel take turns on PostgreSQL. "MKTP".
ONE_PER_SKU_LOCK = 0x4D4B5450


def _waits_for_companion(m: Any, kinds: KindPolicies) -> ColumnElement[bool]:
    """The delivery ``m`` (its cursor joined) waits, not charged, for another price type of
    its SKU (its receipt ``AWAITS_COMPANION``, exchange.targets.marketplace.items), and is
    the one its aggregate may send as far as order goes: a claim of its SKU takes it along
    before its wait is over (a wait for another cause, a retry's back-off, is kept)."""
    return and_(
        m.state == State.DELAYED.value,
        m.receipt == AWAITS_COMPANION,
        order.in_order(m, kinds),
    )


def _one_per_sku(
    w: Any, channel: ColumnElement[Any], now: ColumnElement[Any]
) -> ColumnElement[bool]:
    """The delivery ``w``'s aggregate has no sibling of its SKU leased on the channel now: the
    SKUs of the channel's live leases (the leased cursors, a partial index of their own), and
    the aggregates of those SKUs (``ix_aggregates_sku_key``; case-folded, so two SKUs that
    differ only by case wait for each other too, harmlessly)."""
    busy_cursor = channel_aggregates.alias("busy_cursor")
    busy = aggregates.alias("busy_aggregate")
    same = aggregates.alias("same_sku")
    busy_skus = (
        select(busy.c.sku_key)
        .select_from(busy_cursor.join(busy, busy.c.id == busy_cursor.c.aggregate_id))
        .where(
            busy_cursor.c.lease_token.is_not(None),
            busy_cursor.c.channel_id == channel,
            busy_cursor.c.lease_until >= now,
            busy.c.sku_key.is_not(None),
        )
    )
    siblings = select(same.c.id).where(same.c.sku_key.in_(busy_skus))
    aggregate_id: ColumnElement[int] = w.aggregate_id
    return aggregate_id.not_in(siblings)


@functools.lru_cache(maxsize=32)
def _claim_sql(
    postgres: bool, kinds: KindPolicies, excluding: bool, one_per_sku: bool = False
) -> _ClaimSQL:
    now = bindparam("now", type_=UTCDateTime())
    max_attempts = bindparam("max_attempts", type_=Integer())
    channel = bindparam("channel", type_=channel_aggregates.c.channel_id.type)
    cursor = channel_aggregates
    free = or_(cursor.c.lease_until.is_(None), cursor.c.lease_until < now)
    # One statement: the channel's waiting deliveries in claim order (the partial index of
    # what may be claimed, ix_deliveries_claim_rank, channel first: as large as the channel's
    # backlog, whatever was done before or waits on other channels; named on SQLite,
    # order.in_claim_order), each joined to its cursor by key. At most one delivery of an
    # aggregate is eligible (latest wins: the newest live; strict: the next version), so an
    # aggregate comes once.
    w = aliased(Delivery, order.in_claim_order("d"))
    pick = (
        select(w.aggregate_id)
        .join(cursor, order.on_cursor(w))
        .where(w.channel_id == channel, free, _eligible(w, "d", now, kinds, max_attempts))
        .order_by(*order.claim_order(w))
        # PostgreSQL plans the pick for its values every time (sent unprepared): a generic
        # plan, made without them, read and sorted the whole backlog (61 ms at 17,000
        # waiting, issue 23) and was kept for the rest of a drain. The claim's other
        # statements keep their prepared generic plans (planning the candidates' select every
        # time cost 3 ms a claim).
        .execution_options(**{PLANNED_FOR_VALUES: True})
    )
    if excluding:
        pick = pick.where(not_(one_of(cursor.c.aggregate_id, "exclude", postgres)))
    if one_per_sku:
        pick = pick.where(_one_per_sku(w, channel, now))
    if postgres:
        pick = pick.with_for_update(skip_locked=True, of=cursor)
    leased = and_(cursor.c.channel_id == channel, one_of(cursor.c.aggregate_id, "ids", postgres))
    # The leased aggregates' deliveries on the channel, found by aggregate (not along the
    # claim order), with what the message says.
    m = aliased(Delivery, name="d")
    eligible = _eligible(m, None, now, kinds, max_attempts)
    siblings = None
    if one_per_sku:
        # A marketplace's item carries every price type of its SKU: a sibling aggregate's
        # delivery that is due now, or waits for a price of its SKU, goes with the one picked,
        # under the same lease (one token: fencing holds for all), and its cursor is leased
        # like any other. Found by SKU (``ix_aggregates_sku_key``), not along the claim order:
        # wherever the claim order put it.
        c = aliased(Delivery, name="d")
        own = aggregates.alias("companion_aggregate")
        picked = aggregates.alias("picked_aggregate")
        picked_skus = select(picked.c.sku_key).where(
            one_of(picked.c.id, "ids", postgres), picked.c.sku_key.is_not(None)
        )
        siblings = (
            select(c.aggregate_id)
            .join(cursor, order.on_cursor(c))
            .join(own, own.c.id == c.aggregate_id)
            .where(
                c.channel_id == channel,
                free,
                own.c.sku_key.in_(picked_skus),
                not_(one_of(cursor.c.aggregate_id, "ids", postgres)),
                or_(
                    _eligible(c, None, now, kinds, max_attempts),
                    _waits_for_companion(c, kinds),
                ),
            )
        )
        if excluding:
            siblings = siblings.where(not_(one_of(cursor.c.aggregate_id, "exclude", postgres)))
        if postgres:
            siblings = siblings.with_for_update(skip_locked=True, of=cursor)
        eligible = or_(eligible, _waits_for_companion(m, kinds))
    lease = {
        "lease_token": bindparam("token"),
        "lease_owner": bindparam("worker"),
        "lease_until": bindparam("until", type_=UTCDateTime()),
    }
    return _ClaimSQL(
        pick=pick.limit(bindparam("limit", type_=Integer())),
        lease=update(cursor).where(leased).values(**lease),
        candidates=select(
            m.message_pk,
            messages.c.message_id,
            m.aggregate_id,
            m.kind,
            messages.c.aggregate,
            m.version,
            messages.c.payload,
            messages.c.created_at,
            m.attempts,
            m.state,
            m.locked_by,
            m.leased_at,
            m.locked_until,
            m.receipt,
            messages.c.taken_at,
        )
        .join(cursor, order.on_cursor(m))
        .join(messages, messages.c.id == m.message_pk)
        .where(
            m.channel_id == channel,
            one_of(cursor.c.aggregate_id, "ids", postgres),
            cursor.c.lease_token == bindparam("token"),
            eligible,
        )
        .order_by(*order.claim_order(m)),
        siblings=siblings,
    )


def claim(
    connection: Connection,
    *,
    worker: str,
    now: datetime,
    limit: int,
    lease_seconds: float,
    kinds: KindPolicies,
    max_attempts: int,
    exclude: Sequence[int] = (),
    clock: Callable[[], datetime] | None = None,
    channel_id: int | None = None,
    one_per_sku: bool = False,
) -> Batch:
    """Lease, on the channel ``channel_id`` (None: the one channel, ``deliveries.one_channel``,
    read here), up to ``limit`` aggregates with a delivery due, and one delivery of each, in
    claim order (``order.claim_order``; the rule: domain/urgency.py). One statement picks.
    ``clock``, when given, is read for the lease's start once the aggregates are taken.
    ``one_per_sku``: a marketplace channel's claim (contract 14): no aggregate whose SKU has
    another aggregate leased on the channel, and every sibling of a SKU picked that is due
    (or waits for its companion) taken along, beyond ``limit`` (see the module).
    """
    channel = one_channel(connection) if channel_id is None else channel_id
    token = new_token()
    until = now + timedelta(seconds=lease_seconds)
    if channel_id is not None and _dropped(connection, channel):
        # A channel dropped while its worker runs takes no new send (contract 13: its waiting
        # deliveries are cancelled; an attempt in flight then, handed back, is the sweeper's
        # to cancel): review ozon 35 saw the old worker send a price again on it.
        return Batch(token, until, [])
    postgres = is_postgres(connection)
    sql = _claim_sql(postgres, kinds, bool(exclude), one_per_sku)
    if one_per_sku and postgres:
        # The channel's claims take turns until this one commits its leases.
        connection.execute(
            select(
                func.pg_advisory_xact_lock(
                    cast(literal(ONE_PER_SKU_LOCK), Integer), cast(literal(channel), Integer)
                )
            )
        )
    params: dict[str, Any] = {"now": now, "max_attempts": max_attempts, "channel": channel}
    if exclude:
        params["exclude"] = list(exclude)
    picked = connection.execute(sql.pick, {**params, "limit": limit}).scalars().all()
    aggregate_ids = list(dict.fromkeys(picked))
    if not aggregate_ids:
        return Batch(token, until, [])
    if sql.siblings is not None:
        # Beyond ``limit``: at most the other price types of the SKUs picked (``limit`` counts
        # a marketplace batch's items).
        taken = connection.execute(sql.siblings, {**params, "ids": aggregate_ids})
        aggregate_ids.extend(a for a in dict.fromkeys(taken.scalars()) if a not in aggregate_ids)
    params["ids"] = aggregate_ids
    params["token"] = token
    leasing = {
        "ids": aggregate_ids,
        "token": token,
        "worker": worker,
        "until": until,
        "channel": channel,
    }
    connection.execute(sql.lease, leasing)
    rows = connection.execute(sql.candidates, params).all()
    # aggregate_id -> a row of the select above (Row's generic form differs in SQLAlchemy 2.0/2.1)
    chosen: dict[int | None, Any] = {}
    for row in rows:  # one eligible message per aggregate (see _claim_sql)
        chosen.setdefault(row.aggregate_id, row)
    # The lease's start is read once the aggregates are ours, not before the claim waited for
    # them: so it never comes before the end of the attempt that freed them (history's order).
    leased_at = max(now, clock()) if clock is not None else now
    leased: list[Leased] = []
    changes: list[Change] = []
    lease_values: dict[int, dict[str, Any]] = {}  # by attempt: the same for most of a batch
    for row in chosen.values():
        # Unpacked once: a Row's attribute access by name costs more than the rest of the loop.
        (pk, message_id, aggregate_id, kind, aggregate, version, payload, created_at) = row[:8]
        (attempts, state, locked_by, row_leased_at, row_lease_until, receipt, taken_at) = row[8:]
        attempt = attempts + 1
        values = lease_values.get(attempt)
        if values is None:
            values = lease_values[attempt] = {
                "locked_by": worker,
                "locked_until": until,
                "lease_token": token,
                "attempts": attempt,
                "leased_at": leased_at,
            }
        if state == _IN_PROGRESS:
            # The attempt whose lease expired (its worker crashed or hung) ends here: its row
            # is the only one it gets, with its own worker, attempt and lease start.
            change = Change(
                pk,
                Event.TAKEN_OVER,
                State.IN_PROGRESS,
                State.IN_PROGRESS,
                values=values,
                worker=locked_by,
                attempt=attempts,
                leased_at=row_leased_at,
                lease_until=row_lease_until,
                detail=(
                    f"the lease of {locked_by} had expired: result unknown; "
                    f"taken over by {worker} for attempt {attempt}"
                ),
                channel_id=channel,
            )
        else:
            # Taking a lease writes no history row: the attempt's row, when it ends, carries
            # the worker, the attempt and the lease's start.
            change = Change(
                pk,
                Event.LEASED,
                _STATES[state],
                State.IN_PROGRESS,
                values=values,
                written=False,
                channel_id=channel,
            )
        changes.append(change)
        leased.append(
            Leased(
                pk,
                message_id,
                aggregate_id,
                kind,
                aggregate,
                version,
                payload,
                created_at,
                attempt,
                channel,
                leased_at,
                receipt,
                taken_at,
            )
        )
    apply(connection, changes, now)
    takeovers = sum(1 for change in changes if change.event is Event.TAKEN_OVER)
    return Batch(token, until, leased, takeovers)


def _dropped(connection: Connection, channel: int) -> bool:
    """Whether the channel ``channel`` was dropped (``channels drop``)."""
    found = connection.execute(
        select(channels.c.dropped_at).where(channels.c.id == channel)
    ).scalar_one_or_none()
    return found is not None


def renew(connection: Connection, token: str, until: datetime) -> int:
    """Extend a live lease; returns how many deliveries it still holds (0: the lease is lost).
    A token is one claim's, on one channel: it finds the lease's cursors alone."""
    connection.execute(
        update(channel_aggregates)
        .where(channel_aggregates.c.lease_token == token)
        .values(lease_until=until)
    )
    # The lease's deliveries are found through its cursors (indexed by token, and only the
    # leased ones): an index on messages.lease_token cost every message write an index entry.
    on_channel = select(channel_aggregates.c.aggregate_id).where(
        channel_aggregates.c.lease_token == token
    )
    held = connection.execute(
        update(deliveries)
        .where(
            deliveries.c.aggregate_id.in_(on_channel.scalar_subquery()),
            deliveries.c.lease_token == token,
            deliveries.c.state == State.IN_PROGRESS.value,
        )
        .values(locked_until=until)
    ).rowcount
    return int(held)


def expire_exhausted(
    connection: Connection, *, now: datetime, max_attempts: int, channel_id: int | None = None
) -> int:
    """A lease that expired on the last allowed attempt: quarantine, never a further attempt.
    On the channel ``channel_id``; None: on every channel (the sweep)."""
    d = deliveries.c
    query = select(d.message_pk, d.channel_id, d.attempts, d.locked_by, d.leased_at, d.locked_until)
    query = query.where(
        # Every delivery in flight holds a token: its partial index holds only those, on every
        # channel (the state indexes are channel first).
        d.lease_token.is_not(None),
        d.state == State.IN_PROGRESS.value,
        d.locked_until < now,
        d.attempts >= max_attempts,
    )
    if channel_id is not None:
        query = query.where(d.channel_id == channel_id)
    if is_postgres(connection):
        query = query.with_for_update(skip_locked=True)
    changes = []
    for pk, channel, attempts, owner, leased_at, until in connection.execute(query):
        detail = (
            f"the lease of {owner} expired during attempt {attempts} of {max_attempts}; "
            "the result of that attempt is unknown"
        )
        changes.append(
            Change(
                pk,
                Event.LEASE_EXPIRED,
                State.IN_PROGRESS,
                State.QUARANTINED,
                values={
                    "reason": Reason.RETRY_LIMIT.value,
                    "last_error": detail,
                    "locked_by": None,
                    "locked_until": None,
                    "lease_token": None,
                },
                worker=owner,
                attempt=attempts,
                leased_at=leased_at,
                lease_until=until,
                detail=detail,
                channel_id=channel,
            )
        )
    apply(connection, changes, now)
    return len(changes)

"""The ordering rules of contract 3 as SQL, each written once; the claim, coalescing, the gap
check, the idle check and ``status`` compose them. Each holds per (aggregate, channel)
(contract 13): a delivery is ordered among the versions of its aggregate on its channel.

    pending            due (new, delayed), or in flight on a lease that expired (its worker
                       is gone): what coalescing may still cancel
    strict order       a strict kind sends only the next version on the channel
                       (``next_version``: ``done_version + 1``, or the first version the
                       channel received when it has done none)
    below the start    a strict version below the first the channel received (it came
                       after a higher one to a channel registered later): never sent there
    latest wins        any other kind sends only a version above ``done_version`` with no
                       newer live version of its aggregate (new, delayed, in flight,
                       quarantined), at the moment of the claim
    held               a strict delivery behind a quarantined version above the cursor: only
                       a person moves it (retry or cancel the blocker)
    behind kept        a strict delivery behind a version kept with no delivery on any
                       channel (``behind_kept``): no gap, only a person's seed moves it
    claim order        lowest ``claim_rank`` first, ties by message; ranks are dealt in from
                       each channel's head (``head_ranks``) by intake: the rule and why,
                       domain/urgency.py

``m`` is a delivery: the ``deliveries`` table's columns (``deliveries.c``) or an alias of
``Delivery``; expressions that read the cursor need ``channel_aggregates`` joined on ``m``'s
aggregate and channel (``on_cursor``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Select, and_, exists, false, not_, or_, select
from sqlalchemy import text as sa_text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.functions import GenericFunction
from sqlalchemy.sql.selectable import Alias

from exchange.db.channels import is_kept
from exchange.db.schema import (
    CLAIMABLE_STATES,
    DELIVERY_CLAIM_ORDER_INDEX,
    Delivery,
    channel_aggregates,
    channels,
    deliveries,
    messages,
)
from exchange.domain.policy import KindPolicies
from exchange.domain.states import DUE, LIVE, State, values


def pending(m: Any, now: datetime) -> ColumnElement[bool]:
    """Due, or in flight on a lease that expired before ``now``."""
    return or_(
        m.state.in_(values(DUE)),
        and_(m.state == State.IN_PROGRESS.value, m.locked_until < now),
    )


def is_strict(m: Any, kinds: KindPolicies) -> ColumnElement[bool]:
    """The message's kind keeps strict order."""
    return m.kind.in_(kinds.strict) if kinds.strict else false()


def on_cursor(m: Any, cursor: Any = None) -> ColumnElement[bool]:
    """The cursor (``channel_aggregates``' columns, or an alias's) joined on the delivery
    ``m``: its aggregate on its channel."""
    c = channel_aggregates.c if cursor is None else cursor
    return and_(c.aggregate_id == m.aggregate_id, c.channel_id == m.channel_id)


class greatest(GenericFunction[int]):  # named as in SQL
    """The larger of two integers: ``greatest`` on PostgreSQL, ``max`` on SQLite."""

    type = BigInteger()
    inherit_cache = True


@compiles(greatest, "sqlite")
def _greatest_on_sqlite(element: greatest, compiler: Any, **kw: Any) -> str:
    return f"max({compiler.process(element.clauses, **kw)})"


def next_version(cursor: Any = None) -> ColumnElement[int]:
    """The version strict order sends next on a channel: the one after the cursor, or the
    first the channel received while it has done none before it (contract 13: strict order
    on a channel starts at the first version it receives). ``cursor``: the columns of
    ``channel_aggregates`` (the default) or of an alias of it."""
    c = channel_aggregates.c if cursor is None else cursor
    following: ColumnElement[int] = greatest(c.done_version, c.first_version - 1) + 1
    return following


def next_in_order(m: Any) -> ColumnElement[bool]:
    """The version next in order on its channel (the only one strict order sends)."""
    following: ColumnElement[bool] = m.version == next_version()
    return following


def below_start(m: Any) -> ColumnElement[bool]:
    """Below the first version its channel received (``first_version``): a version that
    reached a channel after a higher one, where strict order started (contract 13). Not the
    channel's to deliver: strict order there never comes back to it (``next_version``), so
    coalescing cancels it ``stale`` and the gap check never waits on it. The delivery ``m``
    with its cursor joined (``on_cursor``)."""
    below: ColumnElement[bool] = m.version < channel_aggregates.c.first_version
    return below


def beyond_cursor(m: Any) -> ColumnElement[bool]:
    """Above the highest version known done on its channel: not yet delivered or skipped."""
    above: ColumnElement[bool] = m.version > channel_aggregates.c.done_version
    return above


def same_aggregate(other: Any, m: Any) -> ColumnElement[bool]:
    """The delivery ``other`` is a version of ``m``'s aggregate on ``m``'s channel."""
    return and_(other.aggregate_id == m.aggregate_id, other.channel_id == m.channel_id)


def newest_live(m: Any) -> ColumnElement[bool]:
    """Latest wins: above the cursor, and no newer live version of its aggregate on its
    channel."""
    newer = aliased(Delivery, name="newer")
    return and_(
        beyond_cursor(m),
        ~exists().where(
            same_aggregate(newer, m),
            newer.version > m.version,
            newer.state.in_(values(LIVE)),
        ),
    )


def in_order(m: Any, kinds: KindPolicies) -> ColumnElement[bool]:
    """May be sent now as far as order goes: strict kinds the next version, others the
    newest live one."""
    if not kinds.strict:
        return newest_live(m)
    strict = is_strict(m, kinds)
    return or_(and_(strict, next_in_order(m)), and_(not_(strict), newest_live(m)))


def held_behind_quarantine(m: Any) -> ColumnElement[bool]:
    """A quarantined version of the same aggregate on the same channel stands between the
    cursor and ``m``."""
    blocker = aliased(Delivery, name="blocker")
    return exists().where(
        same_aggregate(blocker, m),
        blocker.state == State.QUARANTINED.value,
        blocker.version < m.version,
        blocker.version > channel_aggregates.c.done_version,
    )


def behind_kept(m: Any) -> ColumnElement[bool]:
    """A version of ``m``'s aggregate between its channel's next version and ``m`` is kept with
    no delivery on any channel (``messages.kept_nowhere``: no channel took its kind when it was
    accepted; ``db.channels.kept_nowhere``, ``status``'s ``no-channel:KIND``). It arrived, so
    ``m`` is no sequence gap, and only a person moves it on: ``channels seed NAME --from``
    gives the kept version to the channel, and ``m`` follows it (review 32k). The delivery
    ``m`` with its cursor joined (``on_cursor``); each probe reads ``messages`` by
    ``ix_messages_aggregate_id_version``."""
    kept = messages.alias("kept")
    # A version next in order waits behind nothing: no probe (the common case).
    return and_(
        m.version > next_version(),
        exists().where(
            kept.c.aggregate_id == m.aggregate_id,
            kept.c.version >= next_version(),
            kept.c.version < m.version,
            is_kept(kept),
        ),
    )


def held(m: Any, kinds: KindPolicies) -> ColumnElement[bool]:
    """A strict delivery that only a person can move on."""
    if not kinds.strict:
        return false()
    return and_(is_strict(m, kinds), held_behind_quarantine(m))


def claimable(name: str) -> TextClause:
    """The delivery (table or alias ``name``) is in a state a claim may take it from, written
    as the claim order's partial index says it (``ix_deliveries_claim_rank``): SQLite reads a
    partial index only for a query that repeats its condition, and a bound list does not."""
    return sa_text(f"{name}.{CLAIMABLE_STATES}")


# The claim order's index of each table read along it.
_CLAIM_ORDER_INDEXES = {"deliveries": DELIVERY_CLAIM_ORDER_INDEX}


class _InClaimOrder(Alias):
    """A table under another name, read through its claim order's index on SQLite."""

    inherit_cache = True


@compiles(_InClaimOrder, "sqlite")
def _indexed_by(element: _InClaimOrder, compiler: Any, **kw: Any) -> str:
    sql: str = compiler.visit_alias(element, **kw)
    if kw.get("asfrom") and not kw.get("ashint"):  # in FROM; a column names the alias alone
        table: Any = element.element
        sql += f" INDEXED BY {_CLAIM_ORDER_INDEXES[table.name]}"
    return sql


def in_claim_order(name: str, table: Any = deliveries) -> Alias:
    """``deliveries`` as ``name``, read along its claim order (``ix_deliveries_claim_rank``)
    on SQLite:
    ``INDEXED BY``; PostgreSQL's SQL is the plain alias. SQLite's ANALYZE samples the
    state index (``intake.analyze``): its sample is a thousand entries of one state, so the
    planner takes each state for about a thousand messages and, from about 30,000 waiting,
    read every waiting message through the state index and sorted them (0.26 s a claim at
    60,000 against 0.04 s along the claim order; the head rank 94 ms against 0.1 ms). Named,
    the index is read whatever the statistics say, and a statement it cannot serve (a missing
    index, a condition that does not repeat ``claimable``) fails when it is prepared instead
    of scanning. What walks it reads at most the waiting messages, in order, without a sort."""
    return _InClaimOrder._construct(table, name=name)


def claim_order(d: Any) -> tuple[ColumnElement[Any], ...]:
    """The claim takes the lowest rank first, then the older message (``d`` a delivery: on
    its channel, the order of ``ix_deliveries_claim_rank``)."""
    return (d.claim_rank, d.message_pk)


def head_ranks(kinds: KindPolicies) -> Select[Any]:
    """Each channel not dropped, in the order they were registered, with the lowest rank
    still waiting to be claimed there (NULL when nothing waits): where intake deals a take in
    on that channel. Only new deliveries of latest-wins kinds count: a delayed one or a held
    posting may wait long, and the head must not stay behind with them."""
    d = in_claim_order("d").c
    head = (
        select(d.claim_rank)
        .where(d.channel_id == channels.c.id, claimable("d"), d.state == State.NEW.value)
        .order_by(d.claim_rank, d.message_pk)
        .limit(1)
    )
    if kinds.strict:
        head = head.where(d.kind.not_in(kinds.strict))
    return (
        select(channels.c.id, head.scalar_subquery())
        .where(channels.c.dropped_at.is_(None))
        .order_by(channels.c.id)
    )

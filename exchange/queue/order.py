"""The ordering rules of contract 3 as SQL, each written once; the claim, coalescing, the gap
check, the idle check and ``status`` compose them.

    pending            due (new, delayed), or in flight on a lease that expired (its worker
                       is gone): what coalescing may still cancel
    strict order       a strict kind sends only ``done_version + 1`` of its aggregate
    latest wins        any other kind sends only a version above ``done_version`` with no
                       newer live version of its aggregate (new, delayed, in flight,
                       quarantined), at the moment of the claim
    held               a strict message behind a quarantined version above the cursor: only
                       a person moves it (retry or cancel the blocker)
    claim order        lowest ``claim_rank`` first, ties by id; ranks are dealt in from the
                       head (``head_rank``) by intake: the rule and why, domain/urgency.py

``m`` is a message: the ``messages`` table's columns (``messages.c``) or an alias of
``Message``; expressions that read the cursor need ``aggregates`` joined on ``m``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, exists, false, not_, or_, select
from sqlalchemy import text as sa_text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.selectable import Alias

from exchange.db.schema import CLAIM_ORDER_INDEX, CLAIMABLE_STATES, Message, aggregates, messages
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


def next_in_order(m: Any) -> ColumnElement[bool]:
    """The version right after its aggregate's cursor (the only one strict order sends)."""
    cursor: ColumnElement[bool] = m.version == aggregates.c.done_version + 1
    return cursor


def beyond_cursor(m: Any) -> ColumnElement[bool]:
    """Above the highest version known done at the site: not yet delivered or skipped."""
    above: ColumnElement[bool] = m.version > aggregates.c.done_version
    return above


def newest_live(m: Any) -> ColumnElement[bool]:
    """Latest wins: above the cursor, and no newer live version of its aggregate."""
    newer = aliased(Message, name="newer")
    return and_(
        beyond_cursor(m),
        ~exists().where(
            newer.aggregate_id == m.aggregate_id,
            newer.version > m.version,
            newer.state.in_(values(LIVE)),
            not_(newer.rejected),
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
    """A quarantined version of the same aggregate stands between the cursor and ``m``."""
    blocker = aliased(Message, name="blocker")
    return exists().where(
        blocker.aggregate_id == m.aggregate_id,
        not_(blocker.rejected),
        blocker.state == State.QUARANTINED.value,
        blocker.version < m.version,
        blocker.version > aggregates.c.done_version,
    )


def held(m: Any, kinds: KindPolicies) -> ColumnElement[bool]:
    """A strict message that only a person can move on."""
    if not kinds.strict:
        return false()
    return and_(is_strict(m, kinds), held_behind_quarantine(m))


def claimable(name: str) -> TextClause:
    """The message (table or alias ``name``) is in a state a claim may take it from, written
    as the claim order's partial index says it (``ix_messages_claim_rank``): SQLite reads a
    partial index only for a query that repeats its condition, and a bound list does not."""
    return sa_text(f"{name}.{CLAIMABLE_STATES}")


class _InClaimOrder(Alias):
    """``messages`` under another name, read through the claim order's index on SQLite."""

    inherit_cache = True


@compiles(_InClaimOrder, "sqlite")
def _indexed_by(element: _InClaimOrder, compiler: Any, **kw: Any) -> str:
    sql: str = compiler.visit_alias(element, **kw)
    if kw.get("asfrom") and not kw.get("ashint"):  # in FROM; a column names the alias alone
        sql += f" INDEXED BY {CLAIM_ORDER_INDEX}"
    return sql


def in_claim_order(name: str) -> Alias:
    """``messages`` as ``name``, read along the claim order (``ix_messages_claim_rank``) on
    SQLite: ``INDEXED BY``; PostgreSQL's SQL is the plain alias. SQLite's ANALYZE samples the
    state index (``intake.analyze``): its sample is a thousand entries of one state, so the
    planner takes each state for about a thousand messages and, from about 30,000 waiting,
    read every waiting message through the state index and sorted them (0.26 s a claim at
    60,000 against 0.04 s along the claim order; the head rank 94 ms against 0.1 ms). Named,
    the index is read whatever the statistics say, and a statement it cannot serve (a missing
    index, a condition that does not repeat ``claimable``) fails when it is prepared instead
    of scanning. What walks it reads at most the waiting messages, in order, without a sort."""
    return _InClaimOrder._construct(messages, name=name)


def claim_order(m: Any) -> tuple[ColumnElement[Any], ...]:
    """The claim takes the lowest rank first, then the older message."""
    return (m.claim_rank, m.id)


def head_rank(kinds: KindPolicies) -> Select[Any]:
    """The lowest rank still waiting to be claimed: where intake deals a take in. Only new
    messages of latest-wins kinds count: a delayed one or a held posting may wait long, and
    the head must not stay behind with them."""
    m = in_claim_order("m").c
    query = (
        select(m.claim_rank)
        .where(claimable("m"), m.state == State.NEW.value)
        .where(not_(m.rejected))
        .order_by(m.claim_rank, m.id)
        .limit(1)
    )
    if kinds.strict:
        query = query.where(m.kind.not_in(kinds.strict))
    return query

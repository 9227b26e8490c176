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

``m`` is a message: the ``messages`` table's columns (``messages.c``) or an alias of
``Message``; expressions that read the cursor need ``aggregates`` joined on ``m``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, false, not_, or_
from sqlalchemy.orm import aliased

from exchange.db.schema import Message, aggregates
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

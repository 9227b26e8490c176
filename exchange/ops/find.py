"""Any message in any state, found by what an operator knows: a SKU, an aggregate, a 1C
document (``source_ref``) or the first characters of a message_id; and what a retry or a
cancel would set going besides the messages it names (the consequences a preview states)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, false, func, not_, or_, select

from exchange.db.schema import aggregates, messages
from exchange.domain.policy import KindPolicies
from exchange.domain.reasons import Reason
from exchange.domain.states import PENDING, values
from exchange.errors import OperatorError

FOUND_SHOWN = 200
HTTP_REASON = re.compile(r"http-[45][0-9][0-9]")


def known_reasons() -> list[str]:
    """The reasons a filter may name: every fixed one, and ``http-NNN`` for a site's 4xx/5xx."""
    return sorted(r.value for r in Reason)


def check_filters(reason: str | None, kind: str | None, kinds: Iterable[str]) -> None:
    """A filter that names no known reason or kind is a typo: refused with the valid values,
    never run as a filter that matches nothing and says so as if all were well."""
    if reason is not None and reason not in known_reasons() and not HTTP_REASON.fullmatch(reason):
        raise OperatorError(
            f"unknown reason {reason!r}: one of {', '.join(known_reasons())} or http-NNN"
        )
    known = sorted(kinds)
    if kind is not None and kind not in known:
        raise OperatorError(f"unknown kind {kind!r}: one of {', '.join(known)}")


def _like_prefix(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def find(connection: Connection, term: str, limit: int = FOUND_SHOWN) -> list[dict[str, Any]]:
    """Messages whose SKU, aggregate or source_ref is ``term``, or whose message_id starts
    with it; newest first. An empty term finds nothing (never the whole table)."""
    term = term.strip()
    if not term:
        return []
    by_sku = select(aggregates.c.id).where(aggregates.c.sku == term)
    rows = connection.execute(
        select(messages)
        .where(
            or_(
                messages.c.aggregate == term,
                messages.c.source_ref == term,
                messages.c.aggregate_id.in_(by_sku),
                messages.c.message_id.like(_like_prefix(term), escape="\\"),
            )
        )
        .order_by(messages.c.created_at.desc(), messages.c.id.desc())
        .limit(limit)
    ).mappings()
    return [
        {
            "message_id": r["message_id"],
            "kind": r["kind"],
            "aggregate": r["aggregate"],
            "version": r["version"],
            "state": r["state"],
            "reason": r["reason"],
            "source_ref": r["source_ref"],
            "attempts": r["attempts"],
            "created_at": r["created_at"].isoformat(),
            "updated_at": r["updated_at"].isoformat(),
        }
        for r in rows
    ]


def released_by_cancel(
    connection: Connection, message_ids: Sequence[str], kinds: KindPolicies
) -> list[dict[str, Any]]:
    """Per strictly ordered aggregate of the cancelled messages: how many later versions wait
    behind them and will go out without them once they are cancelled."""
    if not message_ids or not kinds.strict:
        return []
    cancelled = (
        select(messages.c.aggregate_id, func.max(messages.c.version).label("version"))
        .where(
            messages.c.message_id.in_(list(message_ids)),
            messages.c.kind.in_(kinds.strict),
            messages.c.aggregate_id.is_not(None),
        )
        .group_by(messages.c.aggregate_id)
        .subquery()
    )
    later = messages.alias("later")
    rows = connection.execute(
        select(later.c.kind, later.c.aggregate, func.count(), func.min(later.c.version))
        .join(cancelled, cancelled.c.aggregate_id == later.c.aggregate_id)
        .where(
            later.c.version > cancelled.c.version,
            later.c.state.in_(values(PENDING)),
            not_(later.c.rejected),
        )
        .group_by(later.c.kind, later.c.aggregate)
        .order_by(later.c.kind, later.c.aggregate)
    ).all()
    return [
        {"kind": kind, "aggregate": aggregate, "count": count, "first_version": first}
        for kind, aggregate, count, first in rows
    ]


def held_condition(kinds: KindPolicies) -> ColumnElement[bool]:
    """True for a message on its way (new, delayed) that waits behind a quarantined earlier
    version of its strictly ordered aggregate: only a person's retry or cancel moves it."""
    if not kinds.strict:
        return false()
    before = messages.alias("before")
    blocking = (
        select(before.c.id)
        .where(
            before.c.aggregate_id == messages.c.aggregate_id,
            before.c.version < messages.c.version,
            before.c.state == "quarantined",
            not_(before.c.rejected),
        )
        .exists()
    )
    return and_(
        messages.c.kind.in_(kinds.strict),
        messages.c.state.in_(values(PENDING)),
        not_(messages.c.rejected),
        blocking,
    )


def held(connection: Connection, kinds: KindPolicies) -> int:
    """How many messages are held (``held_condition``)."""
    if not kinds.strict:
        return 0
    return int(connection.execute(select(func.count()).where(held_condition(kinds))).scalar_one())

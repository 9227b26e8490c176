"""Whether a delayed delivery waits for its channel rather than for a retry: the one rule
``find``, ``status`` and the workbench share (the words say it by ``words.state_said``).

A ``delayed`` delivery is there either because an attempt failed and is tried again
(``retry-scheduled``, charged) or because the channel took it or asked it to wait
(``awaiting-outcome``, not charged: Ozon's hourly limit, a Wildberries task whose outcome is
read later, Yandex Market's read-back, an item waiting for its companion price; contract 14,
research §1.3, §2, §3.4). Its last of those two events on its channel says which; a delivery
whose history no longer holds either is said as delayed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, and_, func, select

from exchange.db.schema import history
from exchange.domain.prices import AWAITING_1C
from exchange.domain.states import Event, State

# The events that leave a delivery delayed after an attempt: which was last says why it waits.
_DELAYING = (Event.RETRY_SCHEDULED.value, Event.AWAITING_OUTCOME.value)


def awaiting(pk: Any, channel_id: Any, state: Any) -> ColumnElement[bool]:
    """True for a delivery (its message's ``pk``, its ``channel_id`` and ``state`` columns)
    that is delayed waiting for its channel, not for a retry."""
    last = (
        select(history.c.event)
        .where(
            history.c.message_pk == pk,
            history.c.channel_id == channel_id,
            history.c.event.in_(_DELAYING),
        )
        .order_by(history.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    return and_(state == State.DELAYED.value, last == Event.AWAITING_OUTCOME.value)


def awaiting_1c(pk: Any, channel_id: Any, state: Any) -> ColumnElement[bool]:
    """True for a delivery that ``awaiting`` says waits, whose wait is on 1C rather than on its
    marketplace: a price that alone breaks the marketplace's rule and waits for 1C to send the
    other price type (``domain.prices.AWAITING_1C``). ``status`` and the dashboard say it as
    a wait for 1C, never as a wait for the marketplace."""
    last = (
        select(history.c.error_class)
        .where(
            history.c.message_pk == pk,
            history.c.channel_id == channel_id,
            history.c.event.in_(_DELAYING),
        )
        .order_by(history.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    # never NULL (a delaying event without an error class): ``not_`` of it must be true
    return and_(awaiting(pk, channel_id, state), func.coalesce(last, "") == AWAITING_1C)


def awaiting_in_story(
    rows: Iterable[tuple[Any, str, str | None, str | None]],
) -> list[tuple[bool, bool]]:
    """The same rule read along a history (``exchange history``, the report's biography):
    for each row (its channel, event, from-state and to-state, oldest first) whether its
    from-state and its to-state, where ``delayed``, wait for the channel rather than for a
    retry: the last of the two delaying events on the row's channel up to it says which."""
    last: dict[Any, str] = {}
    said: list[tuple[bool, bool]] = []
    for channel, event, from_state, to_state in rows:
        before = last.get(channel) == Event.AWAITING_OUTCOME.value
        if event in _DELAYING:
            last[channel] = event
        after = last.get(channel) == Event.AWAITING_OUTCOME.value
        said.append(
            (
                from_state == State.DELAYED.value and before,
                to_state == State.DELAYED.value and after,
            )
        )
    return said


def awaiting_in_biography(story: Iterable[dict[str, Any]]) -> list[tuple[bool, bool]]:
    """``awaiting_in_story`` of a biography's history (``ops.status.biography``'s entries, by
    their channel's name): what ``exchange history`` and the workbench's history say of each
    row's delayed from- and to-state, a wait for the marketplace or a retry."""
    return awaiting_in_story((e.get("channel"), e["event"], e["from"], e["to"]) for e in story)

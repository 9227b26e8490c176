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
from typing import Any, Literal

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


# What a delayed state waits for, read along a story: "" (not delayed, or a retry), the channel,
# or 1C's other price type (``domain.prices.AWAITING_1C``): ``state_said`` says each.
Wait = Literal["", "channel", "1c"]


def awaiting_in_story(
    rows: Iterable[tuple[Any, str, str | None, str | None, str | None]],
) -> list[tuple[Wait, Wait]]:
    """The same rule read along a history (``exchange history``, the report's biography):
    for each row (its channel, event, from-state, to-state and error class, oldest first)
    what its from-state and its to-state, where ``delayed``, wait for: the channel, 1C (the
    last delaying event's error class is ``AWAITING_1C``, as ``awaiting_1c`` reads it), or
    nothing but a retry (""): the last of the two delaying events on the row's channel up to
    it says which."""
    last: dict[Any, tuple[str, str | None]] = {}
    said: list[tuple[Wait, Wait]] = []
    for channel, event, from_state, to_state, error_class in rows:
        before = _wait(last.get(channel))
        if event in _DELAYING:
            last[channel] = (event, error_class)
        after = _wait(last.get(channel))
        said.append(
            (
                before if from_state == State.DELAYED.value else "",
                after if to_state == State.DELAYED.value else "",
            )
        )
    return said


def _wait(last: tuple[str, str | None] | None) -> Wait:
    if last is None or last[0] != Event.AWAITING_OUTCOME.value:
        return ""
    return "1c" if last[1] == AWAITING_1C else "channel"


def awaiting_in_biography(story: Iterable[dict[str, Any]]) -> list[tuple[Wait, Wait]]:
    """``awaiting_in_story`` of a biography's history (``ops.status.biography``'s entries, by
    their channel's name): what ``exchange history`` and the workbench's history say of each
    row's delayed from- and to-state, a wait for the marketplace, for 1C, or a retry."""
    return awaiting_in_story(
        (e.get("channel"), e["event"], e["from"], e["to"], e.get("error_class")) for e in story
    )

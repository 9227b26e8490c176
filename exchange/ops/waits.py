"""Whether a delayed delivery waits for its channel rather than for a retry: the one rule
``find``, ``status`` and the workbench share (the words say it by ``words.state_said``).

A ``delayed`` delivery is there either because an attempt failed and is tried again
(``retry-scheduled``, charged) or because the channel took it or asked it to wait
(``awaiting-outcome``, not charged: Ozon's hourly limit, a Wildberries task whose outcome is
read later, Yandex Market's read-back, an item waiting for its companion price; contract 14,
research §1.3, §2, §3.4), or for 1C or a person (``wait_of``). Its last of those two events on
its channel says which; a delivery whose history no longer holds either is said as delayed."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Connection, and_, case, func, select

from exchange.db.on_channels import on
from exchange.db.schema import deliveries, history, messages
from exchange.domain.prices import AWAITING_1C, AWAITING_PERSON
from exchange.domain.states import Event, State

# The events that leave a delivery delayed after an attempt: which was last says why it waits.
_DELAYING = (Event.RETRY_SCHEDULED.value, Event.AWAITING_OUTCOME.value)


def _last_delaying(column: Any, pk: Any, channel_id: Any) -> Any:
    """``column`` of the delivery's last delaying event on its channel (NULL without one)."""
    return (
        select(column)
        .where(
            history.c.message_pk == pk,
            history.c.channel_id == channel_id,
            history.c.event.in_(_DELAYING),
        )
        .order_by(history.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )


def awaiting(pk: Any, channel_id: Any, state: Any) -> ColumnElement[bool]:
    """True for a delivery (its message's ``pk``, its ``channel_id`` and ``state`` columns)
    that is delayed waiting for its channel, not for a retry."""
    last = _last_delaying(history.c.event, pk, channel_id)
    return and_(state == State.DELAYED.value, last == Event.AWAITING_OUTCOME.value)


# What a delayed state waits for: "" (not delayed, or a retry), the channel, 1C's other price
# type (``domain.prices.AWAITING_1C``) or a person's decision on the SKU's main price
# quarantined by a rule of two price types (``domain.prices.AWAITING_PERSON``): ``state_said``
# says each.
Wait = Literal["", "channel", "1c", "person"]

# The error classes of a wait that ``awaiting`` counts but that is not on the channel, and whom
# it is on: the one table ``wait_of`` (SQL) and ``awaiting_in_story`` (a history) read.
_NOT_ON_CHANNEL: dict[str, Wait] = {AWAITING_1C: "1c", AWAITING_PERSON: "person"}


def wait_of(pk: Any, channel_id: Any, state: Any) -> ColumnElement[str]:
    """What a delivery waits for (``Wait``), the one rule ``find``, ``status`` and the
    workbench share: "" for one not delayed or delayed for a retry; of those ``awaiting``
    says wait, "1c" where the last delaying event's error class is ``AWAITING_1C`` (1C's other
    price type), "person" where it is ``AWAITING_PERSON`` (an operator's retry or cancel of the
    quarantined main price), else "channel" (the marketplace). Only "channel" is a wait for
    the marketplace: ``status`` and the dashboard count the others apart."""
    on = func.coalesce(_last_delaying(history.c.error_class, pk, channel_id), "")
    kind = case(*((on == cls, kind) for cls, kind in _NOT_ON_CHANNEL.items()), else_="channel")
    # ``awaiting`` NULL (no delaying event) takes the else: not a wait
    return case((awaiting(pk, channel_id, state), kind), else_="")


def channel_waits(
    connection: Connection, error_class: str, ids: list[int] | None = None
) -> tuple[int, datetime | None]:
    """How many delayed deliveries (on the channels ``ids``; None: every channel's) wait for
    their channel for ``error_class`` (their last delaying event's: Ozon's hourly limit,
    ``domain.prices.OZON_HOUR``), and when the first of them is due again (None: none)."""
    d = deliveries
    last = _last_delaying(history.c.error_class, d.c.message_pk, d.c.channel_id)
    query = select(func.count(), func.min(d.c.next_try_at)).where(
        awaiting(d.c.message_pk, d.c.channel_id, d.c.state), last == error_class
    )
    if ids is not None:
        query = query.where(on(d.c.channel_id, ids))
    count, due = connection.execute(query).one()
    return int(count or 0), due


def waits_said(wait: str) -> dict[str, bool]:
    """A delivery's wait (``wait_of``) as ``find``'s and ``history``'s keys: a wait
    (``awaiting``: not a retry) and, of those, one for 1C's other price type (``awaiting_1c``)
    or for a person's decision on the quarantined main price (``awaiting_person``)."""
    return {
        "awaiting": bool(wait),
        "awaiting_1c": wait == "1c",
        "awaiting_person": wait == "person",
    }


def awaiting_in_story(
    rows: Iterable[tuple[Any, str, str | None, str | None, str | None]],
) -> list[tuple[Wait, Wait]]:
    """The same rule read along a history (``exchange history``, the report's biography):
    for each row (its channel, event, from-state, to-state and error class, oldest first)
    what its from-state and its to-state, where ``delayed``, wait for: the channel, 1C or a
    person (the last delaying event's error class, as ``wait_of`` reads it), or nothing but a
    retry (""): the last of the two delaying events on the row's channel up to it says
    which."""
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
    return _NOT_ON_CHANNEL.get(last[1] or "", "channel")


def awaiting_in_biography(story: Iterable[dict[str, Any]]) -> list[tuple[Wait, Wait]]:
    """``awaiting_in_story`` of a biography's history (``ops.status.biography``'s entries, by
    their channel's name): what ``exchange history`` and the workbench's history say of each
    row's delayed from- and to-state, a wait for the marketplace, for 1C, for a person, or a
    retry."""
    return awaiting_in_story(
        (e.get("channel"), e["event"], e["from"], e["to"], e.get("error_class")) for e in story
    )


def waiting_on(connection: Connection, message_id: str, channel_id: Any) -> list[dict[str, Any]]:
    """The prices on ``channel_id`` that wait for a person's decision on the quarantined
    ``message_id`` (``wait_of`` "person", their wait naming it: ``targets.marketplace.items``'
    words name the quarantined entry's message_id), oldest first: what ``exchange history`` of
    the quarantined entry says waits beside it (review words35b item 1: its words said "1C has
    sent none of it" while 1C's old price waited for the decision)."""
    if channel_id is None:
        return []
    d, m = deliveries, messages
    rows = connection.execute(
        select(m.c.message_id, m.c.aggregate, m.c.version)
        .join(m, d.c.message_pk == m.c.id)
        .where(
            d.c.channel_id == channel_id,
            d.c.state == State.DELAYED.value,
            d.c.last_error.contains(message_id, autoescape=True),
            wait_of(d.c.message_pk, d.c.channel_id, d.c.state) == "person",
        )
        .order_by(m.c.id)
    ).mappings()
    return [dict(r) for r in rows]

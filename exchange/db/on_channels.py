"""What the operator's surfaces read of deliveries (issue 31, step 3; contract 13).

A message's delivery state is per channel (``deliveries``), an aggregate's cursor too
(``channel_aggregates``); ``messages`` keeps what intake decided, and a *rejected record's* own
state and reason (no channel ever receives a record: it is listed as it always was). Every
reader of ``status``, the lists, ``find``, the report, ``prune``, the metrics and the
workbench reads delivery state here, through one of two things:

- ``channel_ids``: the channels a filter names (an id, a name, or None for every channel
  registered), resolved once into ids, so that a list walks the channel-first indexes of
  ``deliveries`` (``channel_id = :id`` keeps the walk in order; a subquery would not);
- ``listed``: one row per delivery on those channels, with the message's columns and the
  delivery's under the names ``messages`` gives them (``id`` is the message's), and, beside
  them, one row per rejected record with its own state (``channel_id`` NULL): what a list of
  messages by state shows.

With one channel a delivery is its message's one delivery, so what each surface shows is what
it showed when it read ``messages``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Select,
    cast,
    exists,
    false,
    func,
    literal,
    not_,
    null,
    select,
    union_all,
)
from sqlalchemy.sql.selectable import Subquery

from exchange.db.schema import DELIVERY_COLUMNS, channels, deliveries, messages
from exchange.domain.states import State
from exchange.errors import OperatorError

# A channel filter: a channel's id, its name, or None for every channel.
Channel = int | str | None
# A condition on a message's id column (``listed``'s ``of``), or None for every message.
Of = Callable[[Any], ColumnElement[bool]] | None
# The copies a delivery keeps of its message (immutable), read from the delivery: the
# indexes of ``deliveries`` are on them.
_COPIED = ("aggregate_id", "kind", "version")
# The columns of ``messages``, by name, in order.
# A listed row's columns: the message's own, then a delivery's (migration 0026 dropped the
# one channel's copy from ``messages``; a rejected record has its own state, reason, error
# and time there, and none of the others).
_NAMES = tuple(column.name for column in messages.c) + tuple(
    name for name in DELIVERY_COLUMNS if name not in messages.c
)
# The states a rejected record can be in: a list of any other state has no record in it.
RECORD_STATES = (State.QUARANTINED.value, State.CANCELLED.value)


def channel_ids(connection: Connection, channel: Channel = None) -> list[int]:
    """The ids of the channels ``channel`` names: every channel registered (a dropped one's
    deliveries stay its own) for None; else the channel of that id, or the channel not dropped
    of that name (a dropped one's, when no live channel has it). A name or id that is no
    channel is refused with the channels there are, never read as a filter matching nothing."""
    rows = connection.execute(
        select(channels.c.id, channels.c.name, channels.c.dropped_at).order_by(channels.c.id)
    ).all()
    if channel is None:
        return [row.id for row in rows]
    if isinstance(channel, int) and not isinstance(channel, bool):
        found = [row.id for row in rows if row.id == channel]
    else:
        named = [row for row in rows if row.name == str(channel)]
        live = [row.id for row in named if row.dropped_at is None]
        found = live or [row.id for row in named[-1:]]
    if not found:
        names = ", ".join(sorted({row.name for row in rows if row.dropped_at is None}))
        raise OperatorError(f"unknown channel {channel!r}: one of {names or '-'}")
    return found


def account_ids(connection: Connection, channel: Channel = None) -> list[int]:
    """The channels whose sends count against one marketplace account's limits with
    ``channel``'s (Ozon's 10 updates of a product an hour, research §1.3), and whose sends may
    still land on its goods (an Ozon send whose answer was lost, a Yandex update not shown
    yet): ``channel_ids``'s, and every channel of the same name and target dropped before
    (review ozon 34b: a channel dropped and added again under its name would forget the hour's
    sends of the account; review ozon 35: the dropped one's lost send landed over its price).
    The registry keeps no account (Ozon's Client-Id is the configuration's), so the name is
    what ties them: two channels of different names on one account are counted apart."""
    ids = channel_ids(connection, channel)
    if channel is None:
        return ids
    rows = connection.execute(
        select(channels.c.id, channels.c.name, channels.c.target).order_by(channels.c.id)
    ).all()
    named = {(row.name, row.target) for row in rows if row.id in ids}
    return [row.id for row in rows if row.id in ids or (row.name, row.target) in named]


def channel_names(connection: Connection) -> dict[int, str]:
    """Every registered channel's name, by id: what a surface prints beside a delivery."""
    return {row.id: row.name for row in connection.execute(select(channels.c.id, channels.c.name))}


def removed_at(connection: Connection) -> dict[int, str]:
    """Each dropped channel's id and when it was dropped (ISO 8601): a surface names a
    dropped channel's delivery as of a removed channel, never under its bare name, which a
    channel added again later has too (review ozon 34b)."""
    rows = connection.execute(
        select(channels.c.id, channels.c.dropped_at).where(channels.c.dropped_at.is_not(None))
    )
    return {row.id: _utc_iso(row.dropped_at) for row in rows}


def _utc_iso(moment: Any) -> str:
    return str(moment.isoformat() if moment.tzinfo else moment.replace(tzinfo=UTC).isoformat())


def channel_targets(connection: Connection) -> dict[str, str]:
    """Each channel registered and not dropped, its target by its name (oldest first): what
    the words count and name (``words.channels_named``, ``words.channel_subject``)."""
    rows = connection.execute(
        select(channels.c.name, channels.c.target)
        .where(channels.c.dropped_at.is_(None))
        .order_by(channels.c.id)
    )
    return {row.name: row.target for row in rows}


def targets_by_id(connection: Connection) -> dict[int, str]:
    """Each channel ever registered (dropped too: its deliveries stay), its target by its id:
    what a row's words need to tell a marketplace from a site (``words.on_marketplace``)."""
    return {
        row.id: row.target for row in connection.execute(select(channels.c.id, channels.c.target))
    }


def on(column: Any, ids: Sequence[int]) -> ColumnElement[bool]:
    """``column`` (a ``channel_id``) is one of ``ids``: an equality for one (a walk of a
    channel-first index stays in order), IN for several, false for none."""
    if not ids:
        return false()
    if len(ids) == 1:
        equal: ColumnElement[bool] = column == ids[0]
        return equal
    within: ColumnElement[bool] = column.in_(list(ids))
    return within


def _message_column(name: str) -> Any:
    """A column of ``listed``'s deliveries part: the delivery's for a delivery column (and
    the copies), the message's otherwise; ``id`` is the delivery's ``message_pk``."""
    if name == "id":
        return deliveries.c.message_pk.label("id")
    if name in DELIVERY_COLUMNS or name in _COPIED:
        return deliveries.c[name].label(name)
    return messages.c[name].label(name)


def accepted(ids: Sequence[int], of: Of = None) -> Select[Any]:
    """The deliveries on ``ids`` with their messages' columns, under ``messages``' names, and
    ``channel_id``; of the messages ``of`` selects (a condition on a message's id column)."""
    query = (
        select(*(_message_column(name) for name in _NAMES), deliveries.c.channel_id)
        .select_from(deliveries.join(messages, messages.c.id == deliveries.c.message_pk))
        .where(on(deliveries.c.channel_id, ids))
    )
    return query if of is None else query.where(of(deliveries.c.message_pk))


def _record_column(name: str) -> Any:
    """A column of ``listed``'s records part: the message's own, 0 attempts (as a record
    always showed: never sent), NULL for the other delivery columns a record does not have
    (no lease, no rank)."""
    if name in messages.c:
        return messages.c[name]
    if name == "attempts":
        return cast(literal(0), deliveries.c[name].type).label(name)
    return cast(null(), deliveries.c[name].type).label(name)


def records(of: Of = None) -> Select[Any]:
    """The rejected records, each with its own state (``channel_id`` NULL: no channel); of the
    messages ``of`` selects."""
    query = select(
        *(_record_column(name) for name in _NAMES),
        literal(None, Integer).label("channel_id"),
    ).where(messages.c.rejected)
    return query if of is None else query.where(of(messages.c.id))


def undelivered(of: Of = None) -> Select[Any]:
    """The accepted messages with no delivery on any channel (a kind no channel took when
    it came in, ``attention.no_channel``), each as a record is listed: its own columns, no
    state, ``channel_id`` NULL; of the messages ``of`` selects. Each is probed in
    ``deliveries`` by its primary key's first column (``message_pk``)."""
    query = select(
        *(_record_column(name) for name in _NAMES),
        literal(None, Integer).label("channel_id"),
    ).where(
        not_(messages.c.rejected),
        ~exists().where(deliveries.c.message_pk == messages.c.id),
    )
    return query if of is None else query.where(of(messages.c.id))


def listed(
    ids: Sequence[int],
    *,
    states: Sequence[str] | None = None,
    name: str = "listed",
    of: Of = None,
    homeless: bool = False,
) -> Subquery:
    """A message as a list shows it: a row per delivery on ``ids``, and a row per rejected
    record unless ``states`` (the states listed) holds none a record can be in. Without the
    records it is a plain join, which both databases flatten into the outer query.

    ``of``: a condition on a message's id (``find.matching``: a set of ids) put inside each
    part, where the indexes serve it; SQLite does not push a condition with a subquery into a
    compound subquery from outside, and would read every delivery (measured: ``find`` at 60,000
    messages 37 ms on ``messages``, 100 ms with the condition outside).

    ``homeless``: and a row per accepted message with no delivery on any channel
    (``undelivered``, no state), for ``find`` and ``history``, which look for one message
    (contract 1: a message no channel takes is kept, never invisible); never with ``states``
    (it is in none)."""
    deliveries_part = accepted(ids, of)
    if states is not None and not set(states) & set(RECORD_STATES):
        return deliveries_part.subquery(name)
    parts = [deliveries_part, records(of)]
    if homeless and states is None:
        parts.append(undelivered(of))
    return union_all(*parts).subquery(name)


def by_state_and_reason(
    connection: Connection, ids: Sequence[int] | None = None
) -> dict[tuple[str, str | None], int]:
    """How many deliveries on the channels ``ids`` (every channel for None), grouped by
    channel inside, and rejected records there are in each (state, reason)."""
    on_channels = channel_ids(connection) if ids is None else ids
    counted: dict[tuple[str, str | None], int] = {}
    rows = list(
        connection.execute(
            select(deliveries.c.channel_id, deliveries.c.state, deliveries.c.reason, func.count())
            .where(on(deliveries.c.channel_id, on_channels))
            .group_by(deliveries.c.channel_id, deliveries.c.state, deliveries.c.reason)
        )
    )
    rows += connection.execute(
        select(literal(None), messages.c.state, messages.c.reason, func.count())
        .where(messages.c.rejected)
        .group_by(messages.c.state, messages.c.reason)
    ).all()
    for _channel, state, reason, count in rows:
        counted[(state, reason)] = counted.get((state, reason), 0) + int(count)
    return counted

"""The ``withheld`` state's SQL (contract 13): the channel took a price and withholds it from
buyers until a person confirms it.

A withheld delivery holds no lease and is not in flight, so a newer version of its aggregate
is claimed and sent as usual (it is live for order: ``states.LIVE``, so an older version is
superseded by it, never sent after it). It ends one of two ways, both moved here through
``transitions``:

    withheld ──withheld-live──> delivered     the channel shows that version (``went_live``);
                                              the cursor advances to it
    withheld ──superseded──> cancelled         a newer version was delivered there
                                              (``supersede_delivered``) or withheld there
                                              instead (``supersede_withheld``), or the channel
                                              released it at another price, the seller's
                                              own (``left_elsewhere``): it never reached
                                              buyers

A person's release (``released``) is a history row with the operator and the note; the state
moves when the channel shows the version live. Everything here reads a channel's
``deliveries`` and ``channel_aggregates`` (issue 31, step 3); ``transitions`` writes the old
columns beside for the one channel until step 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    case,
    exists,
    func,
    literal,
    select,
    update,
)

from exchange.db.rowset import rowset
from exchange.db.schema import channel_aggregates, deliveries, history, messages
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.queue.deliveries import one_channel
from exchange.queue.transitions import Change, apply, apply_selected

# At most this many withheld deliveries are read for one check or one release.
READ_AT_MOST = 500


@dataclass(frozen=True, slots=True)
class Withheld:
    """One withheld delivery as the hooks and the operator's commands need it."""

    pk: int
    message_id: str
    kind: str
    aggregate: str
    aggregate_id: int
    version: int
    payload: str
    created_at: datetime
    withheld_at: datetime
    said: str | None  # what the channel answered (``last_error``): its own words
    channel_id: int
    # The delivery's receipt (e.g. Yandex Market's ``ym-accepted:`` with the item as sent): a
    # release compares what the channel withholds with what this delivery carried.
    receipt: str | None = None


def _columns() -> tuple[Any, ...]:
    m, d = messages.c, deliveries.c
    return (
        m.id,
        m.message_id,
        m.kind,
        m.aggregate,
        m.aggregate_id,
        m.version,
        m.payload,
        m.created_at,
        d.updated_at,
        d.last_error,
        d.channel_id,
        d.receipt,
    )


def _of_channel(connection: Connection, channel_id: int | None) -> int:
    return one_channel(connection) if channel_id is None else channel_id


def waiting(
    connection: Connection,
    *,
    channel_id: int | None = None,
    after: int = 0,
    limit: int = READ_AT_MOST,
) -> list[Withheld]:
    """The channel's withheld deliveries (None: the one channel's), oldest message first,
    from the message ``pk`` ``after`` on (the periodic check reads them page by page)."""
    channel = _of_channel(connection, channel_id)
    query = (
        select(*_columns())
        .join(messages, messages.c.id == deliveries.c.message_pk)
        .where(
            deliveries.c.channel_id == channel,
            deliveries.c.state == State.WITHHELD.value,
            deliveries.c.message_pk > after,
        )
        .order_by(deliveries.c.message_pk)
        .limit(limit)
    )
    return [Withheld(*row) for row in connection.execute(query)]


def on_every_channel(
    connection: Connection,
    *,
    limit: int | None = READ_AT_MOST,
    channel_ids: Sequence[int] | None = None,
) -> list[Withheld]:
    """The withheld deliveries of every channel (``exchange status``'s list, issue 32), oldest
    message first, each with its ``channel_id``; the first ``limit`` (None: all of them,
    ``exchange withheld list``); ``channel_ids``: of those channels only (``withheld list
    --channel``), every channel's for None."""
    query = (
        select(*_columns())
        .join(messages, messages.c.id == deliveries.c.message_pk)
        .where(
            deliveries.c.state == State.WITHHELD.value,
            *(() if channel_ids is None else (deliveries.c.channel_id.in_(list(channel_ids)),)),
        )
        .order_by(deliveries.c.message_pk, deliveries.c.channel_id)
        .limit(limit)
    )
    return [Withheld(*row) for row in connection.execute(query)]


def named(
    connection: Connection, message_ids: Sequence[str], *, channel_id: int | None = None
) -> dict[str, Withheld | str]:
    """Each of ``message_ids`` on the channel (None: the one channel): its withheld delivery,
    or its state there when it is not withheld (``"missing"`` when there is no such message
    or the channel has no delivery of it)."""
    channel = _of_channel(connection, channel_id)
    found: dict[str, Withheld | str] = dict.fromkeys(message_ids, "missing")
    rows = connection.execute(
        select(*_columns(), deliveries.c.state)
        .join(messages, messages.c.id == deliveries.c.message_pk)
        .where(messages.c.message_id.in_(list(message_ids)), deliveries.c.channel_id == channel)
    ).all()
    for row in rows:
        state = row[-1]
        found[row.message_id] = Withheld(*row[:-1]) if state == State.WITHHELD.value else state
    return found


@dataclass(frozen=True, slots=True)
class Newer:
    """The newest version of a withheld delivery's aggregate on its channel, when newer."""

    message_id: str
    version: int
    state: str
    said: str | None  # its delivery's last words (``last_error``)
    receipt: str | None = None  # its delivery's receipt (Yandex Market's ``ym-accepted:``…)


def newest_newer(connection: Connection, rows: Sequence[Withheld]) -> dict[str, Newer]:
    """For each of ``rows`` whose aggregate has a newer version on the same channel that is not
    cancelled (sent, in doubt, waiting, withheld or quarantined): that newest version, by the
    withheld row's ``message_id``."""
    m, d = messages.c, deliveries.c
    by_channel: dict[int, set[int]] = {}
    for w in rows:
        by_channel.setdefault(w.channel_id, set()).add(w.aggregate_id)
    newest: dict[tuple[int, int], Newer] = {}
    for channel, aggregates in by_channel.items():
        found = connection.execute(
            select(m.aggregate_id, m.version, m.message_id, d.state, d.last_error, d.receipt)
            .join(deliveries, d.message_pk == m.id)
            .where(
                d.channel_id == channel,
                m.aggregate_id.in_(sorted(aggregates)),
                d.state != State.CANCELLED.value,
            )
        )
        for aggregate_id, version, message_id, state, said, receipt in found:
            key = (channel, int(aggregate_id))
            if key not in newest or newest[key].version < int(version):
                newest[key] = Newer(str(message_id), int(version), str(state), said, receipt)
    newer: dict[str, Newer] = {}
    for w in rows:
        found_newer = newest.get((w.channel_id, w.aggregate_id))
        if found_newer is not None and found_newer.version > w.version:
            newer[w.message_id] = found_newer
    return newer


def unknown(connection: Connection, message_ids: Sequence[str]) -> list[str]:
    """Those of ``message_ids`` that are no message at all (in the order given): a release
    names them as no such message, never as withheld on no channel."""
    known = set(
        connection.execute(
            select(messages.c.message_id).where(messages.c.message_id.in_(list(message_ids)))
        ).scalars()
    )
    return [i for i in message_ids if i not in known]


def counted(connection: Connection, channel_ids: Sequence[int] | None = None) -> int:
    """How many deliveries are withheld on every channel (on ``channel_ids``' only where
    given: ``status --channel``): what ``exchange status``'s list of the first ``SHOWN``
    leaves out is said as «и ещё N»."""
    query = (
        select(func.count())
        .select_from(deliveries)
        .where(deliveries.c.state == State.WITHHELD.value)
    )
    if channel_ids is not None:
        query = query.where(deliveries.c.channel_id.in_(list(channel_ids)))
    return int(connection.execute(query).scalar_one())


def withheld_on(connection: Connection, message_ids: Sequence[str]) -> list[int]:
    """The channels (ids, ascending) where any of ``message_ids`` is withheld: a release that
    names no channel acts on the one there is, and asks which where there are several."""
    rows = connection.execute(
        select(deliveries.c.channel_id)
        .join(messages, messages.c.id == deliveries.c.message_pk)
        .where(
            messages.c.message_id.in_(list(message_ids)),
            deliveries.c.state == State.WITHHELD.value,
        )
        .distinct()
    )
    return sorted(int(row[0]) for row in rows)


def any_waiting(connection: Connection, channel_id: int) -> bool:
    """Whether any delivery of the channel is withheld (one read of the channel's state
    index): the record of a batch looks for withheld versions to supersede only then."""
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    found = connection.exec_driver_sql(_ANY_WITHHELD.format(mark=mark), (channel_id,)).first()
    return found is not None


# The record of every batch asks it once, so it is the driver's own text: a select() built per
# call cost ~0.2 ms of SQLAlchemy's work on the loaded bench machine, a text() ~0.07 ms, this
# ~0.02 ms (0.2 us a message of a batch of 100). A literal state: the state index's search.
_ANY_WITHHELD = (
    "SELECT message_pk FROM deliveries WHERE channel_id = {mark} "
    f"AND state = '{State.WITHHELD.value}' LIMIT 1"
)


def strict_taken(decision: Decision) -> Decision:
    """A channel's ``withheld`` for a strictly ordered kind, which has no such state (contract
    13: coalescing kinds only): the channel took it, so it is delivered and order goes on."""
    return replace(decision, event=Event.DELIVERED, to_state=State.DELIVERED)


def went_live(
    connection: Connection,
    shown: Sequence[Withheld],
    now: datetime,
    *,
    detail: str = "the channel shows this version to buyers",
    operator: str | None = None,
    note: str | None = None,
) -> list[Withheld]:
    """The channel shows these versions to buyers: each delivery ends ``delivered`` (guarded:
    one that moved meanwhile is left as it is), its aggregate's cursor on that channel
    advances to it, and withheld versions below it are superseded. Returns those that ended
    delivered."""
    if not shown:
        return []
    live = _still_withheld(connection, shown)
    apply(
        connection,
        [
            Change(
                w.pk,
                Event.WITHHELD_LIVE,
                State.WITHHELD,
                State.DELIVERED,
                values={"last_error": None},
                detail=detail,
                operator=operator,
                note=note,
                channel_id=w.channel_id,
            )
            for w in live
        ],
        now,
    )
    for w in live:
        cursor = channel_aggregates.c
        connection.execute(
            update(channel_aggregates)
            .where(
                cursor.aggregate_id == w.aggregate_id,
                cursor.channel_id == w.channel_id,
                cursor.done_version < w.version,
            )
            .values(done_version=w.version)
        )
    for channel in sorted({w.channel_id for w in live}):
        ids = sorted({w.aggregate_id for w in live if w.channel_id == channel})
        supersede_delivered(connection, ids, now, channel_id=channel)
    return live


def _still_withheld(connection: Connection, shown: Sequence[Withheld]) -> list[Withheld]:
    """Those of ``shown`` whose delivery is still withheld (one that moved meanwhile, by a
    newer version or another worker, is left as it is)."""
    still = {
        (pk, channel)
        for pk, channel in connection.execute(
            select(deliveries.c.message_pk, deliveries.c.channel_id).where(
                deliveries.c.message_pk.in_([w.pk for w in shown]),
                deliveries.c.state == State.WITHHELD.value,
            )
        )
    }
    return [w for w in shown if (w.pk, w.channel_id) in still]


# How a person's release the channel did not carry out begins (``delivery.withheld``'s
# ``_release_detail``): the history row is the ask, never a release.
NOT_RELEASED = "not released by the channel: "


LEFT_ELSEWHERE = (
    "the channel no longer withholds this version and shows buyers another price (set where "
    "the channel is managed, e.g. the seller's cabinet): it never reached buyers; superseded "
    "on the channel. Send a new price from 1C if the channel's is wrong"
)


REPLACED_THERE = (
    "the channel's price quarantine now holds another price for the good in this version's "
    "place (a newer upload replaced it there): it will never reach buyers; superseded on the "
    "channel"
)


def left_elsewhere(
    connection: Connection,
    shown: Sequence[Withheld],
    now: datetime,
    *,
    detail: str = LEFT_ELSEWHERE,
) -> list[Withheld]:
    """The channel released these versions at another price than theirs (or, ``detail``
    ``REPLACED_THERE``, holds another price in their place): each delivery ends
    ``cancelled``, reason ``superseded`` (guarded: one that moved meanwhile is left as it is);
    no cursor moves (nothing of ours was delivered). Returns those that ended."""
    if not shown:
        return []
    gone = _still_withheld(connection, shown)
    apply(
        connection,
        [
            Change(
                w.pk,
                Event.SUPERSEDED,
                State.WITHHELD,
                State.CANCELLED,
                values={"reason": Reason.SUPERSEDED.value, "last_error": detail},
                detail=detail,
                channel_id=w.channel_id,
            )
            for w in gone
        ],
        now,
    )
    return gone


def _released_by_channel() -> ColumnElement[bool]:
    """True for a withheld delivery a person released and the channel carried it out
    (``released``: its detail is the channel's answer; one it did not carry out says "not
    released by the channel"): the version went to buyers before a newer one replaced it,
    never "withheld" to its end (review 33; rev32p: also when the newer one is withheld)."""
    d = deliveries.c
    asked = history.alias("asked")
    return exists(
        select(asked.c.id).where(
            asked.c.message_pk == d.message_pk,
            asked.c.channel_id == d.channel_id,
            asked.c.event == Event.OPERATOR_RELEASE.value,
            asked.c.detail.not_like(NOT_RELEASED + "%"),
        )
    )


def _superseded_columns(successor: Any) -> tuple[ColumnElement[Any], ...]:
    """What both supersede paths select of a withheld delivery (``apply_selected``'s
    columns), its successor's message id, and whether a person's release of it was carried
    out (``_released_by_channel``)."""
    d = deliveries.c
    return (
        d.message_pk.label("id"),
        d.channel_id,
        d.state,
        d.locked_by,
        d.attempts,
        d.leased_at,
        d.locked_until,
        successor.c.message_id.label("successor"),
        case((_released_by_channel(), 1), else_=0).label("released"),
    )


def _cancel_superseded(
    connection: Connection, chosen: Select[Any], now: datetime, *, released: str, plain: str
) -> int:
    """Cancel, reason ``superseded``, what ``chosen`` (``_superseded_columns``) selects; its
    detail: ``released`` for a version a person's release put live, else ``plain``, then the
    successor's id."""
    return apply_selected(
        connection,
        Event.SUPERSEDED,
        chosen,
        now=now,
        values=lambda c: {"reason": Reason.SUPERSEDED.value, "superseded_by": c.c.successor},
        detail=lambda c: (
            case((c.c.released == 1, literal(released)), else_=literal(plain))
            + func.coalesce(c.c.successor, literal("a newer version"))
        ),
    )


def supersede_delivered(
    connection: Connection, aggregate_ids: Sequence[int], now: datetime, *, channel_id: int
) -> int:
    """Cancel, reason ``superseded``, every withheld version of these aggregates on the
    channel at or below the version delivered there (its cursor): a newer version reached
    buyers, so this one never will. Called where a cursor advances (``record``,
    ``went_live``)."""
    if not aggregate_ids:
        return 0
    d, cursor = deliveries.c, channel_aggregates.c
    newest = deliveries.alias("newest")
    successor = messages.alias("successor")
    chosen = (
        select(*_superseded_columns(successor), cursor.done_version.label("done"))
        .join(
            channel_aggregates,
            and_(cursor.aggregate_id == d.aggregate_id, cursor.channel_id == d.channel_id),
        )
        .outerjoin(
            newest,
            and_(
                newest.c.aggregate_id == d.aggregate_id,
                newest.c.channel_id == d.channel_id,
                newest.c.version == cursor.done_version,
            ),
        )
        .outerjoin(successor, successor.c.id == newest.c.message_pk)
        .where(
            d.channel_id == channel_id,
            d.aggregate_id.in_(list(aggregate_ids)),
            d.state == State.WITHHELD.value,
            d.version < cursor.done_version,
        )
    )
    return _cancel_superseded(
        connection,
        chosen,
        now,
        released="withheld, then released to buyers at a person's ask, and a newer version was "
        "delivered: superseded by ",
        plain="withheld, and a newer version was delivered: superseded by ",
    )


def supersede_withheld(
    connection: Connection, newer: dict[int, int], now: datetime, *, channel_id: int
) -> int:
    """Cancel, reason ``superseded``, every withheld version of these aggregates on the
    channel below the version just withheld there (``newer``: aggregate id -> that version):
    the channel's quarantine lists the newer price now (a marketplace's holds one price an
    offer, research §2.4, §3.4), so the older one is no longer withheld and never reaches
    buyers; a release publishes the newer. Review ym400 finding 4: the older stayed withheld
    and counted. One statement for the batch (a rowset of aggregate and version). Called where
    a batch is recorded (``record``)."""
    if not newer:
        return 0
    d = deliveries.c
    newest_withheld, params = rowset(
        connection,
        "withheld_newer",
        (("a_id", d.aggregate_id.type), ("a_version", d.version.type)),
        sorted(newer.items()),
        name="withheld_newer",
    )
    successor = messages.alias("successor")
    newest = deliveries.alias("newest")
    chosen = (
        select(*_superseded_columns(successor))
        .join(
            newest_withheld,
            and_(
                newest_withheld.c.a_id == d.aggregate_id,
                d.version < newest_withheld.c.a_version,
            ),
        )
        .outerjoin(
            newest,
            and_(
                newest.c.aggregate_id == d.aggregate_id,
                newest.c.channel_id == d.channel_id,
                newest.c.version == newest_withheld.c.a_version,
            ),
        )
        .outerjoin(successor, successor.c.id == newest.c.message_pk)
        .where(d.channel_id == channel_id, d.state == State.WITHHELD.value)
        .params(**params)
    )
    return _cancel_superseded(
        connection,
        chosen,
        now,
        released="withheld, then released to buyers at a person's ask, and the channel "
        "withholds a newer version instead: superseded by ",
        plain="withheld, and the channel withholds a newer version instead: superseded by ",
    )


def released(
    connection: Connection,
    rows: Sequence[tuple[Withheld, str]],
    now: datetime,
    *,
    operator: str,
    note: str,
) -> None:
    """A person asked the channel to release these (``rows``: each with what the channel
    answered, or where the seller must act): one history row each, no change of state."""
    apply(
        connection,
        [
            Change(
                w.pk,
                Event.OPERATOR_RELEASE,
                State.WITHHELD,
                None,  # history only: the state moves when the channel shows it
                detail=said,
                operator=operator,
                note=note,
                channel_id=w.channel_id,
            )
            for w, said in rows
        ],
        now,
    )

"""The ``withheld`` state's SQL (contract 13): the channel took a price and withholds it from
buyers until a person confirms it.

A withheld delivery holds no lease and is not in flight, so a newer version of its aggregate
is claimed and sent as usual (it is live for order: ``states.LIVE``, so an older version is
superseded by it, never sent after it). It ends one of two ways, both moved here through
``transitions``:

    withheld ──withheld-live──> delivered     the channel shows that version (``went_live``);
                                              the cursor advances to it
    withheld ──superseded──> cancelled         a newer version was delivered there
                                              (``supersede_delivered``): it never reached
                                              buyers

A person's release (``released``) is a history row with the operator and the note; the state
moves when the channel shows the version live. Until the readers move to ``deliveries`` (issue
31, step 3), every change is written to both copies as ``transitions`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, literal, not_, select, update

from exchange.db.schema import aggregates, channel_aggregates, messages
from exchange.domain.reasons import Reason
from exchange.domain.retry import Decision
from exchange.domain.states import Event, State
from exchange.queue.deliveries import on_the_channel
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


def _columns() -> tuple[Any, ...]:
    m = messages.c
    return (
        m.id,
        m.message_id,
        m.kind,
        m.aggregate,
        m.aggregate_id,
        m.version,
        m.payload,
        m.created_at,
        m.updated_at,
        m.last_error,
    )


def _rows(connection: Connection, query: Any) -> list[Withheld]:
    return [Withheld(*row) for row in connection.execute(query)]


def waiting(connection: Connection, *, after: int = 0, limit: int = READ_AT_MOST) -> list[Withheld]:
    """The withheld deliveries, oldest message first, from the message ``pk`` ``after`` on
    (the periodic check reads them page by page)."""
    query = (
        select(*_columns())
        .where(
            messages.c.state == State.WITHHELD.value,
            not_(messages.c.rejected),
            messages.c.id > after,
        )
        .order_by(messages.c.id)
        .limit(limit)
    )
    return _rows(connection, query)


def named(connection: Connection, message_ids: Sequence[str]) -> dict[str, Withheld | str]:
    """Each of ``message_ids``: its withheld delivery, or its state when it is not withheld
    (``"missing"`` when there is no such message)."""
    found: dict[str, Withheld | str] = dict.fromkeys(message_ids, "missing")
    rows = connection.execute(
        select(*_columns(), messages.c.state).where(messages.c.message_id.in_(list(message_ids)))
    ).all()
    for row in rows:
        state = row[-1]
        found[row.message_id] = Withheld(*row[:-1]) if state == State.WITHHELD.value else state
    return found


def any_waiting(connection: Connection) -> bool:
    """Whether any delivery is withheld (one read of the state index): the record of a batch
    looks for withheld versions to supersede only then."""
    return connection.exec_driver_sql(_ANY_WITHHELD).first() is not None


# The record of every batch asks it once, so it is the driver's own text: a select() built per
# call cost ~0.2 ms of SQLAlchemy's work on the loaded bench machine, a text() ~0.07 ms, this
# ~0.02 ms (0.2 us a message of a batch of 100). A literal state: the state index's search.
_ANY_WITHHELD = f"SELECT id FROM messages WHERE state = '{State.WITHHELD.value}' LIMIT 1"


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
    one that moved meanwhile is left as it is), its aggregate's cursor advances to it, and
    withheld versions below it are superseded. Returns those that ended delivered."""
    if not shown:
        return []
    still = {
        pk
        for (pk,) in connection.execute(
            select(messages.c.id).where(
                messages.c.id.in_([w.pk for w in shown]),
                messages.c.state == State.WITHHELD.value,
            )
        )
    }
    live = [w for w in shown if w.pk in still]
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
            )
            for w in live
        ],
        now,
    )
    for w in live:
        for table in (aggregates, channel_aggregates):
            key = aggregates.c.id if table is aggregates else channel_aggregates.c.aggregate_id
            condition = and_(key == w.aggregate_id, table.c.done_version < w.version)
            if table is channel_aggregates:
                condition = and_(condition, on_the_channel(channel_aggregates))
            connection.execute(update(table).where(condition).values(done_version=w.version))
    supersede_delivered(connection, sorted({w.aggregate_id for w in live}), now)
    return live


def supersede_delivered(connection: Connection, aggregate_ids: Sequence[int], now: datetime) -> int:
    """Cancel, reason ``superseded``, every withheld version of these aggregates at or below
    the version delivered there (the cursor): a newer version reached buyers, so this one
    never will. Called where a cursor advances (``record``, ``went_live``)."""
    if not aggregate_ids:
        return 0
    newest = messages.alias("newest")
    chosen = (
        select(
            messages.c.id,
            messages.c.state,
            messages.c.locked_by,
            messages.c.attempts,
            messages.c.leased_at,
            messages.c.locked_until,
            aggregates.c.done_version.label("done"),
            newest.c.message_id.label("successor"),
        )
        .join(aggregates, aggregates.c.id == messages.c.aggregate_id)
        .outerjoin(
            newest,
            and_(
                newest.c.aggregate_id == aggregates.c.id,
                newest.c.version == aggregates.c.done_version,
                not_(newest.c.rejected),
            ),
        )
        .where(
            messages.c.aggregate_id.in_(list(aggregate_ids)),
            messages.c.state == State.WITHHELD.value,
            not_(messages.c.rejected),
            messages.c.version < aggregates.c.done_version,
        )
    )
    return apply_selected(
        connection,
        Event.SUPERSEDED,
        chosen,
        now=now,
        values=lambda c: {"reason": Reason.SUPERSEDED.value, "superseded_by": c.c.successor},
        detail=lambda c: (
            literal("withheld, and a newer version was delivered: superseded by ")
            + func.coalesce(c.c.successor, literal("a newer version"))
        ),
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
            )
            for w, said in rows
        ],
        now,
    )

"""``exchange prioritize`` (contract 6, issue 23): put waiting messages before any backlog.

An argument is a message_id where one exists, else a ``price`` aggregate (its waiting
message). Priority is the message's place in the claim order only (``claim_rank``, the rank
before the head: domain/urgency.py): the claim still takes it only when it is due
(``Retry-After``), in order (strict kinds) and while the pace, the breaker and a pause let a
worker claim; it belongs to that message, so a newer version goes in its own place. Recorded
in the message's history with the operator and the note.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, func, not_, select

from exchange.db.on_channels import Channel, channel_ids, listed, on
from exchange.db.schema import deliveries
from exchange.domain import urgency
from exchange.domain.states import DUE, Event, State, values
from exchange.errors import OperatorError
from exchange.queue import order
from exchange.queue.transitions import Change, apply


def prioritize(
    connection: Connection,
    arguments: Sequence[str],
    *,
    operator: str,
    note: str,
    now: datetime,
    channel: Channel = None,
) -> list[str]:
    """Give each argument's waiting message the place before everything waiting on each
    channel it waits on (``channel``: one, or None for every channel); returns their
    message_ids, in the order given (the last named goes first)."""
    if not note.strip():
        raise OperatorError("--note is required: say why these go first")
    if not arguments:
        raise OperatorError("name at least one message_id or price aggregate")
    ids = channel_ids(connection, channel)
    found = [_waiting(connection, argument, ids) for argument in arguments]
    # Each channel's claim order is its own: the head is the lowest rank waiting there.
    head: dict[int, int | None] = dict.fromkeys(ids)
    for channel_id, rank in connection.execute(
        select(deliveries.c.channel_id, func.min(deliveries.c.claim_rank))
        .where(order.claimable("deliveries"), on(deliveries.c.channel_id, ids))
        .group_by(deliveries.c.channel_id)
    ):
        head[channel_id] = rank
    changes = []
    for waiting in found:
        for pk, channel_id, _, state in waiting:
            head[channel_id] = urgency.prioritized(head.get(channel_id))
            changes.append(
                Change(
                    pk,
                    Event.OPERATOR_PRIORITIZE,
                    State(state),
                    State(state),
                    values={"claim_rank": head[channel_id]},
                    operator=operator,
                    note=note,
                    detail=f"put before the backlog by {operator}",
                    channel_id=channel_id,
                )
            )
    apply(connection, changes, now)
    return [waiting[0][2] for waiting in found]


def _waiting(
    connection: Connection, argument: str, ids: list[int]
) -> list[tuple[int, int, str, str]]:
    """(pk, channel_id, message_id, state) of each waiting delivery, on the channels ``ids``,
    of the message the argument names."""
    m = listed(ids, name="m")
    columns = select(m.c.id, m.c.channel_id, m.c.message_id, m.c.state, m.c.rejected)
    rows = connection.execute(
        columns.where(m.c.message_id == argument).order_by(m.c.channel_id)
    ).all()
    if not rows:
        newest = connection.execute(
            select(m.c.id)
            .where(m.c.kind == "price", m.c.aggregate == argument, not_(m.c.rejected))
            .where(m.c.state.in_(values(DUE)))
            .order_by(m.c.version.desc())
            .limit(1)
        ).scalar()
        if newest is None:
            raise OperatorError(
                f"{argument!r}: no message has this id, and no price of this aggregate is "
                "waiting (new or delayed)"
            )
        rows = connection.execute(columns.where(m.c.id == newest).order_by(m.c.channel_id)).all()
    waiting = [
        (pk, channel_id, message_id, state)
        for pk, channel_id, message_id, state, rejected in rows
        if not rejected and state in values(DUE)
    ]
    if not waiting:
        _pk, _channel, message_id, state, _rejected = rows[0]
        raise OperatorError(
            f"{message_id} is {state}: only a message waiting to be sent (new or delayed) "
            "can be put first"
        )
    return waiting

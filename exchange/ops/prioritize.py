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

from exchange.db.schema import messages
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
) -> list[str]:
    """Give each argument's waiting message the place before everything waiting; returns
    their message_ids, in the order given (the last named goes first)."""
    if not note.strip():
        raise OperatorError("--note is required: say why these go first")
    if not arguments:
        raise OperatorError("name at least one message_id or price aggregate")
    found = [_waiting(connection, argument) for argument in arguments]
    head = connection.execute(
        select(func.min(messages.c.claim_rank)).where(order.claimable("messages"))
    ).scalar()
    changes = []
    for pk, _, state in found:
        head = urgency.prioritized(head)
        changes.append(
            Change(
                pk,
                Event.OPERATOR_PRIORITIZE,
                State(state),
                State(state),
                values={"claim_rank": head},
                operator=operator,
                note=note,
                detail=f"put before the backlog by {operator}",
            )
        )
    apply(connection, changes, now)
    return [message_id for _, message_id, _ in found]


def _waiting(connection: Connection, argument: str) -> tuple[int, str, str]:
    """(pk, message_id, state) of the waiting message the argument names."""
    m = messages.c
    columns = select(m.id, m.message_id, m.state, m.rejected)
    row = connection.execute(columns.where(m.message_id == argument)).first()
    if row is None:
        row = connection.execute(
            columns.where(m.kind == "price", m.aggregate == argument, not_(m.rejected))
            .where(m.state.in_(values(DUE)))
            .order_by(m.version.desc())
            .limit(1)
        ).first()
        if row is None:
            raise OperatorError(
                f"{argument!r}: no message has this id, and no price of this aggregate is "
                "waiting (new or delayed)"
            )
    pk, message_id, state, rejected = row
    if rejected or state not in values(DUE):
        raise OperatorError(
            f"{message_id} is {state}: only a message waiting to be sent (new or delayed) "
            "can be put first"
        )
    return pk, message_id, state

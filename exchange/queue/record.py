"""The SQL that records a batch's outcomes and frees its lease (contract 4)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Select,
    bindparam,
    case,
    exists,
    not_,
    select,
    update,
)
from sqlalchemy.orm import aliased
from sqlalchemy.sql.dml import Update

from exchange.db.engine import is_postgres
from exchange.db.rowset import rowset_params, rowset_table
from exchange.db.schema import Message, aggregates, channel_aggregates, messages
from exchange.domain.policy import KindPolicies
from exchange.domain.retry import Decision
from exchange.domain.states import FINAL, Event, State, values
from exchange.failpoints import failpoint
from exchange.queue import order, withheld
from exchange.queue.deliveries import on_the_channel
from exchange.queue.lease import Leased, one_of
from exchange.queue.transitions import Change, apply


def record(
    connection: Connection,
    *,
    token: str,
    worker: str,
    now: datetime,
    outcomes: Sequence[tuple[Leased, Decision]],
    kinds: KindPolicies,
    release_all: bool = True,
) -> int:
    """Record the outcomes of a batch, only where this worker still holds the lease.

    Frees the lease's aggregates; with ``release_all=False`` only those of ``outcomes`` (part
    of a batch handed back while the rest is still in flight). Returns how many outcomes were
    recorded (others belong to a newer lease now).
    """
    ids = [leased.pk for leased, _ in outcomes]
    sql = _record_sql(is_postgres(connection))
    if sql.lock_aggregates is not None and ids:
        # The same lock order as claim: aggregates first, then messages. A claim that took an
        # expired aggregate over holds its row and then updates the message; locking the
        # message first here would deadlock with it.
        aggregate_ids = sorted({leased.aggregate_id for leased, _ in outcomes})
        connection.execute(sql.lock_aggregates, {"ids": aggregate_ids}).all()
    owned: dict[int, int] = (
        dict(connection.execute(sql.owned, {"ids": ids, "token": token}).all()) if ids else {}
    )
    changes: list[Change] = []
    advanced: dict[int, int] = {}
    for leased, decision in outcomes:
        if leased.pk not in owned:
            continue
        if decision.event is Event.WITHHELD and kinds.is_strict(leased.kind):
            decision = withheld.strict_taken(decision)  # withheld is for coalescing kinds
        # The decision (domain.retry) says whether this attempt counts and where it goes.
        attempts = owned[leased.pk] if decision.charged else owned[leased.pk] - 1
        to_state = decision.to_state
        values: dict[str, object] = {
            "attempts": attempts,
            "locked_by": None,
            "locked_until": None,
            "lease_token": None,
            "next_try_at": decision.next_try_at,
        }
        if decision.event is not Event.RELEASED:
            values["last_status"] = decision.http_status
            values["last_error"] = None if to_state is State.DELIVERED else decision.detail
        if decision.reason is not None:
            values["reason"] = decision.reason
        if decision.receipt is not None:
            values["receipt"] = decision.receipt
        detail = decision.detail
        if decision.result_unknown:
            detail = f"result-unknown: {detail}"
        changes.append(
            Change(
                leased.pk,
                decision.event,
                State.IN_PROGRESS,
                to_state,
                values=values,
                guard={"lease_token": token},
                worker=worker,
                attempt=leased.attempt,
                leased_at=leased.leased_at,
                http_status=decision.http_status,
                error_class=decision.error_class,
                detail=detail,
                delay_s=decision.delay_s,
            )
        )
        if decision.event is Event.DELIVERED:
            advanced[leased.aggregate_id] = max(
                advanced.get(leased.aggregate_id, 0), leased.version
            )
        if decision.event is Event.STALE_AT_SITE and decision.site_version is not None:
            # latest-wins: nothing at or below the site's version is worth sending. strict:
            # each later version still goes to the site in turn and gets its own answer, so
            # no posting is ever skipped on the strength of another one's 409.
            reached = leased.version if kinds.is_strict(leased.kind) else decision.site_version
            advanced[leased.aggregate_id] = max(advanced.get(leased.aggregate_id, 0), reached)
    apply(connection, changes, now)
    failpoint("record-applied")
    if advanced:
        params = rowset_params(connection, "advanced", _ADVANCED, advanced.items())
        connection.execute(sql.advance, params)
        connection.execute(sql.advance_on_channel, params)
        strict_advanced = sorted(
            {m.aggregate_id for m, _ in outcomes if kinds.is_strict(m.kind)} & set(advanced)
        )
        if strict_advanced:
            advance_strict(connection, strict_advanced, kinds)
        if withheld.any_waiting(connection):  # a newer version delivered ends a withheld one
            withheld.supersede_delivered(connection, sorted(advanced), now)
    recorded = sorted({leased.aggregate_id for leased, _ in outcomes if leased.pk in owned})
    release(connection, token, None if release_all else recorded)
    return len(changes)


_ADVANCED = (("a_id", aggregates.c.id.type), ("a_version", aggregates.c.done_version.type))


@dataclass(frozen=True, slots=True)
class _RecordSQL:
    """The recording's statements, built once per database (see _ClaimSQL)."""

    lock_aggregates: Select[Any] | None  # PostgreSQL: the claim's lock order (parameter: ids)
    owned: Select[Any]  # parameters: ids, token
    advance: Update  # parameter: advanced (a rowset of a_id, a_version)
    advance_on_channel: Update  # the same on the one channel's cursors


@functools.lru_cache(maxsize=4)
def _record_sql(postgres: bool) -> _RecordSQL:
    owned = select(messages.c.id, messages.c.attempts).where(
        one_of(messages.c.id, "ids", postgres),
        messages.c.lease_token == bindparam("token"),
        messages.c.state == State.IN_PROGRESS.value,
    )
    lock = (
        select(aggregates.c.id)
        .where(one_of(aggregates.c.id, "ids", postgres))
        .order_by(aggregates.c.id)
    )
    advanced = rowset_table(postgres, "advanced", _ADVANCED, "advanced")
    cursor = channel_aggregates.c.done_version
    return _RecordSQL(
        lock_aggregates=lock.with_for_update() if postgres else None,
        owned=owned.with_for_update() if postgres else owned,
        advance=update(aggregates)
        .where(aggregates.c.id == advanced.c.a_id)
        .values(
            done_version=case(
                (aggregates.c.done_version < advanced.c.a_version, advanced.c.a_version),
                else_=aggregates.c.done_version,
            )
        ),
        advance_on_channel=update(channel_aggregates)
        .where(
            channel_aggregates.c.aggregate_id == advanced.c.a_id,
            on_the_channel(channel_aggregates),
        )
        .values(
            done_version=case((cursor < advanced.c.a_version, advanced.c.a_version), else_=cursor)
        ),
    )


def release(connection: Connection, token: str, aggregate_ids: Sequence[int] | None = None) -> None:
    """Free the aggregates of a lease (the messages were recorded or handed back); with
    ``aggregate_ids``, only those (part of a batch handed back)."""
    if aggregate_ids is None:
        connection.execute(_RELEASE, {"token": token})
        connection.execute(_RELEASE_ON_CHANNEL, {"token": token})
    else:
        ids = {"token": token, "ids": list(aggregate_ids)}
        connection.execute(_RELEASE_SOME, ids)
        connection.execute(_RELEASE_SOME_ON_CHANNEL, ids)


_RELEASE = (
    update(aggregates)
    .where(aggregates.c.lease_token == bindparam("token"))
    .values(lease_token=None, lease_owner=None, lease_until=None)
)
_RELEASE_SOME = _RELEASE.where(aggregates.c.id.in_(bindparam("ids", expanding=True)))
# The same on the one channel's cursors (``queue.deliveries``).
_RELEASE_ON_CHANNEL = (
    update(channel_aggregates)
    .where(channel_aggregates.c.lease_token == bindparam("token"))
    .values(lease_token=None, lease_owner=None, lease_until=None)
)
_RELEASE_SOME_ON_CHANNEL = _RELEASE_ON_CHANNEL.where(
    channel_aggregates.c.aggregate_id.in_(bindparam("ids", expanding=True))
)


def advance_strict(connection: Connection, aggregate_ids: list[int], kinds: KindPolicies) -> None:
    """Move strict cursors past versions an operator already cancelled (rare: usually 1 query)."""
    nxt = aliased(Message, name="nxt")
    stepped = False
    for _ in range(10_000):
        moved = connection.execute(
            update(aggregates)
            .where(aggregates.c.id.in_(aggregate_ids), order.is_strict(aggregates.c, kinds))
            .where(
                exists().where(
                    nxt.aggregate_id == aggregates.c.id,
                    not_(nxt.rejected),
                    order.next_in_order(nxt),
                    nxt.state.in_(values(FINAL)),
                )
            )
            .values(done_version=aggregates.c.done_version + 1)
        ).rowcount
        if not moved:
            break
        stepped = True
    if not stepped:
        return
    # The one channel's cursors where the loop left the aggregates' (one statement).
    done = select(aggregates.c.done_version).where(
        aggregates.c.id == channel_aggregates.c.aggregate_id
    )
    connection.execute(
        update(channel_aggregates)
        .where(
            channel_aggregates.c.aggregate_id.in_(aggregate_ids),
            on_the_channel(channel_aggregates),
        )
        .values(done_version=done.scalar_subquery())
    )

"""The SQL that records a batch's outcomes and frees its lease (contract 4), on the batch's
channel: each outcome is guarded by (message, channel, lease token), and the cursor advanced
is the channel's (``channel_aggregates``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    bindparam,
    case,
    exists,
    select,
    update,
)
from sqlalchemy.orm import aliased
from sqlalchemy.sql.dml import Update

from exchange.db.engine import is_postgres
from exchange.db.rowset import rowset_params, rowset_table
from exchange.db.schema import Delivery, channel_aggregates, deliveries
from exchange.domain.policy import KindPolicies
from exchange.domain.retry import Decision
from exchange.domain.states import FINAL, Event, State, values
from exchange.failpoints import failpoint
from exchange.queue import order, withheld
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

    The outcomes are of one batch, so of one channel (their ``Leased.channel_id``). Frees the
    lease's aggregates on it; with ``release_all=False`` only those of ``outcomes`` (part
    of a batch handed back while the rest is still in flight). Returns how many outcomes were
    recorded (others belong to a newer lease now).
    """
    ids = [leased.pk for leased, _ in outcomes]
    channel = outcomes[0][0].channel_id if outcomes else None
    sql = _record_sql(is_postgres(connection))
    if sql.lock_cursors is not None and ids:
        # The same lock order as claim: the channel's cursors first, then the deliveries. A
        # claim that took an expired aggregate over holds its cursor and then updates the
        # delivery; locking the delivery first here would deadlock with it.
        aggregate_ids = sorted({leased.aggregate_id for leased, _ in outcomes})
        connection.execute(sql.lock_cursors, {"ids": aggregate_ids, "channel": channel}).all()
    owned: dict[int, int] = {}
    said: dict[int, tuple[int | None, str | None]] = {}  # pk -> its last answer's status, words
    if ids:
        asked = {"ids": ids, "token": token, "channel": channel}
        for pk, attempts_, status, error in connection.execute(sql.owned, asked):
            owned[pk] = attempts_
            said[pk] = (status, error)
    changes: list[Change] = []
    advanced: dict[int, int] = {}
    withheld_now: dict[int, int] = {}  # aggregate -> the version the channel withholds now
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
                channel_id=channel,
                written=not _same_wait(decision, said[leased.pk]),
            )
        )
        if to_state is State.WITHHELD:
            withheld_now[leased.aggregate_id] = max(
                withheld_now.get(leased.aggregate_id, 0), leased.version
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
        params: dict[str, Any] = {
            **rowset_params(connection, "advanced", _ADVANCED, advanced.items()),
            "channel": channel,
        }
        if sql.by_ids:
            params["advanced_ids"] = list(advanced)
        connection.execute(sql.advance, params)
        strict_advanced = sorted(
            {m.aggregate_id for m, _ in outcomes if kinds.is_strict(m.kind)} & set(advanced)
        )
        if strict_advanced:
            advance_strict(connection, strict_advanced, kinds, channel_id=channel)
        # A newer version delivered ends a withheld one.
        if channel is not None and withheld.any_waiting(connection, channel):
            withheld.supersede_delivered(connection, sorted(advanced), now, channel_id=channel)
    # A newer version withheld ends an older withheld one: the channel lists the newer now.
    if withheld_now and channel is not None:
        withheld.supersede_withheld(connection, withheld_now, now, channel_id=channel)
    recorded = sorted({leased.aggregate_id for leased, _ in outcomes if leased.pk in owned})
    release(connection, token, None if release_all else recorded)
    return len(changes)


def _same_wait(decision: Decision, before: tuple[int | None, str | None]) -> bool:
    """Whether ``decision`` is a wait the delivery's last outcome said already, word for word
    (its answer's status and its words, countdowns aside; the receipt is the delivery's, never
    the history's): a
    price waiting behind a price Yandex's
    quarantine holds looks every minute while the seller decides, a rule's wait for 1C's other
    price type every minute for ten (review rev36a: a history row per look, ~1,440 a day per
    offer). Such a look moves the delivery (its next look) and writes no history row: the
    biography keeps the wait's first row, ``find`` its next look. A wait whose words change
    (another price shown, a countdown) is written."""
    if decision.event is not Event.AWAITING_OUTCOME or decision.charged:
        return False
    status, words = before
    return (
        words is not None
        and _COUNTDOWN.sub("# s", words) == _COUNTDOWN.sub("# s", decision.detail)
        and status == decision.http_status
        and not decision.result_unknown
    )


# A countdown in a wait's words ("looked at again in 60 s", "600 s from now"): the same wait
# said a look later (review rev37b: a rule's wait for 1C wrote a row a look, its countdowns
# differing). The row kept is dated, so its countdown stays true from its own time.
_COUNTDOWN = re.compile(r"\b\d+ s\b")


_ADVANCED = (
    ("a_id", channel_aggregates.c.aggregate_id.type),
    ("a_version", channel_aggregates.c.done_version.type),
)


@dataclass(frozen=True, slots=True)
class _RecordSQL:
    """The recording's statements, built once per database (see _ClaimSQL)."""

    lock_cursors: Select[Any] | None  # PostgreSQL: the claim's lock order (ids, channel)
    owned: Select[Any]  # parameters: ids, token, channel; pk, attempts, last status, error
    advance: Update  # parameters: advanced (a rowset of a_id, a_version), its ids, channel
    by_ids: bool  # ``advance`` reads the advanced ids as a list too (``advanced_ids``)


@functools.lru_cache(maxsize=4)
def _record_sql(postgres: bool) -> _RecordSQL:
    channel = bindparam("channel", type_=deliveries.c.channel_id.type)
    d = deliveries.c
    owned = select(d.message_pk, d.attempts, d.last_status, d.last_error).where(
        one_of(d.message_pk, "ids", postgres),
        d.channel_id == channel,
        d.lease_token == bindparam("token"),
        d.state == State.IN_PROGRESS.value,
    )
    cursors = channel_aggregates.c
    lock = (
        select(cursors.aggregate_id)
        .where(cursors.channel_id == channel, one_of(cursors.aggregate_id, "ids", postgres))
        .order_by(cursors.aggregate_id)
    )
    advanced = rowset_table(postgres, "advanced", _ADVANCED, "advanced")
    cursor = cursors.done_version
    advance = update(channel_aggregates).where(
        cursors.aggregate_id == advanced.c.a_id, cursors.channel_id == channel
    )
    if postgres:
        # The same keys as a list: PostgreSQL estimates the rowset at 100 rows whatever its
        # size and, from some 20,000 cursors, joined it by scanning all of them; a list it
        # can count is read by key. (SQLite reads each cursor by key for the rowset's rows
        # already; the list made it scan them: 12 ms a record at 10,000.)
        advance = advance.where(one_of(cursors.aggregate_id, "advanced_ids", postgres))
    return _RecordSQL(
        lock_cursors=lock.with_for_update() if postgres else None,
        owned=owned.with_for_update() if postgres else owned,
        advance=advance.values(
            done_version=case((cursor < advanced.c.a_version, advanced.c.a_version), else_=cursor)
        ),
        by_ids=postgres,
    )


def release(connection: Connection, token: str, aggregate_ids: Sequence[int] | None = None) -> None:
    """Free the cursors of a lease (the deliveries were recorded or handed back); with
    ``aggregate_ids``, only those (part of a batch handed back). A token is one claim's, on
    one channel: it finds them alone."""
    if aggregate_ids is None:
        connection.execute(_RELEASE, {"token": token})
    else:
        connection.execute(_RELEASE_SOME, {"token": token, "ids": list(aggregate_ids)})


_RELEASE = (
    update(channel_aggregates)
    .where(channel_aggregates.c.lease_token == bindparam("token"))
    .values(lease_token=None, lease_owner=None, lease_until=None)
)
_RELEASE_SOME = _RELEASE.where(
    channel_aggregates.c.aggregate_id.in_(bindparam("ids", expanding=True))
)


def advance_strict(
    connection: Connection,
    aggregate_ids: list[int],
    kinds: KindPolicies,
    *,
    channel_id: int | None = None,
) -> None:
    """Move strict cursors past versions already final on their channel (an operator's
    cancel; rare: usually 1 query), on the channel ``channel_id``; None: on every channel."""
    if not kinds.strict:
        return
    cursor = channel_aggregates.c
    nxt = aliased(Delivery, name="nxt")
    chosen: list[ColumnElement[bool]] = [cursor.aggregate_id.in_(aggregate_ids)]
    if channel_id is not None:
        chosen.append(cursor.channel_id == channel_id)
    for _ in range(10_000):
        moved = connection.execute(
            update(channel_aggregates)
            .where(*chosen)
            .where(
                exists().where(
                    order.on_cursor(nxt),
                    order.is_strict(nxt, kinds),
                    order.next_in_order(nxt),
                    nxt.state.in_(values(FINAL)),
                )
            )
            .values(done_version=order.next_version())
        ).rowcount
        if not moved:
            break

"""Recording state changes: every change of a message's state goes through ``apply`` (rows
already read) or ``apply_selected`` (rows chosen by a query, moved without loading them).

``apply`` checks each change against the state machine (``states.check``), updates the
deliveries (or a rejected record's own row on ``messages``) in one set-based statement per
shape of change, guarded by the from-state, and writes one history row per change that has
one (taking a lease has none: the attempt's row is written when it ends, with the lease's
worker, attempt and start). History is only ever inserted.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    Select,
    String,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.sql.dml import Update

from exchange.db.engine import is_postgres
from exchange.db.rowset import Column, rowset_params, rowset_shared, rowset_table, split_shared
from exchange.db.schema import UTCDateTime, deliveries, history, messages
from exchange.domain.states import Event, State, check, sources, target


# Not frozen: a claim and a record build one per message, and a frozen dataclass's __init__
# (object.__setattr__ per field) cost three times as much (1.8 us against 0.55, 16 fields).
# A Change is built, applied and dropped within one call; nothing changes or hashes it.
@dataclass(slots=True)
class Change:
    pk: int  # the message's
    event: Event
    from_state: State | None
    to_state: State | None
    values: dict[str, Any] = field(default_factory=dict)  # other delivery columns to set
    worker: str | None = None
    attempt: int | None = None
    leased_at: datetime | None = None  # when the attempt's lease began
    lease_until: datetime | None = None  # when it ran out, for an attempt ended unanswered
    http_status: int | None = None
    error_class: str | None = None
    detail: str | None = None
    delay_s: float | None = None
    operator: str | None = None
    note: str | None = None
    guard: dict[str, Any] = field(default_factory=dict)  # extra equality conditions
    written: bool = True  # False: the state changes, no history row (taking a lease)
    # The delivery's channel. None: no delivery's: a rejected record's own state on
    # ``messages`` (no channel receives it), or an intake event with no state change.
    channel_id: int | None = None


def apply(connection: Connection, changes: Sequence[Change], now: datetime) -> None:
    """Record ``changes`` (from-states already read in this transaction, rows locked).

    Set-based: one UPDATE per shape of change (which columns it sets, which it guards on) and
    one history INSERT, each reading its rows from one JSON parameter (``db.rowset``), so
    that a batch costs the same few statements whatever its size.
    """
    if not changes:
        return
    Shape = tuple[tuple[str, ...], tuple[str, ...], bool]
    groups: dict[Shape, list[list[Any]]] = defaultdict(list)
    checked: set[tuple[Event, State | None, State | None]] = set()
    shapes: dict[Shape, Shape] = {}  # the columns as given -> sorted (a batch has few shapes)
    for change in changes:
        move = (change.event, change.from_state, change.to_state)
        if move not in checked:  # check is pure: once per kind of move in the batch
            check(*move)
            checked.add(move)
        if change.to_state is None or change.from_state is None:
            continue  # an event without a state change (a duplicate row): history only
        values, guard, keyed = change.values, change.guard, change.channel_id is not None
        given = (tuple(values), tuple(guard), keyed)
        shape = shapes.get(given)
        if shape is None:
            shape = shapes[given] = (tuple(sorted(values)), tuple(sorted(guard)), keyed)
        names, guards, _ = shape
        row: list[Any] = [change.pk, change.from_state.value, change.to_state.value]
        row += [values[name] for name in names]
        if guards:
            row += [guard[name] for name in guards]
        if keyed:
            row.append(change.channel_id)
        groups[shape].append(row)
    postgres = is_postgres(connection)
    for n, ((names, guards, keyed), rows) in enumerate(groups.items()):
        param = f"changes_{n}"
        # A value the whole batch shares goes once (e.g. a claim's lease), but only a value
        # the UPDATE sets: a condition on a constant (``state = 'new'``) lets SQLite's planner
        # find the rows by that column's index and scan every message in that state for each
        # change, instead of finding each by its id (275 ms a claim of 100 at 9,600 pending).
        setting = range(2, 3 + len(names))  # to_state and the values; not pk, from, guards
        shared = tuple(i for i in split_shared(rows) if i in setting)
        statement, per_row, once = _update_statement(postgres, param, names, guards, keyed, shared)
        params = _params(connection, param, rows, shared, per_row, once)
        connection.execute(statement, {**params, "now": now})
    insert_history(connection, changes, now)


def _params(
    connection: Connection,
    param: str,
    rows: Sequence[Sequence[Any]],
    shared: tuple[int, ...],
    per_row: tuple[Column, ...],
    once: tuple[Column, ...],
) -> dict[str, str]:
    """The rows' values (``param``) but those at the ``shared`` positions, which go once
    (``param``_shared)."""
    if not shared:
        return rowset_params(connection, param, per_row, rows)
    kept = [i for i in range(len(rows[0])) if i not in shared]
    params = rowset_params(connection, param, per_row, ([row[i] for i in kept] for row in rows))
    params.update(
        rowset_params(connection, f"{param}_shared", once, [[rows[0][i] for i in shared]])
    )
    return params


_TEXT = String()
_CHANGE_COLUMNS = (("pk", messages.c.id.type), ("from_state", _TEXT), ("to_state", _TEXT))


@functools.lru_cache(maxsize=256)
def _update_statement(
    postgres: bool,
    param: str,
    names: tuple[str, ...],
    guards: tuple[str, ...],
    keyed: bool,
    shared: tuple[int, ...],
) -> tuple[Update, tuple[Column, ...], tuple[Column, ...]]:
    """The UPDATE for one shape of change, built once (parameters: ``param``, ``param``_shared
    for the columns at the ``shared`` positions, ``now``): ``keyed``, the deliveries' (each
    found by its primary key, message and channel: a change moves one channel's delivery,
    never another's); not ``keyed``, the message's own columns of a rejected record only (no
    delivery, no channel: a change that names no channel cannot move any channel's
    delivery); with the columns of each."""
    table = deliveries if keyed else messages
    columns = _CHANGE_COLUMNS + tuple((f"v_{name}", table.c[name].type) for name in names)
    columns += tuple((f"g_{name}", table.c[name].type) for name in guards)
    if keyed:
        columns += (("channel_id", deliveries.c.channel_id.type),)
    per_row = tuple(c for i, c in enumerate(columns) if i not in shared)
    once = tuple(columns[i] for i in shared)
    source = rowset_table(postgres, param, per_row, "changes")
    value = {name: source.c[name] for name, _ in per_row}
    value.update(rowset_shared(postgres, f"{param}_shared", once))
    setting = {
        "state": value["to_state"],
        "updated_at": bindparam("now", type_=UTCDateTime()),
        **{name: value[f"v_{name}"] for name in names},
    }
    if not keyed:  # a rejected record: its state lives on the message; no delivery moves
        conditions = [messages.c.id == value["pk"], messages.c.state == value["from_state"]]
        conditions += [messages.c[name] == value[f"g_{name}"] for name in guards]
        conditions.append(messages.c.rejected)
        return update(messages).where(and_(*conditions)).values(**setting), per_row, once
    delivery = [
        deliveries.c.message_pk == value["pk"],
        deliveries.c.channel_id == value["channel_id"],
        deliveries.c.state == value["from_state"],
    ]
    delivery += [deliveries.c[name] == value[f"g_{name}"] for name in guards]
    return update(deliveries).where(and_(*delivery)).values(**setting), per_row, once


# A history row's columns but its time, which is one for the whole batch (``at``).
_HISTORY_FROM_ROWS: tuple[Column, ...] = tuple(
    (name, history.c[name].type)
    for name in (
        "message_pk",
        "event",
        "from_state",
        "to_state",
        "worker",
        "attempt",
        "leased_at",
        "lease_until",
        "http_status",
        "error_class",
        "detail",
        "delay_s",
        "operator",
        "note",
        "channel_id",
    )
)


@functools.lru_cache(maxsize=64)
def _history_statement(
    postgres: bool, shared: tuple[int, ...]
) -> tuple[Insert, tuple[Column, ...], tuple[Column, ...]]:
    """History rows from one JSON parameter (``history_rows``; the columns at the ``shared``
    positions from ``history_rows_shared``), all at ``at``."""
    per_row = tuple(c for i, c in enumerate(_HISTORY_FROM_ROWS) if i not in shared)
    once = tuple(_HISTORY_FROM_ROWS[i] for i in shared)
    source = rowset_table(postgres, "history_rows", per_row, "written")
    value = {name: source.c[name] for name, _ in per_row}
    value.update(rowset_shared(postgres, "history_rows_shared", once))
    names = [name for name, _ in _HISTORY_FROM_ROWS if name != "channel_id"]
    # The change's channel: null for intake's own events and a rejected record's.
    statement = insert(history).from_select(
        [*names, "at", "channel_id"],
        select(
            *(value[name] for name in names),
            bindparam("at", type_=UTCDateTime()),
            value["channel_id"],
        ),
    )
    return statement, per_row, once


def insert_history(connection: Connection, changes: Iterable[Change], now: datetime) -> None:
    """One history row per change, all at ``now``, in one statement. History is only ever
    inserted."""
    rows = [
        (
            change.pk,
            change.event.value,
            change.from_state.value if change.from_state else None,
            change.to_state.value if change.to_state else None,
            change.worker,
            change.attempt,
            change.leased_at,
            change.lease_until,
            change.http_status,
            change.error_class,
            change.detail,
            change.delay_s,
            change.operator,
            change.note,
            change.channel_id,
        )
        for change in changes
        if change.written
    ]
    if rows:
        shared = split_shared(rows)  # e.g. the worker, the event, the lease's start
        statement, per_row, once = _history_statement(is_postgres(connection), shared)
        params = _params(connection, "history_rows", rows, shared, per_row, once)
        connection.execute(statement, {**params, "at": now})


def apply_selected(
    connection: Connection,
    event: Event,
    candidates: Select[Any],
    *,
    now: datetime,
    values: Callable[[Any], dict[str, Any]],
    detail: Callable[[Any], ColumnElement[str]],
) -> int:
    """Move every delivery that ``candidates`` selects, in the database, without loading it.

    ``candidates`` selects, from ``deliveries``, at least ``id`` (the message's), ``channel_id``,
    ``state``, ``locked_by``, ``attempts``, ``leased_at`` and ``locked_until`` (in states the
    event allows), on any channels; ``values`` and ``detail`` build the columns to set and the
    history detail from the candidates' columns. A delivery moved out of ``in_progress`` (its
    lease had expired) ends that attempt: its row carries the lease's worker, attempt, start
    and expiry. Deliveries another transaction holds are skipped (a sweep comes again).
    Returns how many moved.
    """
    return _move(
        connection,
        event,
        candidates,
        now=now,
        key="id",
        channel=None,
        values=values,
        detail=detail,
        skip_locked=True,
    )


def apply_on_channel(
    connection: Connection,
    event: Event,
    channel_id: int,
    candidates: Select[Any],
    *,
    now: datetime,
    values: dict[str, Any],
    detail: str,
    operator: str | None = None,
    note: str | None = None,
) -> int:
    """Move every delivery of one channel that ``candidates`` selects, in the database,
    without loading it; one history row each, naming the channel, the operator and the note.

    ``candidates`` selects at least ``message_pk``, ``state``, ``locked_by``, ``attempts``,
    ``leased_at`` and ``locked_until`` of ``deliveries`` of that channel (in states the
    event allows). A delivery moved out of ``in_progress`` ends its attempt: its row carries
    the lease's worker, attempt, start and expiry. Only this channel's deliveries move: a
    message's delivery on another channel is not touched. Returns how many moved."""
    return _move(
        connection,
        event,
        candidates,
        now=now,
        key="message_pk",
        channel=literal(channel_id, deliveries.c.channel_id.type),
        values=lambda _: values,
        detail=lambda _: literal(detail),
        said={"operator": literal(operator, String()), "note": literal(note, String())},
        skip_locked=False,
    )


def _ended_attempt(chosen: Any) -> dict[str, ColumnElement[Any]]:
    """The history columns of the attempt a move ends, from the chosen delivery as it was: its
    lease's worker, attempt, start and expiry when it was in flight (its lease had expired),
    else none."""

    def lease(column: str) -> ColumnElement[Any]:
        return case((chosen.c.state == State.IN_PROGRESS.value, chosen.c[column]))

    return {
        "worker": lease("locked_by"),
        "attempt": lease("attempts"),
        "leased_at": lease("leased_at"),
        "lease_until": lease("locked_until"),
    }


def _move(
    connection: Connection,
    event: Event,
    candidates: Select[Any],
    *,
    now: datetime,
    key: str,
    channel: ColumnElement[Any] | None,
    values: Callable[[Any], dict[str, Any]],
    detail: Callable[[Any], ColumnElement[str]],
    skip_locked: bool,
    said: dict[str, ColumnElement[Any]] | None = None,
) -> int:
    """``apply_selected`` and ``apply_on_channel``: the chosen deliveries (``candidates``; the
    message's pk as ``key``, the channel as its ``channel_id`` column or ``channel`` for all)
    moved to ``event``'s state and one history row each (with ``said``'s columns too).

    The candidates are joined back to ``deliveries`` on one key, the delivery's primary key
    ``(message_pk, channel_id)``, once: PostgreSQL finds each by ``pk_deliveries`` (or hashes
    them) however many there are, and nothing else reads the candidates again. (When the old
    columns on ``messages`` were mirrored, a second join of the candidates to the moved rows
    was planned as a nested loop over the candidates' CTE: 180,000 × 180,000 rows at a reload
    of 20,000 SKUs × 10 versions, until the sweep turned nested loops off.) PostgreSQL: one
    statement (lock, update, history in a data-modifying CTE). SQLite (one writer at a time):
    the history, then the update, from the same selection in one transaction."""
    to_state = target(event)
    allowed = sorted(state.value for state in sources(event))
    at = literal(now, UTCDateTime())
    extra = said or {}
    columns = ["message_pk", "at", "event", "from_state", "to_state", "detail"]
    columns += ["worker", "attempt", "leased_at", "lease_until", *extra, "channel_id"]

    def channel_of(chosen: Any) -> ColumnElement[Any]:
        return chosen.c.channel_id if channel is None else channel

    def on_key(chosen: Any) -> ColumnElement[bool]:
        return and_(
            deliveries.c.message_pk == chosen.c[key],
            deliveries.c.channel_id == channel_of(chosen),
            deliveries.c.state.in_(allowed),
        )

    if is_postgres(connection):
        # The deliveries are locked first, as the claim and the record lock them.
        locked = candidates.with_for_update(of=deliveries, skip_locked=skip_locked)
        chosen = locked.cte("candidates")
        ended = _ended_attempt(chosen)
        moved = (
            update(deliveries)
            .where(on_key(chosen))
            .values(state=to_state.value, updated_at=at, **values(chosen))
            .returning(
                deliveries.c.message_pk,
                deliveries.c.channel_id,
                chosen.c.state.label("from_state"),
                detail(chosen).label("detail"),
                *(value.label(name) for name, value in ended.items()),
            )
            .cte("moved")
        )
        written = (
            insert(history)
            .from_select(
                columns,
                select(
                    moved.c.message_pk,
                    at,
                    literal(event.value),
                    moved.c.from_state,
                    literal(to_state.value),
                    moved.c.detail,
                    *(moved.c[name] for name in ended),
                    *extra.values(),
                    moved.c.channel_id,
                ),
            )
            .returning(history.c.id)
            .cte("written")
        )
        # The driver reports no row count for a data-modifying CTE: count in the statement.
        return int(connection.execute(select(func.count()).select_from(written)).scalar_one())
    chosen_sq = candidates.subquery("candidates")
    connection.execute(
        insert(history).from_select(
            columns,
            select(
                chosen_sq.c[key],
                at,
                literal(event.value),
                chosen_sq.c.state,
                literal(to_state.value),
                detail(chosen_sq),
                *_ended_attempt(chosen_sq).values(),
                *extra.values(),
                channel_of(chosen_sq),
            ).where(chosen_sq.c.state.in_(allowed)),
        )
    )
    # The history first: the selection reads the deliveries' states, so it must still
    # select them (the same rows as the history's).
    result = connection.execute(
        update(deliveries)
        .where(on_key(chosen_sq))
        .values(state=to_state.value, updated_at=at, **values(chosen_sq))
    )
    return result.rowcount

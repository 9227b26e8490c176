"""The registry of channels (contract 13): each channel ever configured, kept in ``channels``.

A channel is registered the first time ``migrate``, ``run``, ``serve``, ``check`` or
``channels seed`` reads it in the configuration (``register``): its name, target, the kinds it
takes and when it was added. Each later registration writes the kinds again when the
configuration changed them, so intake, which fans out from the registry alone, follows the
configuration of the last process that read it. A name is unique among the channels not
dropped; a name used again after a drop is a new row (its deliveries start afresh).

A configured name whose registered channel has another target is refused
(``ChannelConflict``, one line, exit 2) instead of being re-pointed: the deliveries, cursors
and strict order kept for that name are the old shop's, and the new shop starts from
nothing only through ``channels drop`` and ``channels seed``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    FromClause,
    and_,
    cast,
    exists,
    func,
    not_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB

from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import channels, deliveries, messages
from exchange.errors import ConfigurationError

log = logging.getLogger(__name__)


class Configured(Protocol):
    """What registration reads of a configured channel (``settings.channels.Channel``)."""

    @property
    def name(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def takes(self) -> tuple[str, ...]: ...


class ChannelConflict(ConfigurationError):
    """a configured channel's target differs from the registered one's"""


@dataclass(frozen=True)
class Registered:
    """A row of the registry."""

    id: int
    name: str
    target: str
    takes: tuple[str, ...]
    added_at: datetime
    dropped_at: datetime | None
    seed_mark: int | None


def takes_text(takes: Iterable[str]) -> str:
    """The kinds as ``channels.takes`` stores them: a JSON array, in the configuration's order."""
    return json.dumps(list(takes), ensure_ascii=False)


def takes_of(text: str | None) -> tuple[str, ...]:
    """The kinds ``channels.takes`` holds (an unreadable value takes nothing)."""
    try:
        found = json.loads(text or "[]")
    except ValueError:
        return ()
    return tuple(str(kind) for kind in found) if isinstance(found, list) else ()


def taking(kind: ColumnElement[str], postgres: bool) -> ColumnElement[bool]:
    """SQL: the ``channels`` row takes ``kind`` (a column or value), read from ``takes``
    alone, as intake's fan-out asks it for every channel not dropped whatever the process's
    own configuration (PostgreSQL: ``jsonb ?``; SQLite: ``json_each``)."""
    if postgres:
        held: ColumnElement[bool] = cast(channels.c.takes, JSONB).has_key(kind)
        return held
    each = func.json_each(channels.c.takes).table_valued("value").alias("taken")
    return exists().select_from(each).where(each.c.value == kind)


def _registered(row: Any) -> Registered:
    return Registered(
        row.id,
        row.name,
        row.target,
        takes_of(row.takes),
        row.added_at,
        row.dropped_at,
        row.seed_mark,
    )


def registry(connection: Connection, *, dropped: bool = True) -> list[Registered]:
    """Every registered channel, in the order they were added (``dropped=False``: in use only)."""
    query = select(channels).order_by(channels.c.id)
    if not dropped:
        query = query.where(channels.c.dropped_at.is_(None))
    return [_registered(row) for row in connection.execute(query)]


def untaken_kinds(connection: Connection, kinds: Iterable[str]) -> list[str]:
    """Of ``kinds`` (EXCHANGE_KINDS), those no registered, not dropped channel takes: intake
    makes their messages with no delivery (contract 13), so nothing delivers them. One read
    of the registry (a small table)."""
    taken: set[str] = set()
    for channel in registry(connection, dropped=False):
        taken.update(channel.takes)
    return [kind for kind in kinds if kind not in taken]


def is_kept(m: FromClause) -> ColumnElement[bool]:
    """A message kept with no delivery on any channel (``kept_nowhere``), on ``m``: the
    ``messages`` table or an alias of it. Marked (``messages.kept_nowhere``: intake accepted
    it while no channel took its kind, ``mark_kept``), accepted, with no delivery on any
    channel. The mark renders as the condition of the partial index ``ix_messages_kept_nowhere``
    (``schema.KEPT_NOWHERE``: ``IS NOT NULL``, no bound parameter), so SQLite reads that index
    (it reads a partial index only for a query that repeats its condition). The one place the
    condition is written: ``kept_nowhere``, ``oldest_kept``, ``seed_from``,
    ``kept_skipped``, ``queue.order.behind_kept``, ``queue.deliveries.late_cursors``."""
    return and_(
        m.c.kept_nowhere.is_not(None),
        not_(m.c.rejected),
        ~exists().where(deliveries.c.message_pk == m.c.id),
    )


def kept_nowhere(
    connection: Connection,
    kinds: Iterable[str],
    *,
    coalescing: Iterable[str] = (),
    since: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The accepted messages of a kind of ``kinds`` (EXCHANGE_KINDS) kept with no delivery on
    any channel: ``{kind: {"count", "oldest", "taken"}}`` (``oldest``: the message_id of the
    first accepted, what ``channels seed NAME --from`` starts at; ``taken``: some channel
    takes the kind now, ``untaken_kinds``), by kind. Nothing delivers them, so only a person
    moves them (contract 1: nothing is dropped silently): ``status``'s ``no-channel:KIND``
    causes and the dashboard's (``ops.attention``), ``run``'s warning. They stay counted once
    a channel takes their kind, until ``channels seed`` gives them a delivery: a strictly
    ordered kind's newer version waits behind them there (``queue.deliveries.late_cursors``).
    A message of a ``coalescing`` kind whose aggregate has a newer version delivered
    somewhere (given to a channel) is no longer counted: the newer price replaced it, as
    coalescing would have. ``since``: of the messages above that ``messages.id`` only (one
    take-in's).

    Read through ``ix_messages_kept_nowhere`` (intake marks such a message, ``mark_kept``;
    the seed clears it): the marked messages alone, each probed in ``deliveries`` by its
    primary key's first column (``message_pk``), never every message."""
    wanted = list(kinds)
    if not wanted:
        return {}
    m = messages.c
    newer = messages.alias("newer")
    given = deliveries.alias("given")
    overtaken = exists().where(
        newer.c.aggregate_id == m.aggregate_id,
        newer.c.version > m.version,
        exists().where(given.c.message_pk == newer.c.id),
    )
    latest_wins = [kind for kind in coalescing if kind in wanted]
    rows = connection.execute(
        select(m.kind, func.count(), func.min(m.id))
        .where(
            is_kept(messages),
            m.kind.in_(wanted),
            *(() if since is None else (m.id > since,)),
            *((not_(and_(m.kind.in_(latest_wins), overtaken)),) if latest_wins else ()),
        )
        .group_by(m.kind)
        .order_by(m.kind)
    ).all()
    if not rows:
        return {}
    ids = dict(
        connection.execute(
            select(m.id, m.message_id).where(m.id.in_([int(row[2]) for row in rows]))
        ).all()
    )
    untaken = set(untaken_kinds(connection, [row.kind for row in rows]))
    return {
        row.kind: {
            "count": int(row[1]),
            "oldest": ids.get(int(row[2])),
            "taken": row.kind not in untaken,
        }
        for row in rows
    }


def mark_kept(connection: Connection, kinds: Iterable[str], message_ids: Iterable[str]) -> None:
    """Mark, of the messages just accepted (``message_ids``, of ``kinds``), those of a kind no
    channel takes that have no delivery (``messages.kept_nowhere``), in intake's transaction:
    what ``kept_nowhere`` reads. One read of the registry, nothing more when every kind of
    theirs is taken."""
    ids = list(message_ids)
    untaken = untaken_kinds(connection, sorted(set(kinds))) if ids else []
    if not untaken:
        return
    m = messages.c
    connection.execute(
        update(messages)
        .where(
            m.message_id.in_(ids),
            m.kind.in_(untaken),
            not_(m.rejected),
            m.aggregate_id.is_not(None),
            ~exists().where(deliveries.c.message_pk == m.id),
        )
        .values(kept_nowhere=True)
    )


def unmark_kept(connection: Connection, message_pks: Iterable[int]) -> None:
    """The messages ``message_pks`` were given a delivery (``channels seed``): no longer kept
    nowhere."""
    pks = list(message_pks)
    if pks:
        connection.execute(
            update(messages)
            .where(messages.c.id.in_(pks), messages.c.kept_nowhere.is_not(None))
            .values(kept_nowhere=None)
        )


def oldest_kept(connection: Connection, aggregate_ids: Iterable[int]) -> dict[int, str]:
    """Of the aggregates ``aggregate_ids``, those with a message kept with no delivery on any
    channel (``kept_nowhere``): ``{aggregate_id: the message_id of the first accepted}``, what
    ``channels seed NAME --from`` must start at for that aggregate to keep its order."""
    wanted = sorted(set(aggregate_ids))
    if not wanted:
        return {}
    m = messages.alias("kept")
    first = (
        select(m.c.aggregate_id, func.min(m.c.id).label("pk"))
        .where(m.c.aggregate_id.in_(wanted), is_kept(m))
        .group_by(m.c.aggregate_id)
        .subquery()
    )
    rows = connection.execute(
        select(first.c.aggregate_id, messages.c.message_id).join(
            messages, messages.c.id == first.c.pk
        )
    ).all()
    return {int(aggregate_id): str(message_id) for aggregate_id, message_id in rows}


def seed_from(connection: Connection, message_ids: Iterable[str]) -> dict[str, str]:
    """For each message of ``message_ids`` delivered nowhere, where ``channels seed NAME
    --from`` must start to give it a delivery without skipping an earlier version of its
    aggregate kept with no delivery on any channel (review 32k): the first such version
    accepted before it, else the message itself. What ``find`` and ``history`` advise."""
    wanted = sorted(set(message_ids))
    if not wanted:
        return {}
    own = messages.alias("own")
    kept = messages.alias("kept")
    first = (
        select(func.min(kept.c.id))
        .where(kept.c.aggregate_id == own.c.aggregate_id, kept.c.id < own.c.id, is_kept(kept))
        .scalar_subquery()
    )
    rows = connection.execute(
        select(own.c.message_id, first.label("first")).where(own.c.message_id.in_(wanted))
    ).all()
    earlier = [int(row.first) for row in rows if row.first is not None]
    names = (
        dict(
            connection.execute(
                select(messages.c.id, messages.c.message_id).where(messages.c.id.in_(earlier))
            ).all()
        )
        if earlier
        else {}
    )
    return {
        str(row.message_id): str(names.get(row.first, row.message_id))
        if row.first is not None
        else str(row.message_id)
        for row in rows
    }


def kept_skipped(
    connection: Connection, kinds: Iterable[str], from_pk: int
) -> tuple[int, str] | None:
    """What ``channels seed NAME --from`` (intake order ``from_pk`` on) would skip of the
    strictly ordered ``kinds``: a message kept with no delivery on any channel, accepted
    before ``from_pk``, of an aggregate the seed gives a later version of (review 32k: the
    later version went without it, and the kept one was then cancelled stale). Returns the
    first such message to seed from instead (intake order, message_id): the earliest start
    that skips none, found by moving the start back until nothing kept is left behind it; or
    None when ``from_pk`` skips nothing."""
    wanted = list(kinds)
    if not wanted:
        return None
    start = from_pk
    found: tuple[int, str] | None = None
    kept = messages.alias("kept")
    seeded = messages.alias("seeded")
    while True:
        row = connection.execute(
            select(kept.c.id, kept.c.message_id)
            .where(
                kept.c.kind.in_(wanted),
                kept.c.id < start,
                is_kept(kept),
                exists().where(
                    seeded.c.aggregate_id == kept.c.aggregate_id,
                    seeded.c.id >= start,
                    not_(seeded.c.rejected),
                ),
            )
            .order_by(kept.c.id)
            .limit(1)
        ).first()
        if row is None:
            return found
        start = int(row.id)
        found = (start, str(row.message_id))


def in_use(connection: Connection, name: str, *, lock: bool = False) -> Registered | None:
    """The channel of ``name`` not dropped, or None. ``lock``: its row is held (PostgreSQL's
    ``FOR UPDATE``) until the transaction ends, against a drop or a seed at once."""
    query = select(channels).where(channels.c.name == name, channels.c.dropped_at.is_(None))
    if lock and is_postgres(connection):
        query = query.with_for_update()
    row = connection.execute(query).first()
    return _registered(row) if row is not None else None


def was_dropped(connection: Connection, name: str) -> bool:
    """A channel of ``name`` was dropped before (its name used again is a new channel)."""
    query = select(channels.c.id).where(channels.c.name == name, channels.c.dropped_at.is_not(None))
    return connection.execute(query.limit(1)).first() is not None


def conflict_line(name: str, registered: str, configured: str) -> str:
    """The one line a target changed under a registered name is refused with."""
    return (
        f"channel {name} is registered with target {registered}, configured with {configured}: "
        f"a channel keeps its target; drop it first (exchange channels drop {name} --note …) "
        "or give the new one another name"
    )


def register_in(
    connection: Connection, configured: Sequence[Configured], now: datetime
) -> list[str]:
    """Register, in the caller's transaction, each configured channel not yet registered and
    write the kinds of those whose configuration changed them. Returns the names newly
    registered. ``ChannelConflict`` when a configured name is registered with another target.

    Safe when two processes register at once: the insert does nothing on the unique name of
    the channels not dropped (``ON CONFLICT``), and what is then found there is compared."""
    from sqlalchemy.dialects import postgresql, sqlite

    insert = postgresql.insert if is_postgres(connection) else sqlite.insert
    added: list[str] = []
    for channel in configured:
        takes = takes_text(channel.takes)
        made = connection.execute(
            insert(channels)
            .values(name=channel.name, target=channel.target, takes=takes, added_at=now)
            .on_conflict_do_nothing(
                index_elements=[channels.c.name], index_where=channels.c.dropped_at.is_(None)
            )
            .returning(channels.c.id)
        ).first()
        if made is not None:
            added.append(channel.name)
            if was_dropped(connection, channel.name):
                log.warning(
                    "channel %s was dropped before and is registered again as a new channel: "
                    "it starts afresh with no deliveries; give it every current price with "
                    "exchange channels seed %s",
                    channel.name,
                    channel.name,
                )
            continue
        found = in_use(connection, channel.name)
        if found is None:  # dropped between the insert and the read: not ours to undo
            continue
        if found.target != channel.target:
            raise ChannelConflict(conflict_line(channel.name, found.target, channel.target))
        if found.takes != tuple(channel.takes):
            connection.execute(
                update(channels).where(channels.c.id == found.id).values(takes=takes)
            )
    return added


def register(engine: Engine, configured: Sequence[Configured], now: datetime) -> list[str]:
    """``register_in`` in a transaction of its own."""
    with transaction(engine) as connection:
        return register_in(connection, configured, now)

"""Adding and removing a channel (contract 13): ``channels seed`` and ``channels drop``.

**Seeding** gives a channel a delivery of the latest accepted version of every aggregate of
a coalescing kind it takes (the highest version that became a message, whatever its state on
other channels), so a new shop starts with every current price; and of every message of a
strictly ordered kind it takes accepted after the channel was registered (or from
``--from``'s message on, in intake order, inclusive). It only creates deliveries, ``new``,
each with a history row ``seeded`` naming the channel, in batches of one transaction each
walking the messages in intake order (``messages.id``); each batch commits the channel's
``seed_mark``, the highest id it covered, so a run after a crash goes on from there, and a
delivery that exists already is never made twice. The channel's cursor of each aggregate it
receives starts strict order at the lowest version the channel holds (``first_version``),
while nothing has been delivered there. The seeded deliveries are ranked behind what the
channel already has waiting (after fresh changes, which intake deals in at the head).

**Dropping** marks the channel dropped and cancels its waiting deliveries (``new``,
``delayed``, ``quarantined``, ``withheld``, and ``in_progress`` whose lease has run out: no
worker will take them over), reason ``channel-removed``, with the operator and the note in
each history row. A delivery in flight under a live lease is left to its worker, which
records its outcome; a delivered or cancelled one stays as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    exists,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from exchange.db.channels import Registered, in_use, kept_nowhere, kept_skipped, unmark_kept
from exchange.db.engine import is_postgres, transaction
from exchange.db.schema import (
    UTCDateTime,
    channel_aggregates,
    channels,
    deliveries,
    history,
    messages,
)
from exchange.domain.policy import KindPolicies
from exchange.domain.reasons import Reason
from exchange.domain.states import PENDING, Event, State, values
from exchange.errors import OperatorError
from exchange.failpoints import failpoint
from exchange.queue.transitions import apply_on_channel

SEED_BATCH = 2000
# What a dropped channel's waiting delivery is cancelled with: its lease, if any, cleared.
_REMOVED = {
    "reason": Reason.CHANNEL_REMOVED.value,
    "locked_by": None,
    "locked_until": None,
    "lease_token": None,
    "next_try_at": None,
}


def no_such_channel(name: str) -> OperatorError:
    return OperatorError(
        f"no channel {name} is in use: `exchange channels list` shows the registered ones"
    )


# -- seed -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    """What a seed did: the deliveries it created, the batches it committed, its mark."""

    channel: str
    created: int
    batches: int
    mark: int | None
    # Why none may have been created (said by ``channels seed``): the messages walked, each
    # already with a delivery on the channel when none was created; whether the walk began
    # past an earlier seed's mark; the kinds the channel takes.
    walked: int = 0
    after_earlier: bool = False
    takes: tuple[str, ...] = ()
    # What is still kept with no delivery on any channel, of the kinds it takes, after the
    # seed (``db.channels.kept_nowhere``: {kind: {"count", "oldest", "taken"}}): a strictly
    # ordered kind's accepted before the channel was registered need ``--from`` (said by
    # ``channels seed``, review 32k).
    kept: dict[str, dict[str, Any]] | None = None


def message_pk(connection: Connection, message_id: str) -> int:
    """The intake order (``messages.id``) of ``--from``'s message; OperatorError if unknown."""
    found = connection.execute(
        select(messages.c.id).where(messages.c.message_id == message_id)
    ).scalar()
    if found is None:
        raise OperatorError(f"no such message: {message_id}")
    return int(found)


def seed(
    engine: Engine,
    name: str,
    kinds: KindPolicies,
    *,
    now: datetime,
    from_message: str | None = None,
    batch: int = SEED_BATCH,
    progress: Callable[[Seeded], None] | None = None,
) -> Seeded:
    """Seed the channel ``name`` (in use), batch by batch until nothing is left. ``kinds``:
    the policies (global, EXCHANGE_KINDS) that say which of the kinds it takes coalesce;
    a kind it takes that is not configured counts as coalescing, as the queue's rules count
    it. ``progress`` is told after each batch."""
    created = batches = walked = 0
    start: int | None = None
    from_pk: int | None = None
    earlier = False
    left: dict[str, dict[str, Any]] = {}
    while True:
        with transaction(engine) as connection:
            channel = in_use(connection, name, lock=True)
            if channel is None:
                raise no_such_channel(name)
            if start is None:  # the first batch: from the mark a run before this one reached
                start = channel.seed_mark or 0
                earlier = bool(channel.seed_mark) and from_message is None
                if from_message is not None:  # the strict kinds from there: walk from there
                    from_pk = message_pk(connection, from_message)
                    _refuse_skipping(connection, channel, kinds, from_message, from_pk)
                    start = min(start, from_pk - 1)
            made, mark, looked = _seed_batch(connection, channel, kinds, now, start, from_pk, batch)
            if mark is None:
                strict = [kind for kind in channel.takes if kinds.is_strict(kind)]
                left = kept_nowhere(
                    connection,
                    channel.takes,
                    coalescing=[kind for kind in channel.takes if kind not in strict],
                )
        if mark is None:
            return Seeded(
                name, created, batches, channel.seed_mark, walked, earlier, channel.takes, left
            )
        failpoint("seed-batch-done")
        created += made
        walked += looked
        batches += 1
        start = mark
        if progress is not None:
            progress(Seeded(name, created, batches, mark, walked, earlier, channel.takes))


def _refuse_skipping(
    connection: Connection,
    channel: Registered,
    kinds: KindPolicies,
    from_message: str,
    from_pk: int,
) -> None:
    """Refuse a ``--from`` that would give the channel a later version of a strictly ordered
    aggregate while an earlier version of it is kept with no delivery on any channel (review
    32k: the later went without it, the kept one was then cancelled stale, a posting lost):
    the operator is told the first message to seed from instead, nothing is created."""
    strict = [kind for kind in channel.takes if kinds.is_strict(kind)]
    skipped = kept_skipped(connection, strict, from_pk)
    if skipped is not None:
        first = skipped[1]
        raise OperatorError(
            f"--from {from_message} would skip an earlier version kept on no channel "
            f"(the first {first}) and give {channel.name} the later ones without it: "
            f"exchange channels seed {channel.name} --from {first}"
        )


def _candidates(channel: Registered, kinds: KindPolicies, after: int, from_pk: int | None) -> Any:
    """The condition on ``messages`` of what the channel is to be given, past ``after``."""
    strict = [kind for kind in channel.takes if kinds.is_strict(kind)]
    coalescing = [kind for kind in channel.takes if not kinds.is_strict(kind)]
    newer = messages.alias("newer")
    latest = and_(
        messages.c.kind.in_(coalescing),
        ~exists().where(
            newer.c.aggregate_id == messages.c.aggregate_id,
            newer.c.version > messages.c.version,
            not_(newer.c.rejected),
        ),
    )
    since = (
        messages.c.taken_at >= literal(channel.added_at, UTCDateTime())
        if from_pk is None
        else messages.c.id >= from_pk
    )
    ordered = and_(messages.c.kind.in_(strict), since)
    return and_(
        messages.c.id > after,
        not_(messages.c.rejected),
        messages.c.aggregate_id.is_not(None),
        or_(latest, ordered),
    )


def _seed_batch(
    connection: Connection,
    channel: Registered,
    kinds: KindPolicies,
    now: datetime,
    after: int,
    from_pk: int | None,
    batch: int,
) -> tuple[int, int | None, int]:
    """One batch past ``after``: (deliveries created, the mark it reached, the messages it
    walked), or (0, None, 0) when nothing is left to walk."""
    wanted = _candidates(channel, kinds, after, from_pk)
    last = connection.execute(
        select(messages.c.id).where(wanted).order_by(messages.c.id).limit(batch)
    ).scalars()
    found = list(last)
    if not found:
        return 0, None, 0
    upto = found[-1]
    chosen = and_(wanted, messages.c.id <= upto)
    # Behind what the channel has waiting: fresh changes are dealt in at the head.
    tail = connection.execute(
        select(func.coalesce(func.max(deliveries.c.claim_rank), 0)).where(
            deliveries.c.channel_id == channel.id,
            deliveries.c.state.in_(values(PENDING)),
        )
    ).scalar_one()
    held = exists().where(
        deliveries.c.message_pk == messages.c.id, deliveries.c.channel_id == channel.id
    )
    at = literal(now, UTCDateTime())
    columns = [
        "message_pk",
        "channel_id",
        "aggregate_id",
        "kind",
        "version",
        "state",
        "attempts",
        "claim_rank",
        "waiting_since",
        "updated_at",
    ]
    rows = select(
        messages.c.id,
        literal(channel.id, deliveries.c.channel_id.type),
        messages.c.aggregate_id,
        messages.c.kind,
        messages.c.version,
        literal(State.NEW.value),
        literal(0),
        literal(int(tail) - after, deliveries.c.claim_rank.type) + messages.c.id,
        at,
        at,
    ).where(chosen, ~held)
    insert_ = postgresql.insert if is_postgres(connection) else sqlite.insert
    made = connection.execute(
        insert_(deliveries)
        .from_select(columns, rows)
        .on_conflict_do_nothing()
        .returning(deliveries.c.message_pk, deliveries.c.aggregate_id)
    ).all()
    if made:
        connection.execute(
            insert(history),
            [
                {
                    "message_pk": pk,
                    "at": now,
                    "event": Event.SEEDED.value,
                    "from_state": None,
                    "to_state": State.NEW.value,
                    "detail": f"seeded to channel {channel.name}",
                    "channel_id": channel.id,
                }
                for pk, _aggregate in made
            ],
        )
        _start_cursors(connection, channel.id, sorted({a for _pk, a in made}))
        unmark_kept(connection, (pk for pk, _aggregate in made))
    connection.execute(update(channels).where(channels.c.id == channel.id).values(seed_mark=upto))
    return len(made), upto, len(found)


def _start_cursors(connection: Connection, channel_id: int, aggregate_ids: list[int]) -> None:
    """The channel's cursor of each aggregate it received: strict order starts at the lowest
    version the channel holds, while nothing has been delivered there (``done_version`` 0)."""
    insert_ = postgresql.insert if is_postgres(connection) else sqlite.insert
    lowest = (
        select(
            deliveries.c.aggregate_id,
            literal(channel_id, deliveries.c.channel_id.type),
            func.min(deliveries.c.version),
        )
        .where(deliveries.c.channel_id == channel_id, deliveries.c.aggregate_id.in_(aggregate_ids))
        .group_by(deliveries.c.aggregate_id)
    )
    statement = insert_(channel_aggregates).from_select(
        ["aggregate_id", "channel_id", "first_version"], lowest
    )
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=["aggregate_id", "channel_id"],
            set_={"first_version": statement.excluded.first_version},
            where=channel_aggregates.c.done_version == 0,
        )
    )


# -- drop -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dropped:
    """What a drop did: the channel, the deliveries it cancelled, those left in flight."""

    channel: str
    cancelled: int
    in_flight: int
    # Seconds until the last lease of those in flight runs out: a dead worker's delivery is
    # cancelled then (``close_dropped``), never left waiting.
    lease_left: float = 0.0


def _cancel_waiting(
    connection: Connection,
    channel_id: int,
    now: datetime,
    *,
    detail: str,
    operator: str | None = None,
    note: str | None = None,
) -> int:
    """Cancel the channel's waiting deliveries, reason ``channel-removed``: ``new``,
    ``delayed``, ``quarantined``, ``withheld`` (the shop it waits on is gone), and
    ``in_progress`` whose lease ran out (no worker will take it over)."""
    in_progress = deliveries.c.state == State.IN_PROGRESS.value
    expired = or_(deliveries.c.locked_until.is_(None), deliveries.c.locked_until <= now)
    waiting = (
        select(
            deliveries.c.message_pk,
            deliveries.c.state,
            deliveries.c.locked_by,
            deliveries.c.attempts,
            deliveries.c.leased_at,
            deliveries.c.locked_until,
        )
        .where(deliveries.c.channel_id == channel_id)
        .where(
            or_(
                deliveries.c.state.in_(
                    [
                        State.NEW.value,
                        State.DELAYED.value,
                        State.QUARANTINED.value,
                        State.WITHHELD.value,
                    ]
                ),
                and_(in_progress, expired),
            )
        )
    )
    return apply_on_channel(
        connection,
        Event.CHANNEL_REMOVED,
        channel_id,
        waiting,
        now=now,
        values=_REMOVED,
        detail=detail,
        operator=operator,
        note=note,
    )


def close_dropped(connection: Connection, now: datetime) -> int:
    """Cancel what waits on a dropped channel: a delivery in flight when the channel was
    dropped, handed back later by its worker (a stop, a lost lease, a retry), would otherwise
    wait there for good, counted in the backlog (found by the shop owner's walk-through). The
    sweeper's: a read of the dropped channels, nothing more when there are none."""
    dropped = connection.execute(
        select(channels.c.id, channels.c.name).where(channels.c.dropped_at.is_not(None))
    ).all()
    return sum(
        _cancel_waiting(
            connection,
            channel_id,
            now,
            detail=f"channel {name} was removed: its delivery in flight then ends here",
        )
        for channel_id, name in dropped
    )


def drop(connection: Connection, name: str, *, operator: str, note: str, now: datetime) -> Dropped:
    """Mark the channel ``name`` dropped and cancel its waiting deliveries."""
    if not note.strip():
        raise OperatorError("--note is required: say why the channel is removed")
    channel = in_use(connection, name, lock=True)
    if channel is None:
        raise no_such_channel(name)
    mine = deliveries.c.channel_id == channel.id
    in_progress = deliveries.c.state == State.IN_PROGRESS.value
    cancelled = _cancel_waiting(
        connection,
        channel.id,
        now,
        detail=f"channel {name} removed by {operator}",
        operator=operator,
        note=note,
    )
    in_flight, until = connection.execute(
        select(func.count(), func.max(deliveries.c.locked_until)).where(mine, in_progress)
    ).one()
    connection.execute(update(channels).where(channels.c.id == channel.id).values(dropped_at=now))
    left = 0.0
    if until is not None:
        ends = until if until.tzinfo is not None else until.replace(tzinfo=UTC)
        left = max((ends - now).total_seconds(), 0.0)
    return Dropped(name, cancelled, int(in_flight), left)

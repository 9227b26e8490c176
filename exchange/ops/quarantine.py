"""Operator actions on the quarantine: list, retry, cancel. Each writes the message's history
with who, when and the note.

An action names its messages either by id (exactly those, all or nothing) or by filters (a
bulk action). The rules that keep a bulk action from doing more than the operator meant live
here, once, for every caller: at least one filter (``check_request``), and no more messages
than the bulk limit (``check_limit``), and, when the caller showed a preview, exactly the
messages it showed (``expected``: else ``PreviewChanged`` says what differs, and nothing is
done). Showing before acting (dry run unless confirmed) is the caller's choice of ``dry_run``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Connection, Select, and_, exists, func, select
from sqlalchemy.sql.selectable import Subquery

from exchange.db.engine import is_postgres
from exchange.db.on_channels import Channel, channel_ids, channel_names, listed
from exchange.db.schema import aggregates, channel_aggregates, deliveries, messages
from exchange.domain.policy import KindPolicies
from exchange.domain.reasons import Reason
from exchange.domain.states import Event, State
from exchange.errors import OperatorError
from exchange.i18n import typed_time
from exchange.ops.find import aggregate_starts, matching, price_of
from exchange.queue.record import advance_strict
from exchange.queue.transitions import Change, apply

FILTER_OPTIONS = "--kind, --aggregate, --reason, --since, --until, --superseded"


# ``Filters`` as an address of the workbench names them: the quarantine's list, its export,
# its bulk actions (``all_`` before each) and the link from the list to the export carry
# exactly these (``superseded`` is "1" or absent; ``q`` is ``search``).
QUERY_FIELDS = ("reason", "kind", "aggregate", "since", "until", "q", "superseded", "channel")


# A day's margin inside the calendar: a filter's time within it has a UTC equivalent, and one in
# every zone it is shown in (no offset is a day or more), so the filter can be compared with the
# stored times and shown back (``clock_time``) without an OverflowError.
_EARLIEST = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
_LATEST = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


def filter_time(value: str, zone: tzinfo = UTC) -> datetime:
    """``since`` or ``until`` as a person types it, ``30.11.2026`` (``30.11.2026 08:00``) or
    ISO (``2026-11-30``, ``2026-11-30T08:00:00+03:00``: ``i18n.typed_time``), a time without
    its zone being ``zone``'s: the one reading of a date filter for the CLI, the
    workbench's list, export and bulk actions. ``ValueError`` for text that is neither, and
    for a time within a day of the calendar's edge (``0001-01-01T00:00:00+14:00`` is valid ISO
    and has no UTC equivalent)."""
    parsed = typed_time(value)
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=zone)
    try:
        utc = parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value!r} has no UTC equivalent") from None
    if not _EARLIEST <= utc <= _LATEST:
        raise ValueError(f"{value!r} is at the calendar's edge")
    return parsed


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    # The beginning of an aggregate or of its SKU, whatever the case: what the lists' search
    # finds them by (``find.aggregate_starts``, one condition for list, export and actions).
    aggregate: str | None = None
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    # Only quarantined messages that a newer delivered version made pointless (see
    # ``superseded_after_quarantine``).
    superseded_after_quarantine: bool = False
    # What ``find`` looks for (``find.matching``): the workbench's search box on the list.
    search: str | None = None
    # The deliveries of one channel (an id or a name); None: every channel's. A rejected
    # record, which no channel receives, is listed whatever the channel.
    channel: Channel = None

    def __post_init__(self) -> None:
        # A beginning that is blank begins everything: no filter, never a match of all (a
        # bulk cancel with ``--aggregate ""`` alone is refused as one without a filter).
        for name in ("aggregate", "search"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                object.__setattr__(self, name, None)

    def any(self) -> bool:
        return self.superseded_after_quarantine or any(
            v is not None
            for v in (self.kind, self.aggregate, self.reason, self.since, self.until, self.search)
        )


def superseded_after_quarantine(m: Any) -> ColumnElement[bool]:
    """True for a delivery (a row of ``on_channels.listed``) at or below its aggregate's
    cursor on its channel: a version at least as new was applied at that shop after this one
    was quarantined, so replaying it can only end ``stale``.

    Only latest-wins aggregates get there: a strict cursor passes a version only once that
    version itself is delivered or cancelled, never while it is quarantined. A rejected
    staging row has no aggregate and no channel, so it is never superseded.
    """
    return exists().where(
        channel_aggregates.c.aggregate_id == m.c.aggregate_id,
        channel_aggregates.c.channel_id == m.c.channel_id,
        channel_aggregates.c.done_version >= m.c.version,
    )


def newer_sent(m: Any) -> ColumnElement[bool]:
    """True for a delivery (a row of ``deliveries`` or of ``on_channels.listed``) of whose
    aggregate 1C has sent a newer version to the same channel, not cancelled there: a retry of
    this one would only end superseded by it, so a price invalid for the channel is advised
    cancel (``report.words.advice_words``'s ``newer``; seller review 35). The message's page,
    the quarantine's list and the report all read it here. A rejected record (no channel) has
    none."""
    newer = deliveries.alias("newer")
    return exists().where(
        newer.c.channel_id == m.c.channel_id,
        newer.c.aggregate_id == m.c.aggregate_id,
        newer.c.version > m.c.version,
        newer.c.state != State.CANCELLED.value,
    )


def newer_held(m: Any) -> ColumnElement[bool]:
    """True where 1C has sent a newer version (``newer_sent``) but every such version is in
    quarantine too: none will go in this one's place, and buyers keep the price delivered
    before (review 36, item 4: the advice said the newer one would go). One withheld by the
    channel is ``newer_withheld``'s; one in any other live state (on its way, delivered) goes."""
    return and_(newer_sent(m), ~_newer_beside(m, State.QUARANTINED))


def newer_withheld(m: Any) -> ColumnElement[bool]:
    """True where 1C has sent a newer version (``newer_sent``), every such version is
    withheld by the channel (the marketplace's own price quarantine holds it: Yandex Market's,
    Wildberries') or in our quarantine, and at least one is withheld: none goes to buyers in
    this one's place until someone releases it, and buyers see the price delivered before
    (review rev36b: the advice said the newer one would go in its place)."""
    withheld = deliveries.alias("withheld")
    return and_(
        newer_sent(m),
        ~_newer_beside(m, State.QUARANTINED, State.WITHHELD),
        exists().where(
            withheld.c.channel_id == m.c.channel_id,
            withheld.c.aggregate_id == m.c.aggregate_id,
            withheld.c.version > m.c.version,
            withheld.c.state == State.WITHHELD.value,
        ),
    )


def _newer_beside(m: Any, *held: State) -> ColumnElement[bool]:
    """True where a newer version of ``m``'s aggregate on its channel is in a live state other
    than ``held`` (and cancelled): on its way or delivered, so it goes in ``m``'s place."""
    going = deliveries.alias("going")
    return exists().where(
        going.c.channel_id == m.c.channel_id,
        going.c.aggregate_id == m.c.aggregate_id,
        going.c.version > m.c.version,
        going.c.state.not_in([State.CANCELLED.value, *(state.value for state in held)]),
    )


def sku_sent_since(m: Any) -> ColumnElement[bool]:
    """True for a quarantined delivery (a row of ``on_channels.listed``) of a price whose SKU
    had a price delivered on the same channel after it was quarantined (its ``updated_at``):
    a marketplace's item of that SKU went since, and it never carries the dependent price 1C
    replaced by the quarantined one (``targets.marketplace.items``, ``_replaced``: Ozon's
    old_price "0", Yandex without discountBase), so the strikethrough price the quarantine's
    words said still shown is shown no more (review rev39 W4: "Ozon still shows old_price 1400
    … a cancel leaves it shown" stayed after 1C's next price went with old price 0)."""
    later = deliveries.alias("sku_later")
    mine = aggregates.alias("sku_mine")
    theirs = aggregates.alias("sku_theirs")
    return exists().where(
        mine.c.id == m.c.aggregate_id,
        mine.c.kind == "price",
        theirs.c.sku == mine.c.sku,
        theirs.c.kind == "price",
        later.c.aggregate_id == theirs.c.id,
        later.c.channel_id == m.c.channel_id,
        later.c.state == State.DELIVERED.value,
        later.c.updated_at > m.c.updated_at,
    )


# A quarantined dependent price's words of the strikethrough price the marketplace still showed
# (``targets.marketplace.items.still_shown_words``, both wordings it has had), and what replaces
# them once a price of its SKU went since (``sku_sent_since``): said of their time, they
# became false (review rev39 W4).
_STILL_SHOWN = re.compile(
    r"; (?P<t>[^;]+?) still shows (?P<m>\S+) (?P<a>\S+), the strikethrough price 1C "
    r"replaced: buyers see it until (?:1C's next price of this SKU goes without it, or until "
    r"a retry of this "
    r"one sends the price without it again and the marketplace takes it; a cancel leaves it "
    r"shown|this one is retried or cancelled, or until 1C's next price of this SKU goes "
    r"without it)"
)


def shown_now(last_error: str | None, sent_since: bool) -> str | None:
    """``last_error`` as true now: where it says the marketplace still shows the strikethrough
    price 1C replaced and a price of the SKU went since (``sku_sent_since``), it says that
    price went without it, so the marketplace no longer shows it."""
    if not last_error or not sent_since:
        return last_error
    return _STILL_SHOWN.sub(
        lambda said: (
            f"; {said['t']} showed {said['m']} {said['a']}, the strikethrough price 1C "
            f"replaced, when this was quarantined; a later price of this SKU went without it, "
            f"so {said['t']} no longer shows it"
        ),
        last_error,
    )


class Newer(NamedTuple):
    """What the message's page reads of a quarantined message (``newer_version_sent``)."""

    sent: bool  # 1C has sent a newer version since, on its channel (``newer_sent``)
    held: bool  # every such version is in quarantine too (``newer_held``)
    withheld: bool  # ... or withheld by the channel, one at least (``newer_withheld``)
    superseded: bool  # superseded after quarantine (``superseded_after_quarantine``)


def newer_version_sent(connection: Connection, message_id: str) -> Newer:
    """Whether the message is quarantined on a channel to which 1C has sent a newer version of
    its aggregate since (``newer_sent``), whether every such version is in quarantine too
    (``newer_held``) or, one at least, withheld by the channel (``newer_withheld``), and
    whether it is superseded after quarantine there (``superseded_after_quarantine``): what
    the message's page reads, as the list and the report do. Quarantined on several channels,
    held where every channel's newer versions are held, withheld where each channel's are
    held or withheld and one's at least withheld."""
    quarantined = deliveries.alias("q")
    pk = select(messages.c.id).where(messages.c.message_id == message_id).scalar_subquery()
    rows = connection.execute(
        select(
            newer_sent(quarantined),
            newer_held(quarantined),
            newer_withheld(quarantined),
            superseded_after_quarantine(quarantined),
        ).where(
            quarantined.c.message_pk == pk,
            quarantined.c.state == State.QUARANTINED.value,
        )
    ).all()
    sent = [(bool(held), bool(withheld)) for newer, held, withheld, _ in rows if newer]
    superseded = bool(rows) and all(bool(row[3]) for row in rows)
    held = bool(sent) and all(h for h, _ in sent)
    withheld = bool(sent) and all(h or w for h, w in sent) and any(w for _, w in sent)
    return Newer(bool(sent), held, withheld, superseded)


def rows_in(ids: Sequence[int], state: State) -> Subquery:
    """The deliveries on the channels ``ids`` and the rejected records, as a list of
    ``state`` reads them (``on_channels.listed``)."""
    return listed(ids, states=[state.value], name="m")


def _base(m: Subquery, state: State = State.QUARANTINED) -> Select[Any]:
    """The rows of ``m`` with what the quarantine's advice depends on: superseded after
    quarantine, and (a list of the quarantine only) a newer version sent since
    (``newer_sent``)."""
    columns = [superseded_after_quarantine(m).label("superseded_after_quarantine")]
    if state == State.QUARANTINED:
        columns.append(newer_sent(m).label("newer_version_sent"))
        columns.append(newer_held(m).label("newer_version_held"))
        columns.append(newer_withheld(m).label("newer_version_withheld"))
        columns.append(sku_sent_since(m).label("sku_sent_since"))
    return select(m, *columns)


def _query(filters: Filters, postgres: bool, ids: Sequence[int]) -> Select[Any]:
    m = rows_in(ids, State.QUARANTINED)
    return _where(_base(m), m, filters, postgres).order_by(m.c.updated_at, m.c.id, m.c.channel_id)


def _where(
    q: Select[Any],
    m: Subquery,
    filters: Filters,
    postgres: bool,
    *,
    reason: bool = True,
    state: State = State.QUARANTINED,
) -> Select[Any]:
    """``q`` narrowed to the rows of ``m`` (``rows_in``) in ``state`` (the quarantine unless
    said) the filters select (without the reason's filter when ``reason`` is False: the
    reasons a filter may offer). The quarantine's list and the lists by state (``page_of``)
    share every filter."""
    q = q.where(m.c.state == state.value)
    if filters.kind is not None:
        q = q.where(m.c.kind == filters.kind)
    if filters.aggregate is not None:
        q = q.where(aggregate_starts(filters.aggregate, postgres, m.c.id))
    if reason and filters.reason is not None:
        q = q.where(m.c.reason == filters.reason)
    # Every transition sets updated_at (queue.transitions.apply, a lease's too): a delivery
    # has been in its state since then (a quarantined one since it was quarantined).
    if filters.since is not None:
        q = q.where(m.c.updated_at >= filters.since)
    if filters.until is not None:
        q = q.where(m.c.updated_at < filters.until)
    if filters.superseded_after_quarantine:
        q = q.where(superseded_after_quarantine(m))
    if filters.search:
        q = q.where(matching(filters.search, postgres, m.c.id))
    return q


def entry(row: Any, names: dict[int, str] | None = None) -> dict[str, Any]:
    """One quarantined message as operators and machines read it (stable field names).

    ``row`` is a row of ``list_quarantined``'s query: the message's columns and
    ``superseded_after_quarantine``; ``names``: the channels' names by id
    (``on_channels.channel_names``), for ``channel``.
    """
    channel_id = row["channel_id"]
    return {
        "message_id": row["message_id"],
        # contract 13: the delivery's channel; None for intake's rejected record (no channel's)
        "channel": (names or {}).get(channel_id) if channel_id is not None else None,
        "kind": row["kind"],
        "aggregate": row["aggregate"],
        "version": row["version"],
        "reason": row["reason"],
        "attempts": row["attempts"],
        "last_status": row["last_status"],
        # Where its words of the marketplace's strikethrough price became false since (a
        # price of its SKU went without it), as true now (``shown_now``).
        "last_error": shown_now(row["last_error"], bool(row.get("sku_sent_since"))),
        "source_ref": row["source_ref"],
        "name": row["name"],
        "first_seen": row["taken_at"].isoformat(),
        "quarantined_at": row["updated_at"].isoformat(),
        "rejected_row": bool(row["rejected"]),
        "staging_id": row["staging_id"],
        "superseded_after_quarantine": bool(row["superseded_after_quarantine"]),
        # a quarantined one's: 1C has sent a newer version since (``newer_sent``)
        "newer_version_sent": bool(row.get("newer_version_sent")),
        # and every such version is in quarantine too: none goes in its place (``newer_held``)
        "newer_version_held": bool(row.get("newer_version_held")),
        # or withheld by the channel, one at least: none reaches buyers in its place until it
        # is released (``newer_withheld``)
        "newer_version_withheld": bool(row.get("newer_version_withheld")),
    }


def listed_entry(row: Any, names: dict[int, str] | None = None) -> dict[str, Any]:
    """One message of a list by state (``page_of``) as the workbench shows it: ``entry``'s
    fields, its state and since when it is in it, when a delayed one goes again, whose lease
    an in-flight one is, and a price's price and currency."""
    next_try, until = row["next_try_at"], row["locked_until"]
    return {
        **entry(row, names),
        "state": row["state"],
        "in_state_since": row["updated_at"].isoformat(),
        "next_try_at": next_try.isoformat() if next_try is not None else None,
        "locked_by": row["locked_by"],
        "locked_until": until.isoformat() if until is not None else None,
        **price_of(row["kind"], row["payload"]),
    }


def list_quarantined(
    connection: Connection, filters: Filters, *, priced: bool = False
) -> list[dict[str, Any]]:
    """The quarantined deliveries (and rejected records) the filters select; ``priced`` adds
    a price's price and currency (what the console list shows after the id, as the
    workbench's list does)."""
    ids = channel_ids(connection, filters.channel)
    query = _query(filters, is_postgres(connection), ids)
    rows = connection.execute(query).mappings()
    names = channel_names(connection)
    if priced:
        return [{**entry(row, names), **price_of(row["kind"], row["payload"])} for row in rows]
    return [entry(row, names) for row in rows]


# The orders a page of the quarantine may take: by when it came (how long it waits), attempts,
# aggregate, reason or kind; ties by id, so that pages never overlap. Each names a column of
# ``rows_in``.
SORTS: dict[str, str] = {
    "since": "updated_at",
    "attempts": "attempts",
    "aggregate": "aggregate",
    "reason": "reason",
    "kind": "kind",
}


# The orders of a list by state (``page_of`` with another state than the quarantine): each a
# walk of an index that begins with the channel and the state
# (``ix_deliveries_channel_id_state_updated_at_message_pk``; the delayed by
# ``ix_deliveries_channel_id_state_next_try_at``), so a page of a million delivered costs what
# a page of a hundred does. The quarantine's other orders sort what its filters select, which
# a list of every delivered message could not afford.
STATE_SORTS: dict[State, dict[str, str]] = {
    State.NEW: {"since": "updated_at"},
    State.DELAYED: {"next_try": "next_try_at", "since": "updated_at"},
    State.IN_PROGRESS: {"since": "updated_at"},
    State.DELIVERED: {"since": "updated_at"},
    State.CANCELLED: {"since": "updated_at"},
    State.WITHHELD: {"since": "updated_at"},
    State.QUARANTINED: SORTS,
}


def sorts_of(state: State) -> dict[str, str]:
    """The orders a list of ``state`` may take (the first is its default)."""
    return STATE_SORTS[state]


@dataclass(frozen=True)
class Page:
    entries: list[dict[str, Any]]
    total: int  # every entry the filters select, on all pages (at most the count's bound)
    # The filters select more than the bound counted (``count_limit``): ``total`` is the bound.
    more: bool = False


def page_query(
    filters: Filters,
    postgres: bool,
    state: State,
    sort: str,
    descending: bool,
    offset: int,
    limit: int,
    ids: Sequence[int] = (),
) -> Select[Any]:
    """The SELECT of one page of ``page_of``, of the deliveries on the channels ``ids``."""
    sorts = sorts_of(state)
    if sort not in sorts:
        raise OperatorError(f"unknown sort {sort!r}: one of {', '.join(sorts)}")
    m = rows_in(ids, state)
    column = m.c[sorts[sort]]
    order = (
        (column.desc(), m.c.id.desc(), m.c.channel_id.desc())
        if descending
        else (column, m.c.id, m.c.channel_id)
    )
    # A page number from an address may be any size: past 2^62 no page holds anything, and
    # the databases take no integer past 2^63 (a 500 on /quarantine?page=99999999999999999999).
    offset, limit = min(max(offset, 0), 2**62), min(max(limit, 0), 2**62)
    return (
        _where(_base(m, state), m, filters, postgres, state=state)
        .order_by(*order)
        .offset(offset)
        .limit(limit)
    )


def page_of(
    connection: Connection,
    filters: Filters,
    *,
    sort: str = "since",
    descending: bool = False,
    offset: int = 0,
    limit: int = 100,
    state: State = State.QUARANTINED,
    count_limit: int | None = None,
) -> Page:
    """One page of the deliveries in ``state`` (the quarantine unless said) on the filter's
    channel (every channel for None), and the rejected records in it, sorted and counted
    in the database (the list is never read whole: a page of 10,000 entries costs what a page
    of 100 does). ``count_limit`` counts no further than that many (the delivered may be
    millions: an exact count would read them all); ``Page.more`` says there are more."""
    postgres = is_postgres(connection)
    ids = channel_ids(connection, filters.channel)
    query = page_query(filters, postgres, state, sort, descending, offset, limit, ids)
    rows = connection.execute(query).mappings()
    m = rows_in(ids, state)
    if count_limit is None:
        total = connection.execute(
            _where(select(func.count()).select_from(m), m, filters, postgres, state=state)
        ).scalar_one()
        return Page([listed_entry(row, channel_names(connection)) for row in rows], int(total))
    # Counted as far as the bound and one more, which says there are more: the ids read (a
    # few ten thousand integers at most), not a count of a subquery, which would nest the
    # search's SQL one level deeper than SQLite's parser takes.
    bounded = _where(select(m.c.id), m, filters, postgres, state=state).limit(count_limit + 1)
    counted = len(connection.execute(bounded).all())
    entries = [listed_entry(row, channel_names(connection)) for row in rows]
    return Page(entries, min(counted, count_limit), more=counted > count_limit)


def described(connection: Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What an action's preview says beside each id, so the operator sees what they retry or
    cancel for good: its aggregate (the SKU), the product's name, and a price's price and
    currency as its payload says them."""
    found: dict[str, dict[str, Any]] = {}
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), 1000):  # a bulk action may name thousands
        rows = connection.execute(
            select(
                messages.c.message_id,
                messages.c.kind,
                messages.c.aggregate,
                messages.c.name,
                messages.c.payload,
            ).where(messages.c.message_id.in_(wanted[start : start + 1000]))
        ).mappings()
        for r in rows:
            found[r["message_id"]] = {
                "kind": r["kind"],
                "aggregate": r["aggregate"],
                "name": r["name"],
                **price_of(r["kind"], r["payload"]),
            }
    return found


def still_quarantined(
    connection: Connection, ids: Sequence[str], channel: Channel = None
) -> list[str]:
    """Which of ``ids`` are quarantined now on ``channel`` (every channel for None), or are
    rejected records still quarantined (in their order): what a failed confirmation may still
    act on once another operator or the service moved the others."""
    wanted = list(dict.fromkeys(ids))
    m = rows_in(channel_ids(connection, channel), State.QUARANTINED)
    found: set[str] = set()
    for start in range(0, len(wanted), 1000):
        found.update(
            connection.execute(
                select(m.c.message_id).where(
                    m.c.message_id.in_(wanted[start : start + 1000]),
                    m.c.state == State.QUARANTINED.value,
                )
            ).scalars()
        )
    return [i for i in wanted if i in found]


def reasons_present(
    connection: Connection, filters: Filters, state: State = State.QUARANTINED
) -> list[tuple[str, int]]:
    """The reasons of the entries in ``state`` the other filters select, each with how many:
    what a reason filter may offer (never a reason nothing is quarantined for)."""
    m = rows_in(channel_ids(connection, filters.channel), state)
    query = _where(
        select(m.c.reason, func.count()).select_from(m),
        m,
        filters,
        is_postgres(connection),
        reason=False,
        state=state,
    )
    rows = connection.execute(query.group_by(m.c.reason).order_by(m.c.reason))
    return [(str(reason or ""), int(count)) for reason, count in rows]


def check_request(ids: Sequence[str], filters: Filters, action: str) -> None:
    """Ids or filters, not both and not neither: an action without either would touch the
    whole quarantine, and one with both would leave the operator guessing which applied.

    Pure, so that the command line can refuse before it opens the database.
    """
    if ids and filters.any():
        raise OperatorError(f"give message ids or filters to {action}, not both")
    if not ids and not filters.any():
        raise OperatorError(
            f"a bulk {action} needs at least one filter ({FILTER_OPTIONS}), "
            f"or give the ids of the messages to {action}"
        )


def check_limit(count: int, limit: int | None, action: str) -> None:
    """Refuse a bulk action over ``limit`` messages: the operator confirms a large number by
    naming it (``--limit N``), so a filter that matches more than they thought does nothing."""
    if limit is not None and count > limit:
        raise OperatorError(
            f"a bulk {action} would touch {count} messages, more than the limit of {limit}: "
            f"narrow the filters, or add --limit {count} to {action} them all "
            "(the default limit is EXCHANGE_BULK_LIMIT)"
        )


class PreviewChanged(OperatorError):
    """A bulk action's filters select other messages now than the preview showed."""

    def __init__(self, action: str, added: list[str], gone: list[str]) -> None:
        self.added, self.gone = added, gone
        super().__init__(
            f"the {action} was not done: since the preview, {len(added)} message(s) came into "
            f"the filter and {len(gone)} left it; look at the preview again"
        )


def check_unchanged(touched: Sequence[str], expected: Sequence[str] | None, action: str) -> None:
    """A confirmed bulk action acts on what its preview showed, or not at all: a filter
    re-run at confirmation may select entries that arrived after the preview."""
    if expected is None:
        return
    now, shown = set(touched), set(expected)
    added = [i for i in touched if i not in shown]
    gone = sorted(shown - now)
    if added or gone:
        raise PreviewChanged(action, added, gone)


def _select_for_action(connection: Connection, ids: Sequence[str], filters: Filters) -> list[Any]:
    """The quarantined deliveries (on the filter's channel, every channel for None) and
    rejected records an action moves: of the messages ``ids`` names (each must be quarantined
    somewhere), or that the filters select."""
    postgres = is_postgres(connection)
    chans = channel_ids(connection, filters.channel)
    m = rows_in(chans, State.QUARANTINED)
    if ids:
        q = _base(m).where(m.c.message_id.in_(list(ids))).order_by(m.c.id, m.c.channel_id)
    else:
        q = _query(filters, postgres, chans)
    if postgres:
        # Another operator acting on the same messages waits, then finds them no longer
        # quarantined (apply is guarded by the from-state): their rows are locked first (in
        # id order), and read again once the lock is had.
        pks = sorted({row["id"] for row in connection.execute(q).mappings()})
        for start in range(0, len(pks), 1000):
            connection.execute(
                select(messages.c.id)
                .where(messages.c.id.in_(pks[start : start + 1000]))
                .order_by(messages.c.id)
                .with_for_update()
            ).all()
    rows = list(connection.execute(q).mappings())
    if ids:
        seen: dict[str, Any] = {}
        for row in rows:
            seen.setdefault(row["message_id"], row)
        missing = [i for i in ids if i not in seen]
        if missing:
            raise OperatorError(f"no such message: {', '.join(missing)}")
        # Retry and cancel act where the message is quarantined (contract 13).
        rows = [row for row in rows if row["state"] == State.QUARANTINED.value]
        quarantined = {row["message_id"] for row in rows}
        not_q = [i for i in ids if i not in quarantined]
        if not_q:
            states = ", ".join(f"{i} is {seen[i]['state']}" for i in not_q)
            raise OperatorError(f"only quarantined messages can be changed: {states}")
    return rows


@dataclass
class ActionResult:
    touched: list[str]
    skipped: list[tuple[str, str]]
    # contract 13: how many deliveries the action moves (or would) on each channel, by name;
    # None: intake's rejected records, no channel's. What the preview counts per channel.
    per_channel: dict[str | None, int] = field(default_factory=dict)


def per_channel(connection: Connection, rows: Sequence[Any]) -> dict[str | None, int]:
    """How many of ``rows`` (``_select_for_action``'s) are on each channel, by its name, in
    the channels' order; intake's rejected records under None, last."""
    names = channel_names(connection)
    counted: dict[str | None, int] = {}
    for row in sorted(rows, key=lambda r: (r["channel_id"] is None, r["channel_id"] or 0)):
        key = names.get(row["channel_id"]) if row["channel_id"] is not None else None
        counted[key] = counted.get(key, 0) + 1
    return counted


def retry(
    connection: Connection,
    ids: Sequence[str],
    filters: Filters,
    *,
    operator: str,
    note: str | None,
    now: datetime,
    dry_run: bool,
    limit: int | None = None,
    expected: Sequence[str] | None = None,
    skip_rejected: bool = False,
) -> ActionResult:
    """Replay with the same message_id: attempts start again; a strict message takes its
    place in the order again; its gap clock starts again.

    ``limit`` bounds a bulk retry (by filters); None means no bound. ``expected``: the ids a
    preview showed (``check_unchanged``). Ids naming a rejected staging row (which can only
    be cancelled) are refused, all or nothing; with ``skip_rejected`` (a page of the
    workbench's list checked whole) such rows are skipped, said so, and the rest go again,
    unless nothing is left to retry.
    """
    check_request(ids, filters, "retry")
    rows = _select_for_action(connection, ids, filters)
    touched, skipped, changes = [], [], []
    for row in rows:
        if row["rejected"]:
            skipped.append(
                (
                    row["message_id"],
                    "a rejected staging row cannot be replayed: 1C "
                    "must write a corrected row (cancel this record to close it)",
                )
            )
            continue
        touched.append(row["message_id"])
        detail = f"retried by {operator} (was {row['reason']})"
        if row["superseded_after_quarantine"]:
            # Accepted, never sent: the claim refuses a version at or below the delivered one,
            # and the next cycle's coalescing cancels it, reason stale.
            detail += "; a version at least as new was delivered since: it ends stale, not sent"
        changes.append(
            Change(
                row["id"],
                Event.OPERATOR_RETRY,
                State.QUARANTINED,
                State.NEW,
                # The receipt an attempt left for the next (Yandex Market's ``ym-accepted:``,
                # "accepted, read it back") is not the person's: a retry sends the message once
                # more (review ym400b: a retried price was only read back, quarantined again).
                values={
                    "attempts": 0,
                    "next_try_at": None,
                    "waiting_since": now,
                    "reason": None,
                    "receipt": None,
                },
                operator=operator,
                note=note,
                detail=detail,
                channel_id=row["channel_id"],  # None for a rejected record: the message's own
            )
        )
    if ids and skipped and not (skip_rejected and touched):
        raise OperatorError(f"{skipped[0][0]}: {skipped[0][1]}")
    if not ids:
        check_unchanged(touched, expected, "retry")
        check_limit(len(touched), limit, "retry")
    if not dry_run:
        apply(connection, changes, now)
    moved = [row for row in rows if not row["rejected"]]
    return ActionResult(touched, skipped, per_channel(connection, moved))


def cancel(
    connection: Connection,
    ids: Sequence[str],
    filters: Filters | None = None,
    *,
    operator: str,
    note: str,
    now: datetime,
    kinds: KindPolicies,
    dry_run: bool = False,
    limit: int | None = None,
    expected: Sequence[str] | None = None,
) -> ActionResult:
    """End quarantined messages for good (kept for audit); by ids, or by filters in bulk.

    A cancelled strict version no longer holds its aggregate: the cursor steps over it, so
    the versions held behind it go on. ``limit`` bounds a bulk cancel; None means no bound.
    ``expected``: the ids a preview showed (``check_unchanged``).
    """
    filters = filters or Filters()
    if not note.strip():
        raise OperatorError("--note is required: say why the message is cancelled")
    check_request(ids, filters, "cancel")
    rows = _select_for_action(connection, ids, filters)
    touched = [row["message_id"] for row in rows]
    if not ids:
        check_unchanged(touched, expected, "cancel")
        check_limit(len(rows), limit, "cancel")
    counted = per_channel(connection, rows)
    if dry_run:
        return ActionResult(touched, [], counted)
    changes = [
        Change(
            row["id"],
            Event.OPERATOR_CANCEL,
            State.QUARANTINED,
            State.CANCELLED,
            values={"reason": Reason.OPERATOR.value},
            operator=operator,
            note=note,
            detail=f"cancelled by {operator} (was {row['reason']})",
            channel_id=row["channel_id"],  # None for a rejected record: the message's own
        )
        for row in rows
    ]
    apply(connection, changes, now)
    aggregate_ids = sorted({row["aggregate_id"] for row in rows if row["aggregate_id"] is not None})
    if aggregate_ids and kinds.strict:
        advance_strict(connection, aggregate_ids, kinds)
    return ActionResult(touched, [], counted)


def act(
    connection: Connection,
    action: str,
    ids: Sequence[str],
    filters: Filters,
    *,
    operator: str,
    note: str | None,
    now: datetime,
    kinds: KindPolicies,
    dry_run: bool,
    limit: int | None,
    expected: Sequence[str] | None = None,
    skip_rejected: bool = False,
) -> ActionResult:
    """The one manual action on quarantined messages (``retry`` or ``cancel``) that the CLI
    and the workbench both call: its preview is the same call with ``dry_run``."""
    if action == "retry":
        return retry(
            connection,
            ids,
            filters,
            operator=operator,
            note=note,
            now=now,
            dry_run=dry_run,
            limit=limit,
            expected=expected,
            skip_rejected=skip_rejected,
        )
    if action == "cancel":
        if not note:
            raise OperatorError("a cancel needs a note: why it ends for good")
        return cancel(
            connection,
            ids,
            filters,
            operator=operator,
            note=note,
            now=now,
            kinds=kinds,
            dry_run=dry_run,
            limit=limit,
            expected=expected,
        )
    raise OperatorError(f"unknown action {action!r}: retry or cancel")

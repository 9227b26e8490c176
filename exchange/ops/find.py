"""Any message in any state, found by what an operator knows: the beginning of a SKU, an
aggregate, a message_id, or of any word of a 1C document (``source_ref``) or a product name;
and what a retry or a cancel would set going besides the messages it names (the consequences
a preview states)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    and_,
    false,
    func,
    literal,
    or_,
    select,
    union,
)

from exchange.db.channels import seed_from, untaken_kinds
from exchange.db.engine import is_postgres
from exchange.db.on_channels import (
    Channel,
    channel_ids,
    channel_names,
    listed,
    on,
    removed_at,
    targets_by_id,
)
from exchange.db.schema import aggregates, cml_catalog, deliveries, history, messages
from exchange.domain.clock import ensure_utc
from exchange.domain.policy import KindPolicies
from exchange.domain.prices import DEFAULT_CURRENCY
from exchange.domain.reasons import CANCELLED_REASONS, Reason
from exchange.domain.search_key import search_key
from exchange.domain.states import PENDING, State, values
from exchange.errors import OperatorError
from exchange.ops.waits import wait_of, waits_said

FOUND_SHOWN = 200
HTTP_REASON = re.compile(r"http-[45][0-9][0-9]")


def known_reasons() -> list[str]:
    """The reasons a filter may name: every fixed one, and ``http-NNN`` for a site's 4xx/5xx."""
    return sorted(r.value for r in Reason)


def reasons_in(state: State) -> list[str]:
    """The reasons a message in ``state`` can carry: what the reason filter of a list too long
    to count offers (the delivered may be millions), never a reason that cannot occur there."""
    if state is State.QUARANTINED:
        return known_reasons()
    if state is State.CANCELLED:
        return sorted(r.value for r in CANCELLED_REASONS)
    return []


def check_filters(reason: str | None, kind: str | None, kinds: Iterable[str]) -> None:
    """A filter that names no known reason or kind is a typo: refused with the valid values,
    never run as a filter that matches nothing and says so as if all were well."""
    if reason is not None and reason not in known_reasons() and not HTTP_REASON.fullmatch(reason):
        raise OperatorError(
            f"unknown reason {reason!r}: one of {', '.join(known_reasons())} or http-NNN"
        )
    known = sorted(kinds)
    if kind is not None and kind not in known:
        raise OperatorError(f"unknown kind {kind!r}: one of {', '.join(known)}")


def _like_prefix(text: str) -> str:
    """``text%`` for LIKE ... ESCAPE '\\': a ``%`` or ``_`` in what the operator typed is
    that character, never a wildcard."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


# Above every character: ``text + LAST`` bounds the strings that begin with ``text``.
LAST = "\U0010ffff"


def _starts(column: Any, term: str, postgres: bool) -> ColumnElement[bool]:
    """The column begins with ``term`` (as stored: give a ``*_key`` column a folded term): a
    range of its prefix index (migrations 0016, 0017). PostgreSQL reads LIKE 'x%' as that
    range through ``varchar_pattern_ops``; SQLite would only with a NOCASE index (its LIKE
    ignores the case of Latin letters), so the range is spelled beside the LIKE, in code point
    order (SQLite's binary collation of UTF-8)."""
    like = column.like(_like_prefix(term), escape="\\")
    if postgres:
        return like  # type: ignore[no-any-return]
    return and_(column >= term, column < term + LAST, like)


def aggregate_starts(term: str, postgres: bool, pk: Any = None) -> ColumnElement[bool]:
    """A message whose aggregate or SKU begins with ``term``, whatever the case of either
    (Cyrillic too): the lists' search (``matching``) and the ``aggregate`` filter of the
    quarantine's list, export and bulk actions (``quarantine.Filters``) both mean this.

    Read through the folded keys' indexes (migration 0017): ``aggregate_key`` of the
    message, ``sku_key`` of its aggregate. ``pk``: the column of a message's id the condition
    is on (``messages.id`` when None)."""
    return (messages.c.id if pk is None else pk).in_(union(*_aggregate_parts(term, postgres)))


def _aggregate_parts(term: str, postgres: bool) -> list[Select[Any]]:
    """The ids of ``aggregate_starts``, as parts of a UNION."""
    key = search_key(term)
    found = messages.alias("by_aggregate")
    by_sku = select(aggregates.c.id).where(_starts(aggregates.c.sku_key, key, postgres))
    return [
        select(found.c.id).where(_starts(found.c.aggregate_key, key, postgres)),
        select(found.c.id).where(found.c.aggregate_id.in_(by_sku)),
    ]


def _article_part(term: str, postgres: bool) -> Select[Any]:
    """The messages of the products whose 1C article begins with ``term``, whatever its case,
    where SKUs are 1C ids (``EXCHANGE_1C_SKU=id``): the catalogue keeps each product's (or
    offer's) article by its ``Ид`` (``cml_catalog``), and a SKU is that ``Ид``, or it
    followed by ``#`` and a characteristic's. Under ``article`` the SKU is the article, found
    by ``_aggregate_parts``.

    The articles are a range of their index (migration 0019); each one's aggregates a range
    of ``ix_aggregates_sku_key`` beginning with its ``Ид`` (PostgreSQL compares byte-wise
    with ``~>=~`` and ``~<~``, the operators of that index's ``varchar_pattern_ops``)."""
    catalog = cml_catalog.alias("by_article")
    owner = aggregates.alias("article_aggregates")
    above = catalog.c.key_key.concat(literal(LAST, String))
    if postgres:
        within = and_(
            owner.c.sku_key.op("~>=~", is_comparison=True)(catalog.c.key_key),
            owner.c.sku_key.op("~<~", is_comparison=True)(above.self_group()),
        )
    else:
        within = and_(owner.c.sku_key >= catalog.c.key_key, owner.c.sku_key < above)
    products = (
        select(owner.c.id)
        .select_from(catalog.join(owner, within))
        .where(
            catalog.c.kind == "article",
            _starts(catalog.c.value_key, search_key(term), postgres),
        )
    )
    found = messages.alias("by_article_messages")
    return select(found.c.id).where(found.c.aggregate_id.in_(products))


# What parts the words of a name or a 1C document, besides a space: «Дрель «Мастер» 800 Вт»
# has the word «Мастер», «Кофе (молотый), 250 г» the word «молотый». Not ``-``, ``.`` or
# ``/``: they are inside a SKU, a file's name or a number («Wi-Fi», «offers.xml», «1.5 л»).
SEPARATORS = "«»„“”\"'‘’()[],;:!?—–"


def word_term(term: str) -> str:
    """The term as a word is looked for: the punctuation at its ends is not part of it
    («мастер, ``Мастер»`` and ``мастер`` look for the same word); each separator inside it
    is a space, as in the words it is compared with (``_words_of``)."""
    stripped = term.strip(SEPARATORS + " \t")
    return "".join(" " if c in SEPARATORS else c for c in stripped)


def _words_of(column: Any) -> Any:
    """The column with each separator a space, in SQL both databases speak (``replace``)."""
    spaced = column
    for character in SEPARATORS:
        spaced = func.replace(spaced, character, " ", type_=String)
    return spaced


def _word_starts(column: Any, spellings: Sequence[str]) -> ColumnElement[bool]:
    """A word of the column begins with one of ``spellings``: «offers.xml» in «1C exchange
    offers.xml 2026-11-30T10:00:00», «Мастер» in «Дрель «Мастер» 800 Вт» (its first word
    too, even after a «). The plain LIKE '%term%' comes first: it is cheap and passes few
    texts, and only those are spelt with spaces for separators (``_words_of``, 19 replaces,
    which costs 5–15 times as much per text)."""
    words = literal(" ").concat(_words_of(column))
    return or_(
        *(
            and_(
                # The spelling's first word is in the text as it is (the rest may be parted
                # by punctuation there).
                column.like("%" + _like_prefix(spelling.split(" ")[0]), escape="\\"),
                words.like("% " + _like_prefix(spelling), escape="\\"),
            )
            for spelling in spellings
        )
    )


def _spellings(term: str) -> list[str]:
    """Words as people type them: as typed, in lower case and with a capital first letter
    («кофе» finds «Кофе молотый» and «Молотый кофе»); neither database folds Cyrillic case."""
    return sorted({term, term.lower(), term[:1].upper() + term[1:].lower()})


def matching(term: str, postgres: bool, pk: Any = None) -> ColumnElement[bool]:
    """What ``find`` looks for, as one condition on ``messages`` (on ``pk``, a column of a
    message's id, when given): the beginning of a SKU or an
    aggregate or of the message_id, whatever its case (their folded keys, migration 0017), or
    of a product's 1C article where SKUs are 1C ids (``_article_part``); of
    the 1C document (``source_ref``) or a product name, or of any word of these two (words
    parted by spaces and punctuation, ``SEPARATORS``).

    Set-based, one UNION of ids, each part reading an index (migrations 0016, 0017): a
    beginning is a range of its column's index; a word inside is looked for among the
    distinct documents and names (a scan of their index, which is far smaller than the table,
    as there are far fewer documents than messages), and their messages are then read through
    the same index."""
    found = messages.alias("found")
    parts = [
        *_aggregate_parts(term, postgres),
        _article_part(term, postgres),
        select(found.c.id).where(_starts(found.c.message_id_key, search_key(term), postgres)),
    ]
    word = word_term(term)
    for column in ("source_ref", "name"):
        words = messages.alias(f"{column}_words")
        for spelling in _spellings(term):
            parts.append(select(found.c.id).where(_starts(found.c[column], spelling, postgres)))
        if word:
            inside = (
                select(words.c[column])
                .where(_word_starts(words.c[column], _spellings(word)))
                .distinct()
            )
            parts.append(select(found.c.id).where(found.c[column].in_(inside)))
    return (messages.c.id if pk is None else pk).in_(union(*parts))


def matching_ids(term: str, postgres: bool) -> Any:
    """The ids of the messages ``matching`` the term, as a CTE: a condition on it nests the
    search one level less deep than ``matching`` does (SQLite's parser takes the search inside
    each part of ``on_channels.listed`` only so)."""
    return select(messages.c.id).where(matching(term, postgres)).cte("matching_ids")


def find(
    connection: Connection,
    term: str,
    limit: int = FOUND_SHOWN,
    offset: int = 0,
    channel: Channel = None,
) -> list[dict[str, Any]]:
    """Each delivery on ``channel`` (every channel for None) of the messages ``matching`` the
    term, and each rejected record it matches, newest first, at most ``limit`` from ``offset``
    (the workbench's pages of what it found). An empty term finds nothing (never the whole
    table). A ``price`` message says its price and currency."""
    term = term.strip()
    if not term:
        return []
    offset, limit = min(max(offset, 0), 2**62), min(max(limit, 0), 2**62)
    found = matching_ids(term, is_postgres(connection))
    m = listed(
        channel_ids(connection, channel),
        name="found_rows",
        of=lambda pk: pk.in_(select(found.c.id)),
        homeless=True,
    )
    rows = (
        connection.execute(
            select(
                m,
                attempted(m).label("attempted"),
                wait_of(m.c.id, m.c.channel_id, m.c.state).label("wait"),
            )
            .order_by(m.c.created_at.desc(), m.c.id.desc(), m.c.channel_id)
            .offset(offset)
            .limit(limit)
        )
        .mappings()
        .all()
    )
    names, targets = channel_names(connection), targets_by_id(connection)
    removed = removed_at(connection)
    kinds = {r["kind"] for r in rows if _nowhere(r)}
    untaken = set(untaken_kinds(connection, sorted(kinds))) if kinds else set()
    starts = seed_from(connection, [r["message_id"] for r in rows if _nowhere(r)])
    return [
        {
            "message_id": r["message_id"],
            # contract 13: the delivery's channel (None: intake's rejected record, no channel's)
            "channel": names.get(r["channel_id"]) if r["channel_id"] is not None else None,
            # its target: a marketplace's reason in the marketplace's words
            "target": targets.get(r["channel_id"]) if r["channel_id"] is not None else None,
            # when its channel was dropped (None: a live channel's): a name added again later
            # is another channel, whose delivery is the one that goes (review ozon 34b)
            "channel_removed_at": removed.get(r["channel_id"]),
            "kind": r["kind"],
            "aggregate": r["aggregate"],
            "version": r["version"],
            "state": r["state"],
            "reason": r["reason"],
            "source_ref": r["source_ref"],
            "name": r["name"],
            "last_error": r["last_error"],
            "attempted": bool(r["attempted"]),
            # delayed waiting for its channel, not for a retry; of those, waiting for 1C's
            # other price type or for a person's decision (exchange.ops.waits)
            **waits_said(r["wait"] or ""),
            **price_of(r["kind"], r["payload"]),
            "attempts": r["attempts"],
            # when a delayed one is due (its words' "goes in N s" was counted when the wait
            # began: ``wait_from_now`` counts it from now)
            "next_try_at": r["next_try_at"].isoformat() if r["next_try_at"] else None,
            "created_at": r["created_at"].isoformat(),
            "updated_at": r["updated_at"].isoformat(),
            # contract 1: an accepted message with no delivery on any channel (``undelivered``),
            # and whether that is because no channel takes its kind now
            **nowhere_facts(_nowhere(r), r["kind"] in untaken, starts.get(r["message_id"])),
        }
        for r in rows
    ]


def find_whole(
    connection: Connection, term: str, channel: Channel = None, shown: int = FOUND_SHOWN
) -> list[dict[str, Any]]:
    """``find``'s rows of at most ``shown`` messages, each with every one of its deliveries
    on ``channel`` (every channel for None): a message is never cut at the limit, so what is
    said of it (``by_message``'s ``deliveries``) names each of its channels."""
    per = max(1, len(channel_ids(connection, channel)))
    rows = find(connection, term, limit=shown * per, channel=channel)
    kept = {row["message_id"] for row in by_message(rows)[:shown]}
    return by_version([row for row in rows if row["message_id"] in kept])


def by_version(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``find``'s rows (the newest received first) as the command line lists them: each
    aggregate's versions together, newest version first (the order 1C meant, whatever order
    they came in: review 33), the aggregates in the order their newest arrival has; a
    message's deliveries stay adjacent, in their order."""
    first: dict[str, int] = {}
    for row in rows:
        first.setdefault(row["aggregate"], len(first))
    order = sorted(
        enumerate(rows),
        key=lambda pair: (first[pair[1]["aggregate"]], -(pair[1]["version"] or 0), pair[0]),
    )
    return [row for _, row in order]


# A delivery's own facts in ``find``'s rows; the rest is its message's.
DELIVERY_FACTS = (
    "state",
    "reason",
    "attempts",
    "attempted",
    "awaiting",
    "next_try_at",
    "last_error",
    "target",
    "updated_at",
    "channel_removed_at",
)


def delivery_key(row: dict[str, Any]) -> str:
    """A delivery's channel as ``by_message`` keys it: its name, and for a dropped channel's
    ``NAME (removed <when dropped>)``, never the bare name a channel added again under it
    has (review ozon 34b: the removed one's ``cancelled`` overwrote the live one's)."""
    name = str(row["channel"])
    removed = row.get("channel_removed_at")
    return f"{name} (removed {removed})" if removed else name


def by_message(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``find``'s rows (one per delivery, a message's adjacent, its oldest channel's first)
    as one object per message, in their order: contract 6's ``find --json``.

    The message's facts, and its ``state`` as ``history`` says it: its delivery's on its
    first live channel (the oldest registered and not dropped that has one, else the oldest
    dropped one; with ``--channel``, that channel's),
    named by ``channel``, with that delivery's facts beside it (``reason``, ``attempts``,
    ``last_error``, …); a rejected record's own state; ``null`` for a message on no channel.
    ``deliveries``: its state on each channel, ``{channel: state}``; ``channels``: each
    delivery's facts by its channel (``DELIVERY_FACTS``), a dropped channel's under
    ``delivery_key``'s ``NAME (removed …)``. Both are empty for a rejected record (no
    channel's) and for a message on no channel."""
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        message = found.get(row["message_id"])
        if message is None:
            message = found[row["message_id"]] = {**row, "deliveries": {}, "channels": {}}
        elif (
            message.get("channel_removed_at")
            and row["channel"]
            and not row.get("channel_removed_at")
        ):
            # a live channel's delivery says the message's state, not a dropped one's
            kept = {"deliveries": message["deliveries"], "channels": message["channels"]}
            message.clear()
            message.update({**row, **kept})
        if row["channel"] is not None:
            key = delivery_key(row)
            message["deliveries"][key] = row["state"]
            message["channels"][key] = {fact: row[fact] for fact in DELIVERY_FACTS}
    return list(found.values())


# The figure of a channel's wait in its words, written when the wait began, each its
# ``again_in`` (the delivery's ``next_try_at`` then): Ozon's hourly hold ("goes in N s",
# "tried once more in N s") and its open circle ("tried again in N s"), Yandex Market's budget
# ("sent in N s") and read-back ("read back in N s"), a price waiting for its companion
# ("looked at again in N s"; seller review 35: the others were said from the last look).
_WAIT_FIGURE = re.compile(
    r"\b(goes in|tried once more in|tried again in|sent in|read back in|looked at again in) "
    r"\d+(?:\.\d+)? s\b"
)


def wait_from_now(detail: str, due: datetime | str | None, now: datetime) -> str:
    """A delayed delivery's words with its wait's figure counted from ``now`` to ``due`` (its
    ``next_try_at``; whole seconds, 0 once due), never the figure written when the wait began;
    as they are without ``due``."""
    if due is None:
        return detail
    when = datetime.fromisoformat(due) if isinstance(due, str) else due
    left = max(0, math.ceil((ensure_utc(when) - ensure_utc(now)).total_seconds()))
    return _WAIT_FIGURE.sub(lambda found: f"{found.group(1)} {left} s", detail)


def next_look_in(detail: str, due: datetime | str | None, now: datetime) -> int | None:
    """Seconds from ``now`` to a delayed delivery's next look or attempt (``due``: its
    ``next_try_at``; 0 once due), where its words carry no such figure of their own (a wait
    whose words say none: Yandex's quarantine holding the price before it, a rule's wait for
    1C; ``wait_from_now`` counts the others); None otherwise. Such a wait said again writes no
    history row (``queue.record._same_wait``): only the delivery's next look moves, and
    ``find`` said nothing of it (words38 item 2)."""
    if due is None or _WAIT_FIGURE.search(detail):
        return None
    when = datetime.fromisoformat(due) if isinstance(due, str) else due
    return max(0, math.ceil((ensure_utc(when) - ensure_utc(now)).total_seconds()))


def _nowhere(row: Any) -> bool:
    """A row of ``listed(homeless=True)`` that is an accepted message with no delivery."""
    return row["channel_id"] is None and not row["rejected"]


def nowhere_facts(nowhere: bool, untaken: bool, start: str | None = None) -> dict[str, Any]:
    """What ``find`` and ``history`` say of a message with no delivery on any channel:
    ``delivered_nowhere``, ``no_channel_takes``: no registered channel takes its kind now
    (otherwise it came in before one that takes it was registered), and ``seed_from``: the
    message ``channels seed NAME --from`` starts at to give it a delivery, the first earlier
    version of its aggregate kept on no channel, else itself (``db.channels.seed_from``;
    None for a message with a delivery)."""
    return {
        "delivered_nowhere": nowhere,
        "no_channel_takes": nowhere and untaken,
        "seed_from": start if nowhere else None,
    }


def attempted(m: Any) -> ColumnElement[bool]:
    """The delivery (a row of ``on_channels.listed``) was ever sent: an attempt counted, or
    one its history keeps on its channel (a retry sets the count back to 0), as its page says
    (``exchange.web.workbench.pages``)."""
    return or_(
        m.c.attempts > 0,
        select(history.c.id)
        .where(
            history.c.message_pk == m.c.id,
            history.c.attempt.is_not(None),
            # A record's attempts are none; a delivery's are its channel's.
            or_(m.c.channel_id.is_(None), history.c.channel_id == m.c.channel_id),
        )
        .exists(),
    )


def count_found(connection: Connection, term: str, channel: Channel = None) -> int:
    """How many rows ``find`` would find without its limit."""
    term = term.strip()
    if not term:
        return 0
    found = matching_ids(term, is_postgres(connection))
    m = listed(
        channel_ids(connection, channel),
        name="found_rows",
        of=lambda pk: pk.in_(select(found.c.id)),
        homeless=True,
    )
    return int(connection.execute(select(func.count()).select_from(m)).scalar_one())


def sku_of(payload: str, aggregate: str) -> str:
    """A message's SKU: its payload's ``sku``, else its aggregate's first part (contract 1:
    ``<sku>/<price_type>``), never the aggregate itself."""
    try:
        value = json.loads(payload, parse_float=Decimal).get("sku")
    except (ValueError, AttributeError):
        value = None
    return str(value) if value is not None else aggregate.partition("/")[0]


def price_of(kind: str, payload: str) -> dict[str, str | None]:
    """A ``price`` message's price and currency as its payload says them (text: the decimal
    exactly as stored; no currency: the contract's ``DEFAULT_CURRENCY``, as the intake reads
    it); None for another kind or a payload that is not a price."""
    if kind != "price":
        return {"price": None, "currency": None}
    try:
        body = json.loads(payload, parse_float=Decimal, parse_int=Decimal)
    except ValueError:
        return {"price": None, "currency": None}
    if not isinstance(body, dict) or body.get("price") is None:
        return {"price": None, "currency": None}
    currency = body.get("currency", DEFAULT_CURRENCY)  # the contract's default, when unnamed
    return {
        "price": str(body["price"]),
        "currency": currency if isinstance(currency, str) else None,
    }


def released_by_cancel(
    connection: Connection,
    message_ids: Sequence[str],
    kinds: KindPolicies,
    channel: Channel = None,
) -> list[dict[str, Any]]:
    """Per strictly ordered aggregate of the cancelled messages: how many later versions wait
    behind them on the same channel (``channel``: one, or None for every channel) and will go
    out without them once they are cancelled."""
    if not message_ids or not kinds.strict:
        return []
    ids = channel_ids(connection, channel)
    mine = deliveries.alias("mine")
    cancelled = (
        select(mine.c.aggregate_id, mine.c.channel_id, func.max(mine.c.version).label("version"))
        .join(messages, messages.c.id == mine.c.message_pk)
        .where(
            messages.c.message_id.in_(list(message_ids)),
            mine.c.kind.in_(kinds.strict),
            on(mine.c.channel_id, ids),
        )
        .group_by(mine.c.aggregate_id, mine.c.channel_id)
        .subquery()
    )
    later = deliveries.alias("later")
    rows = connection.execute(
        select(
            aggregates.c.kind,
            aggregates.c.aggregate,
            func.count(later.c.message_pk.distinct()),
            func.min(later.c.version),
        )
        .select_from(later)
        .join(
            cancelled,
            (cancelled.c.aggregate_id == later.c.aggregate_id)
            & (cancelled.c.channel_id == later.c.channel_id),
        )
        .join(aggregates, aggregates.c.id == later.c.aggregate_id)
        .where(
            later.c.version > cancelled.c.version,
            later.c.state.in_(values(PENDING)),
        )
        .group_by(aggregates.c.kind, aggregates.c.aggregate)
        .order_by(aggregates.c.kind, aggregates.c.aggregate)
    ).all()
    return [
        {"kind": kind, "aggregate": aggregate, "count": count, "first_version": first}
        for kind, aggregate, count, first in rows
    ]


def held_condition(kinds: KindPolicies) -> ColumnElement[bool]:
    """True for a delivery (a row of ``deliveries``) on its way (new, delayed) that waits
    behind a quarantined earlier version of its strictly ordered aggregate on its channel:
    only a person's retry or cancel moves it."""
    if not kinds.strict:
        return false()
    before = deliveries.alias("before")
    blocking = (
        select(before.c.message_pk)
        .where(
            before.c.aggregate_id == deliveries.c.aggregate_id,
            before.c.channel_id == deliveries.c.channel_id,
            before.c.version < deliveries.c.version,
            before.c.state == "quarantined",
        )
        .exists()
    )
    return and_(
        deliveries.c.kind.in_(kinds.strict),
        deliveries.c.state.in_(values(PENDING)),
        blocking,
    )


def held(connection: Connection, kinds: KindPolicies, channel: Channel | list[int] = None) -> int:
    """How many deliveries are held (``held_condition``) on ``channel`` (an id, a name, the
    ids, or None for every channel)."""
    if not kinds.strict:
        return 0
    ids = channel if isinstance(channel, list) else channel_ids(connection, channel)
    return int(
        connection.execute(
            select(func.count()).where(on(deliveries.c.channel_id, ids), held_condition(kinds))
        ).scalar_one()
    )

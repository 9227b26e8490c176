"""``status --json``'s ``channels`` (contract 13): each channel as the operator reads it.

``{NAME: {target, counts, paused, breaker, pace, backlog: {messages, eta_s}, withheld,
live_workers, configured}}``, read from the same figures ``status`` reads (its worker rows,
the one pause): a channel's loop reports as the worker row ``<worker id>/<channel>`` with
``workers.channel`` set; a channel without such rows shows what the database says of it
(its counts, its backlog), with no breaker, no pace and no live worker. With one channel
registered, a worker's own row (no channel) is that channel's: an installation that runs one
loop, as before channels, sees it there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from rich.table import Table
from rich.text import Text
from sqlalchemy import Connection, func, select

from exchange.db.schema import channels
from exchange.domain.clock import local_time
from exchange.domain.policy import KindPolicies
from exchange.domain.states import State
from exchange.i18n import Lang, _, pgettext
from exchange.ops.backlog import backlog, estimate, estimate_kind
from exchange.ops.status import (
    counts_by_channel,
    holding,
    human_age,
    last_deliveries,
    pause_of,
    site_failing,
)
from exchange.ops.withheld_behind import behind_counts
from exchange.queue import control
from exchange.words import error_words, word
from exchange.words import name as name_of


def channel_rows(connection: Connection, ids: Sequence[int]) -> list[Any]:
    """The registry's rows of ``ids`` (id, name, target, dropped_at), oldest first."""
    return list(
        connection.execute(
            select(channels.c.id, channels.c.name, channels.c.target, channels.c.dropped_at)
            .where(channels.c.id.in_(list(ids)))
            .order_by(channels.c.id)
        )
    )


def rows_of(name: str, shown: list[dict[str, Any]], only: bool) -> list[dict[str, Any]]:
    """The worker rows that speak for the channel ``name``: its loops' rows; with ``only``
    (one channel registered), the rows of no channel too."""
    return [w for w in shown if w.get("channel") == name or (only and w.get("channel") is None)]


def breaker_of(rows: list[dict[str, Any]], delivered: dict[str | None, datetime]) -> str | None:
    """A channel's breaker as its live loops say it: ``open`` or ``half-open`` while the site
    keeps failing (``status.site_failing``, the one rule), else ``closed``; None when no loop
    of it is live (nothing says)."""
    live = [w for w in rows if w["live"]]
    if not live:
        return None
    if not site_failing(live, delivered):
        return "closed"
    states = {w["breaker"] for w in live}
    return "open" if "open" in states else "half-open"


def channel_figures(
    connection: Connection,
    now: datetime,
    kinds: KindPolicies,
    shown: list[dict[str, Any]],
    ids: Sequence[int],
    *,
    configured: Iterable[str],
    live_within: float,
) -> dict[str, dict[str, Any]]:
    """Each channel of ``ids`` (oldest first) as ``status --json``'s ``channels`` says it;
    ``shown``: ``status.worker_rows``; ``configured``: this process's channel names."""
    names = set(configured)
    registered = channel_rows(connection, ids)
    only = connection.execute(select(func.count()).select_from(channels)).scalar_one() == 1
    counted = counts_by_channel(connection, list(ids))
    delivered = last_deliveries(connection)
    found: dict[str, dict[str, Any]] = {}
    for row in registered:
        # The pause that holds this channel: every channel's, else its own (pause --channel).
        operator = control.operator_pause(connection, row.name)
        rows = rows_of(row.name, shown, only)
        counts = _all_states(counted.get(row.id, {}))
        live = [w for w in rows if w["live"]]
        found[row.name] = {
            "target": row.target,
            "counts": counts,
            "paused": pause_of(operator, holding(rows)),
            "breaker": breaker_of(rows, delivered),
            "pace": next((w["pace"] for w in live if w["pace"]), None),
            "backlog": backlog(
                connection, now, kinds, timedelta(seconds=live_within), channel=row.id
            ),
            "withheld": counts.get("withheld", 0),
            # of them, those a newer price waits behind (``ops.withheld_behind``)
            "withheld_behind": (
                behind_counts(connection, [row.id]).get(row.id, 0) if counts.get("withheld") else 0
            ),
            "live_workers": len(live),
            "configured": row.dropped_at is None and row.name in names,
        }
    return found


def _all_states(counts: dict[str, int]) -> dict[str, int]:
    """Every state named, 0 where none."""
    return {**{state.value: 0 for state in State}, **counts}


def dropped_channels(connection: Connection) -> frozenset[str]:
    """The names of the channels dropped (none live of that name): their rows say «dropped»,
    as ``channels list`` does, never «not configured», the words of a channel that needs a
    person (owner 31 item 5). ``status --json``'s ``dropped_at``-less channels keep their keys
    (contract 13)."""
    rows = connection.execute(select(channels.c.name, channels.c.dropped_at)).all()
    live = {row.name for row in rows if row.dropped_at is None}
    return frozenset(row.name for row in rows if row.dropped_at is not None) - live


def channel_state_words(
    channel: dict[str, Any], lang: Lang = "en", zone: str = "UTC", *, dropped: bool = False
) -> str:
    """A channel's delivery in a word (the console's row, the dashboard's): dropped
    (``dropped``: ``dropped_channels``), not configured in this process, paused (by whom,
    since when, with the operator's note; the time in ``zone``), down (its breaker open), no
    live loop, or live."""
    if dropped:
        return pgettext("channel", "dropped", lang)
    if not channel["configured"]:
        return pgettext("channel", "not configured", lang)
    paused = channel["paused"]
    if paused is not None and paused["by"] == "operator":
        said = _("paused by operator {operator} since {time}", lang).format(
            operator=paused["operator"], time=local_time(paused["since"], zone, seconds=False)
        )
        note = (paused.get("note") or "").strip()
        return said + _(": “{note}”", lang).format(note=note) if note else said
    if paused is not None:
        return _("paused: {answer}", lang).format(answer=error_words(paused["note"] or "", lang))
    if channel["breaker"] in ("open", "half-open"):
        return _("down ({state})", lang).format(state=word(f"breaker_{channel['breaker']}", lang))
    if not channel["live_workers"]:
        return _("no live worker", lang)
    return _("live", lang)


def channels_table(
    by_channel: dict[str, dict[str, Any]],
    lang: Lang = "en",
    zone: str = "UTC",
    dropped: frozenset[str] = frozenset(),
) -> Table:
    """``status``'s row per channel, when there is more than one; times in ``zone``;
    ``dropped``: ``dropped_channels``."""
    table = Table(title=_("channels", lang))
    for column in (
        pgettext("status column", "channel", lang),
        pgettext("status column", "delivery", lang),
        pgettext("status column", "backlog", lang),
        pgettext("status column", "quarantined", lang),
        pgettext("status column", "withheld", lang),
        pgettext("status column", "live workers", lang),
    ):
        table.add_column(column, overflow="fold")
    for name, channel in by_channel.items():
        waiting = channel["backlog"]
        table.add_row(
            # what it is beside its name, in words that wrap (mpminor 2: a column of its own
            # and «yandex-market» broke the table's words at 80 columns)
            Text(f"{name} ({name_of('target', channel['target'], lang) or channel['target']})"),
            Text(channel_state_words(channel, lang, zone, dropped=name in dropped)),
            Text(backlog_cell(waiting, lang, paused=channel["paused"] is not None)),
            str(channel["counts"].get("quarantined", 0)),
            str(channel["withheld"]),
            str(channel["live_workers"]),
        )
    return table


def backlog_cell(waiting: dict[str, Any], lang: Lang = "en", *, paused: bool = False) -> str:
    """A channel's backlog and its ETA in a cell: «12 (≈ 3 мин)», "0", "12 (no estimate)";
    a ``paused`` channel's has none (owner 31 item 6: the pace before the pause is no ETA)."""
    if not waiting["messages"]:
        return "0"
    if paused:
        return _("{count} (paused: no estimate)", lang).format(count=waiting["messages"])
    if estimate(waiting) is None:
        return _("{count} (no estimate)", lang).format(count=waiting["messages"])
    if estimate_kind(waiting) == "hold":
        return _(
            "{count} (up to {eta}: waiting to learn whether WB applied the upload)", lang
        ).format(count=waiting["messages"], eta=human_age(estimate(waiting), lang))
    return _("{count} (about {eta})", lang).format(
        count=waiting["messages"], eta=human_age(estimate(waiting), lang)
    )

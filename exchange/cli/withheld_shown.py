"""``exchange status``'s list of withheld prices (contract 13), apart from the ``withheld``
commands so that reading it registers none."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from sqlalchemy import Engine

from exchange.db.engine import transaction
from exchange.db.on_channels import channel_ids, channel_names, targets_by_id
from exchange.domain.clock import ensure_utc, local_time
from exchange.i18n import Lang, _, ngettext
from exchange.ops.find import price_of, sku_of
from exchange.ops.withheld_behind import advice, behind
from exchange.queue import withheld as withheld_rows
from exchange.words import detail_words

SHOWN = 20  # withheld prices listed by ``exchange status``; ``withheld list`` lists them all
ID_WIDTH = 56  # a message id up to this long stays on one line at 80 columns


def withheld_entries(engine: Engine, channel: str | None = None) -> list[dict[str, Any]]:
    """``exchange withheld list --json``: every withheld price (of the channel named, every
    channel's for None; an unknown name refused by ``channel_ids``), oldest message first, as
    a seller collects the ids for ``withheld release``: its message id, SKU, version, channel,
    price (the decimal as 1C sent it), since when withheld (UTC), and whether a newer price
    waits behind it (``ops.withheld_behind``: not to be confirmed)."""
    with transaction(engine, read_only=True) as connection:
        ids = None if channel is None else channel_ids(connection, channel)
        rows = withheld_rows.on_every_channel(connection, limit=None, channel_ids=ids)
        names = channel_names(connection)
        waited: set[tuple[str, int]] = set()
        for channel_id in sorted({row.channel_id for row in rows}):
            of_it = [row for row in rows if row.channel_id == channel_id]
            waited |= {(message_id, channel_id) for message_id in behind(connection, of_it)}
    return [
        {
            "message_id": row.message_id,
            "sku": sku_of(row.payload, row.aggregate),
            "aggregate": row.aggregate,
            "version": row.version,
            "channel": names.get(row.channel_id, str(row.channel_id)),
            "price": price_of(row.kind, row.payload)["price"],
            "since": ensure_utc(row.withheld_at).isoformat(),
            "newer_waits_behind": (row.message_id, row.channel_id) in waited,
        }
        for row in rows
    ]


def withheld_table(
    engine: Engine,
    lang: Lang,
    zone: str,
    *,
    limit: int | None = SHOWN,
    channel: str | None = None,
) -> Table | None:
    """``exchange status``'s list of withheld prices (contract 13), the first ``limit`` (None:
    all, ``exchange withheld list``): each with the channel's own words and what releases it,
    and how many more there are and what lists them; None when there are none. ``channel``:
    that channel's only (``withheld list --channel``; an unknown name refused)."""
    with transaction(engine, read_only=True) as connection:
        # Every channel's (issue 32): with several, each row names its channel.
        ids = None if channel is None else channel_ids(connection, channel)
        rows = withheld_rows.on_every_channel(connection, limit=limit, channel_ids=ids)
        names = channel_names(connection)
        targets = targets_by_id(connection)
        more = withheld_rows.counted(connection, ids) - len(rows) if limit is not None else 0
        # A held price a newer one waits behind is not to be confirmed (Wildberries' price
        # quarantine): its row says what the newer price's history says, not «confirm it».
        waited = behind(connection, rows)
    if not rows:
        return None
    several = len(names) > 1
    title = (
        _(
            "withheld by the channel: exchange withheld release MESSAGE_ID… --channel CHANNEL "
            "--note TEXT",
            lang,
        )
        if several
        else _("withheld by the channel: exchange withheld release MESSAGE_ID… --note TEXT", lang)
    )
    # Wildberries' quarantine is released in the seller's cabinet alone (research §2.4): its
    # rows never advised ``withheld release``, which can only answer "not released".
    on_wb = {targets.get(row.channel_id) == "wildberries" for row in rows}
    cabinet = _(
        "Wildberries' in the seller's cabinet (Цены и скидки → Карантин цен): its API releases "
        "none",
        lang,
    )
    if on_wb == {True}:
        title = _("withheld by the channel: {where}", lang).format(where=cabinet)
    elif True in on_wb:
        title = f"{title}; {cabinet}"
    # the rest said, never left out silently: how many, and the command that lists them all
    caption = (
        ngettext(
            "and {count} more: exchange withheld list",
            "and {count} more: exchange withheld list",
            more,
            lang,
        ).format(count=more)
        if more > 0
        else None
    )
    table = Table(title=title, caption=caption, caption_justify="left")
    # The id whole, never cut with "…" (``withheld release`` needs it): on one line where the
    # terminal has room, folded onto the next where it has not; the other columns give way.
    longest = max(len(row.message_id) for row in rows)
    table.add_column(_("message", lang), overflow="fold", min_width=min(longest, ID_WIDTH))
    if several:
        table.add_column(_("channel", lang))
    for column in (_("aggregate", lang), _("since", lang)):
        table.add_column(column)
    table.add_column(_("the channel said", lang))
    for row in rows:
        said = row.said or ""
        newer = waited.get(row.message_id)
        table.add_row(
            Text(row.message_id),
            *([Text(names.get(row.channel_id, str(row.channel_id)))] if several else []),
            Text(f"{row.aggregate} v{row.version}"),
            Text(local_time(row.withheld_at, zone)),
            Text(
                advice(newer, lang)
                if newer is not None
                else (detail_words(said) if lang == "ru" else said)
            ),
        )
    return table

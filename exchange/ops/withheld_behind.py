"""The withheld prices a newer 1C price waits behind (contract 13, 14; research §2.4, §3.4).

Wildberries' price quarantine holds an older price (``withheld`` here); a newer one, found in
force there, waits behind it uncharged (``targets.wildberries`` ``_behind_quarantine``), because
the held price, if the seller confirmed it, would go live over the newer. So the held price is
not to be confirmed: the good is taken out of the quarantine at the newer price. The newer
price's own words say so (``answers.behind_words``, its history); ``exchange status`` and the
workbench say them beside the held price from here, never the held price's «confirm it».
Yandex Market's quarantine alike (``targets.yandex_market`` ``_in_force``, review ym34); and on
any channel, a held price with a newer one of its good waiting to go, or gone, is not to be
confirmed either (``behind``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from exchange.domain.states import State
from exchange.i18n import Lang, _, ngettext
from exchange.queue import withheld as withheld_rows
from exchange.queue.withheld import Newer, Withheld
from exchange.targets.marketplace.behind import waits_behind
from exchange.words import detail_words


def behind(connection: Connection, rows: Sequence[Withheld]) -> dict[str, Newer]:
    """Those of the withheld ``rows`` (by ``message_id``) with a newer price of their good on
    their channel, not cancelled (``queue.withheld.newest_newer``), each with that newer price,
    on any channel: waiting behind a marketplace's quarantine (``waits_behind``), waiting to
    go (a paused channel, a retry, the quarantine here), or gone. Confirmed, the held price
    could go live over it, and ``withheld release`` refuses it (review ym34 finding 2: a held
    Yandex Market price with a newer one waiting on a paused channel was said
    ``newer_waits_behind: false``, as only Wildberries' wait counted)."""
    return dict(withheld_rows.newest_newer(connection, rows))


def behind_named(
    connection: Connection, message_ids: Sequence[str]
) -> dict[tuple[str, int], Newer]:
    """Those of ``message_ids`` withheld on a channel (by ``(message_id, channel_id)``) whose
    good's newer price waits behind them (``behind``), each with that newer price: what the
    held message's page and the workbench's list of withheld prices say instead of the
    channel's «confirm it»."""
    found: dict[tuple[str, int], Newer] = {}
    for channel_id in withheld_rows.withheld_on(connection, message_ids):
        rows = [
            w
            for w in withheld_rows.named(connection, message_ids, channel_id=channel_id).values()
            if isinstance(w, Withheld)
        ]
        for old, newer in behind(connection, rows).items():
            found[(old, channel_id)] = newer
    return found


def behind_counts(connection: Connection, ids: Sequence[int]) -> dict[int, int]:
    """How many withheld prices of each channel of ``ids`` a newer price waits behind (of the
    first ``READ_AT_MOST`` withheld there)."""
    counted: dict[int, int] = {}
    for channel_id in ids:
        rows = withheld_rows.waiting(connection, channel_id=channel_id)
        if rows:
            counted[channel_id] = len(behind(connection, rows))
    return counted


def advice(newer: Newer, lang: Lang) -> str:
    """What to do with a withheld price ``newer`` waits behind: the newer price's own words
    (its history's) where it waits behind the marketplace's quarantine (``waits_behind``),
    after the newer's message id; else that it went, or waits to go, and not to confirm this
    one."""
    said = newer.said or ""
    if waits_behind(said):
        return _("a newer price ({message}) waits behind this one: {said}", lang).format(
            message=newer.message_id, said=detail_words(said) if lang == "ru" else said
        )
    if newer.state == State.DELIVERED.value:
        return _(
            "a newer price from 1C ({message}) went to this channel after this one: do not "
            "confirm this one in the channel's cabinet, it would replace the newer",
            lang,
        ).format(message=newer.message_id)
    return _(
        "a newer price from 1C ({message}) waits to go to this channel, not delivered yet: do "
        "not confirm this one in the channel's cabinet, it could replace the newer; let the "
        "newer land (exchange status says what it waits for)",
        lang,
    ).format(message=newer.message_id)


def not_to_confirm(count: int, lang: Lang) -> str:
    """What to do with ``count`` withheld prices a newer one waits behind, in a sentence of
    ``status``'s cause, the dashboard's and the operators' notice."""
    return ngettext(
        "do not confirm {count} of them: a newer price from 1C waits behind it, and confirmed, "
        "the held price would replace it; take the good out of the quarantine at the newer "
        "price in the cabinet (exchange status lists it)",
        "do not confirm {count} of them: a newer price from 1C waits behind each, and "
        "confirmed, a held price would replace it; take those goods out of the quarantine at "
        "the newer price in the cabinet (exchange status lists them)",
        count,
        lang,
    ).format(count=count)

"""The withheld prices a newer 1C price waits behind (contract 13, 14; research §2.4).

Wildberries' price quarantine holds an older price (``withheld`` here); a newer one, found in
force there, waits behind it uncharged (``targets.wildberries`` ``_behind_quarantine``), because
the held price, if the seller confirmed it, would go live over the newer. So the held price is
not to be confirmed: the good is taken out of the quarantine at the newer price. The newer
price's own words say so (``answers.behind_words``, its history); ``exchange status`` and the
workbench say them beside the held price from here, never the held price's «confirm it»."""

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
    """Those of the withheld ``rows`` (by ``message_id``) whose good's newer price waits behind
    them (``answers.waits_behind``), each with that newer price."""
    return {
        old: newer
        for old, newer in withheld_rows.newest_newer(connection, rows).items()
        if newer.state == State.DELAYED.value and waits_behind(newer.said)
    }


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
    (its history's), after the newer's message id."""
    said = newer.said or ""
    return _("a newer price ({message}) waits behind this one: {said}", lang).format(
        message=newer.message_id, said=detail_words(said) if lang == "ru" else said
    )


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

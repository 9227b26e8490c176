"""What a shop's answer means for a message, whatever the target that read it (contract 5):
the verdicts every target classifies its answers into."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    DELIVERED = "delivered"
    STALE_AT_SITE = "stale-at-site"
    TEMPORARY = "temporary"
    TERMINAL = "terminal"
    PAUSE = "pause"
    UNKNOWN = "unknown"
    # Not sent, on purpose: the target's mapping leaves this price type out of the shop
    # (contract 10, a price type mapped to null). The message ends cancelled.
    NOT_FOR_THIS_SHOP = "not-for-this-shop"
    # Taken by the channel, but withheld from buyers until a person confirms it (contract 13:
    # a marketplace's price quarantine). The delivery ends ``withheld``: no lease, not retried;
    # the target's ``WithholdsPrices`` hooks tell later whether it went live.
    WITHHELD = "withheld"
    # The channel took it, or asked it to wait; either way it is not charged, not the site's
    # failure (no breaker, no pace), never quarantined for it: the delivery goes back to
    # ``delayed`` (event ``awaiting-outcome``), holding no lease, due again after ``again_in``
    # seconds. The one verdict of three waits (contract 14), each target's words in ``detail``
    # saying which: a Wildberries upload task whose outcome is read later (``receipt``
    # ``wb-task:<id>``; the target keeps the task in the database, so the next attempt, this
    # worker's or after a restart another's, polls instead of uploading again); Ozon's limit of
    # 10 updates of a product an hour; Yandex Market's 200, which means accepted (``receipt``
    # ``ym-accepted:…``, handed back by the claim): the price is read back when the delivery is
    # leased again, after a restart too (delivered when shown, withheld, temporary).
    # An answer with an HTTP status (the channel took the write) ends a pause on write trial.
    AWAITING = "awaiting"


# Not frozen: one is made per message, and a frozen dataclass's __init__ costs ~2.5x.
@dataclass(slots=True)
class Classification:
    verdict: Verdict
    detail: str
    http_status: int | None = None
    error_class: str | None = None
    receipt: str | None = None
    site_version: int | None = None
    retry_after: str | None = None
    result_unknown: bool = False
    reason: str | None = None
    """A TERMINAL verdict's quarantine reason when the target names one (e.g.
    ``unknown-sku``); unset, ``decide`` quarantines with ``http-<status>``."""
    site_wide: bool = False
    """A TEMPORARY verdict that speaks about the site, not the message (contract 5c: not
    charged), whatever its status: e.g. Bitrix's "cannot create the temporary tables"."""
    about_item: bool = False
    """A TEMPORARY verdict the site gave about this item alone, in an answer that went well
    otherwise (a marketplace's good locked by a sale): charged, but never a sign the site is
    failing (the breaker and the pace count it as an answer)."""
    again_in: float | None = None
    """An AWAITING verdict's wait, in seconds (fractions allowed), before the delivery is due
    again: its one wait (``retry_after`` is a TEMPORARY answer's Retry-After, never read for
    AWAITING)."""

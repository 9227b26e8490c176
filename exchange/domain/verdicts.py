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
    # Taken by the channel, whose outcome is read later (a Wildberries upload task): the
    # delivery goes back to ``delayed``, not charged, due again after ``retry_after`` seconds,
    # holding no lease; the target keeps what it is waiting for in the database, so the next
    # attempt (this worker's or, after a restart, another's) reads the outcome instead of
    # sending again. ``receipt`` names what it waits for (e.g. ``wb-task:123``).
    AWAITING = "awaiting"
    # The channel answered and asks this item to wait for a limit of its own on one product
    # (contract 14: Ozon's 10 updates of a product an hour): not charged, never quarantined,
    # due again after ``retry_after`` seconds; not the site's failure (no breaker, no pace).
    HELD = "held"
    # Taken by the channel, which applies it later and says nothing more (contract 14: Yandex
    # Market's 200 means accepted; the price shows "within minutes"). Not charged: the delivery
    # goes back to wait (``again_in`` seconds), and the target reads the price back when it is
    # leased again, instead of sending it: delivered when shown, withheld, or temporary.
    ACCEPTED = "accepted"


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
    """An ACCEPTED verdict's wait, in seconds, before the delivery is due again (to be read
    back)."""

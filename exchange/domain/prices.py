"""A price as the service knows it was sent: what the database reads and a target puts beside
the price it sends (contract 10, the 1C-Bitrix offer's whole set of prices)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

# The currency of a price whose payload names none (the price contract's default): what the
# intake writes into the stored payload, and what a page shows beside a price without one.
DEFAULT_CURRENCY = "RUB"


@dataclass(frozen=True, slots=True)
class KnownPrice:
    """The latest price of one (SKU, price type) the service delivered or is delivering."""

    sku: str
    price_type: str  # the service's code (``retail``), not the shop's name
    amount: Decimal
    currency: str
    version: int
    # When the service took in the newest later version of this price type that the channel
    # never took and never will unless a person says so (quarantined, or cancelled by a
    # person): 1C replaced this price. None: nothing replaced it (or the reader does not ask).
    # A marketplace item whose new prices came in after it never carries this one again as
    # a dependent price (an old price, a discount base): it goes as "none" (review b_pair2).
    replaced_at: datetime | None = None
    # The message_id of the newest later version of this price type quarantined for a rule of
    # two price types (its receipt ``PAIR_RULE``), and its version: a person decides on it, and
    # a marketplace item never carries a new dependent price (an old price, a discount base)
    # beside this one meanwhile, a pair 1C never stated (``targets.marketplace.items``,
    # review ozonpair: 1000 with 1800 while 1500 sat in quarantine). None: none (or unasked).
    quarantined: str | None = None
    quarantined_version: int = 0


@dataclass(frozen=True, slots=True)
class WaitingPrice:
    """A version of one (SKU, price type) a channel has still to be given: new, delayed (a
    retry after a refusal, a marketplace's limit) or, where asked, in flight; never one ended
    (delivered, quarantined, cancelled, withheld)."""

    sku: str
    price_type: str  # the service's code (``retail``), not the shop's name
    version: int
    due: datetime  # when it may be leased again (UTC); a new one's: when it was made


# The receipt of a marketplace delivery waiting (AWAITING, not charged) for another price type
# of its SKU (exchange.targets.marketplace.items: alone it breaks the marketplace's rule). A
# claim on a marketplace channel that leases an aggregate of the SKU takes such a delivery of
# its companion aggregate with it, under the same lease, before its wait is over
# (exchange.queue.lease.claim): the item then carries both, and the marketplace never shows the
# new price of one type beside the old price of the other (review 32d).
AWAITS_COMPANION = "awaits-companion"
# The error class of a price that alone breaks its marketplace's rule and waits for 1C to send
# the other price type (``targets.marketplace.items._waits_for_1c``): a wait on 1C, the
# seller's data, not on the marketplace; ``status`` and the dashboard count it apart
# (``ops.waits.wait_of``: "1c"; review mpadvice item 2).
AWAITING_1C = "AwaitingPriceFrom1C"
# The error class of a new dependent price that waits for a person's decision on its SKU's
# main price, quarantined by a rule of two price types (receipt ``PAIR_RULE``;
# ``targets.marketplace.items._waits_for_person``): an operator's retry or cancel of that price,
# not the marketplace nor 1C; ``status`` and the dashboard count it apart
# (``ops.waits.wait_of``: "person"; review wait34).
AWAITING_PERSON = "AwaitingDecisionOnMainPrice"
# The error class of a price held for Ozon's hourly limit of updates of a product (research
# §1.3): by the target's own count of its sends, or after Ozon refused one for it
# (``targets.ozon``); ``run --until-idle``'s last line says how many wait for it and when the
# next goes (``ops.waits.channel_waits``).
OZON_HOUR = "OzonItemLimit"
# The receipt of a marketplace price quarantined because it broke a rule of two price types
# beside the known price of the other type (``targets.marketplace.items``: Ozon's old price
# below the price, Yandex Market's discount under 5 %), not by its own fault: a new price of the
# other type waits for a person's decision on it (``KnownPrice.quarantined``), and a retry of it
# takes that one along (its receipt ``AWAITS_COMPANION``), both in one item.
PAIR_RULE = "pair-rule"

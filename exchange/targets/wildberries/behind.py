"""The words of a price in force waiting behind an older one WB's price quarantine holds, and
their reading (``waits_behind``): here, apart from ``answers`` (which needs httpx), so that
``status`` and the other reading commands tell such a wait without importing a client."""

from __future__ import annotations

from exchange.targets.marketplace.behind import BEHIND as BEHIND
from exchange.targets.marketplace.behind import waits_behind as waits_behind

# A price in force that waits behind another which WB's price quarantine holds for its good
# (``target._behind_quarantine``): the held price must not be confirmed (it would go live over
# this one); the good is taken out of the quarantine at this price. The words the wait's
# history says, and ``exchange status`` says beside the held price (``waits_behind``): the
# advice decided once, here; the phrase (``BEHIND``) is every marketplace's (marketplace.behind).


def behind_words(roubles: int, nm_id: int, held: int | None) -> str:
    """The wait of ``roubles``, in force on good ``nm_id``, behind ``held`` in WB's quarantine
    (None: a line without ``newPrice``)."""
    shown = "another price" if held is None else str(held)
    return (
        f"Wildberries holds {roubles} for nmID {nm_id} already, {BEHIND} {shown} for it: "
        f"confirmed in the seller's cabinet, it would replace {roubles}. The seller should not "
        f"confirm it but take the good out of the quarantine at {roubles} there (Цены и "
        "скидки → Карантин цен); this price waits, uncharged, until the quarantine no longer "
        "lists the good, and is uploaded again over the held one should that be confirmed"
    )

"""Why a message waits for a person (quarantined) or ended without delivery (cancelled):
the reasons operators filter by and the reports explain."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a message waits for a person (quarantined) or ended without delivery (cancelled)."""

    INVALID_CONTRACT = "invalid-contract"
    UNSUPPORTED_SCHEMA = "unsupported-schema"
    UNKNOWN_KIND = "unknown-kind"
    VERSION_CONFLICT = "version-conflict"
    SEQUENCE_GAP = "sequence-gap"
    RETRY_LIMIT = "retry-limit"
    UNKNOWN_RESPONSE = "unknown-response"
    SUPERSEDED = "superseded"
    STALE = "stale"
    STALE_AT_SITE = "stale-at-site"
    OPERATOR = "operator"
    UNKNOWN_SKU = "unknown-sku"  # the shop has no product or variation with the SKU
    UNMAPPED_PRICE_TYPE = "unmapped-price-type"  # no shop field or price type for it
    SHOP_FAILURE = "shop-failure"  # the shop's exchange answered failure, for good (Bitrix)
    UNROUTABLE = "unroutable"  # RabbitMQ returned it: no queue bound for its routing key
    # Contract 14: a price the marketplace cannot take as it is (its currency, its money, a
    # price rule the marketplace states, no article under sku_source=article), never sent.
    INVALID_FOR_CHANNEL = "invalid-for-channel"
    # Contract 14: the marketplace refused the item by one of its price rules (its code and
    # meaning in the detail), for good.
    CHANNEL_RULE = "channel-rule"
    # The target's mapping maps the price type to null: left out of that shop on purpose
    # (contract 10). A cancellation, never a quarantine.
    NOT_FOR_THIS_SHOP = "not-for-this-shop"
    # Contract 13: the channel was dropped (``exchange channels drop``) while it waited.
    CHANNEL_REMOVED = "channel-removed"

    @staticmethod
    def http(status: int) -> str:
        return f"http-{status}"


# Why a message ended without delivery: the reasons a cancelled message carries (coalescing's
# superseded and stale, the site's stale answer, the mapping's null, an operator's cancel, a
# dropped channel). A
# new, delayed, in-progress or delivered message carries none (a retry clears the reason; a
# delay sets none); a quarantined one any other.
CANCELLED_REASONS: tuple[Reason, ...] = (
    Reason.SUPERSEDED,
    Reason.STALE,
    Reason.STALE_AT_SITE,
    Reason.NOT_FOR_THIS_SHOP,
    Reason.OPERATOR,
    Reason.CHANNEL_REMOVED,
)


# Quarantines of 1C's data, never a failure of the channel: a price the channel cannot take
# as it is (never sent), one it refused by its stated price rule, a payload the contract
# refuses. ``exchange status``'s error share leaves them out of its failures (words38 item 5:
# a lone rule quarantine read «доля ошибок 100 %»).
DATA_REASONS: tuple[Reason, ...] = (
    Reason.INVALID_FOR_CHANNEL,
    Reason.CHANNEL_RULE,
    Reason.INVALID_CONTRACT,
)

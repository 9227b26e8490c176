"""A price message as the shops without the shop API read it (contract 10): the targets that
take ``price`` messages only and map a ``price_type`` to the shop's own name for it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Protocol

from exchange.domain.prices import DEFAULT_CURRENCY
from exchange.domain.prices import KnownPrice as KnownPrice  # the port's value
from exchange.domain.prices import WaitingPrice as WaitingPrice  # the waiting port's value
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.base import OutgoingMessage


@dataclass(frozen=True, slots=True)
class MappedPrice:
    sku: str
    amount: Decimal
    currency: str
    mapped: str  # the shop's name for the message's price type


def read_price(
    message: OutgoingMessage, *, target: str, mapping: Mapping[str, str | None], setting: str
) -> MappedPrice | Classification:
    """The price a message carries, with its price type mapped through ``mapping`` (the
    setting ``setting``), or the classification that says why it is not sent: a price type
    mapped to null is left out of this shop on purpose (contract 10: ``NOT_FOR_THIS_SHOP``,
    the message ends cancelled); another kind, a payload that is no price, or a price type
    not mapped (never guessed) are terminal."""
    if message.kind != "price":
        return Classification(
            Verdict.TERMINAL,
            f"kind {message.kind!r}: the {target} target takes price messages only",
            error_class="UnsupportedKind",
        )
    try:
        payload = json.loads(message.payload, parse_float=Decimal)
        sku, amount = str(payload["sku"]), Decimal(str(payload["price"]))
        price_type = str(payload.get("price_type", ""))
        currency = str(payload.get("currency", DEFAULT_CURRENCY))
    except (ValueError, KeyError, TypeError, InvalidOperation):
        return Classification(Verdict.TERMINAL, "the payload is not a price", error_class="Payload")
    if price_type in mapping and mapping[price_type] is None:
        return Classification(
            Verdict.NOT_FOR_THIS_SHOP,
            f"price type {price_type!r} is mapped to null by {setting}: "
            "left out of this shop on purpose",
            reason=Reason.NOT_FOR_THIS_SHOP,
        )
    mapped = mapping.get(price_type)
    if mapped is None:
        return Classification(
            Verdict.TERMINAL,
            f"price type {price_type!r} is not mapped by {setting}",
            reason=Reason.UNMAPPED_PRICE_TYPE,
        )
    return MappedPrice(sku, amount, currency, mapped)


class KnownPrices(Protocol):
    """The port a target reads the latest known prices through (contract 10: a 1C-Bitrix
    offer carries every mapped price type whose latest price the service knows). The target
    never reaches the database: ``exchange.app`` hands it ``exchange.db.known_prices``; the
    tests, ``exchange check`` and the demo without a database hand it ``NO_KNOWN_PRICES`` or a
    ``MemoryKnownPrices``."""

    def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
        """For each of ``skus``, the latest version delivered or being delivered of each of
        its price types (none for a price type never sent)."""
        ...


class MemoryKnownPrices:
    """A ``KnownPrices`` in memory, for tests and the demo: ``remember`` what was delivered."""

    def __init__(self) -> None:
        self.prices: dict[tuple[str, str], KnownPrice] = {}

    def remember(self, price: KnownPrice) -> None:
        held = self.prices.get((price.sku, price.price_type))
        if held is None or held.version < price.version:
            self.prices[(price.sku, price.price_type)] = price

    def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
        wanted = set(skus)
        return [p for (sku, _), p in self.prices.items() if sku in wanted]


class _NothingKnown:
    def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
        return []


NO_KNOWN_PRICES: KnownPrices = _NothingKnown()  # ``exchange check``: no package is sent


class WaitingPrices(Protocol):
    """The port a marketplace target reads what its channel has still to be given through
    (contract 14, issue 32): an item whose own prices break the marketplace's rules while
    another price of its SKU waits (a retry after a 503, Ozon's hourly limit) waits for it,
    since the rule may hold once both go together, instead of ending ``invalid-for-channel``.
    ``exchange.app`` hands it ``exchange.db.known_prices``; without a database nothing waits."""

    def waiting(self, skus: Iterable[str]) -> list[WaitingPrice]:
        """For each of ``skus``, the newest version of each price type still to be given to
        the channel (none for a price type with nothing waiting)."""
        ...

    def taken_first(self, message_ids: Iterable[str]) -> dict[str, datetime]:
        """For each of ``message_ids`` (leased on the channel) that 1C posted before with the
        same price, when the service took in the first of those posts still undelivered: the
        run of versions of the same amount and currency just below it that coalescing cancelled
        ``superseded`` on the channel (1C re-exports its prices every few minutes, each a new
        version). A message with none is left out (its own intake stands)."""
        ...


class MemoryWaitingPrices:
    """A ``WaitingPrices`` in memory, for tests: ``wait`` what is still to be given."""

    def __init__(self, *waiting: WaitingPrice) -> None:
        self.prices = list(waiting)

    def wait(self, price: WaitingPrice) -> None:
        self.prices.append(price)

    def waiting(self, skus: Iterable[str]) -> list[WaitingPrice]:
        wanted = set(skus)
        return [p for p in self.prices if p.sku in wanted]

    def taken_first(self, message_ids: Iterable[str]) -> dict[str, datetime]:
        return {}


class _NothingWaits:
    def waiting(self, skus: Iterable[str]) -> list[WaitingPrice]:
        return []

    def taken_first(self, message_ids: Iterable[str]) -> dict[str, datetime]:
        return {}


NOTHING_WAITING: WaitingPrices = _NothingWaits()

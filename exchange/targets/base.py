"""The seam between the queue and a shop: what every target offers the worker.

The worker leases a batch, asks the target how the batch travels (``requests``), sends each
request through ``send`` and obeys what comes back: one ``Classification`` per message, in the
verdicts of contract 5 (delivered, stale at the site, temporary, terminal, pause, unknown).
What a request looks like on the wire, how the shop's answers read, whether the shop has a
batch endpoint: all of that stays inside the target. The queue, coalescing, leases, the
retry decision and the breaker never learn which target runs.

A new target is a module under ``exchange/targets/`` with a class that satisfies ``Target``,
built by ``exchange.app.target``, and added to the conformance suite
(tests/targets/test_conformance.py).

The site's pace (contract 5c) is the worker's. A target whose ``send`` is one request (the shop
API, RabbitMQ) is paced by the worker around ``send``. A target that makes several requests for
one ``send`` (WooCommerce's lookups, batches per parent and read-backs; each step of a Bitrix
exchange) or whose ``health`` is a request of its own is a ``PacedTarget``: the worker hands it
a ``Pacer``, and every one of its requests waits its turn and tells the pace what the site
answered, exactly as the worker's own turn does for a single request.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Protocol, runtime_checkable

from exchange.domain.verdicts import Classification


# Not frozen: one is made per message, and a frozen dataclass's __init__ costs ~2.5x.
@dataclass(slots=True)
class OutgoingMessage:
    """A leased message as it leaves for a shop: what the contract lets a shop see, nothing
    more (never the staging row's other columns)."""

    message_id: str
    kind: str
    aggregate: str
    version: int
    payload: str  # canonical JSON text: decimals exactly as accepted
    created_at: datetime
    # The delivery's stored receipt as the claim read it: what its last ``AWAITING`` left for
    # the target to pick up after a restart (e.g. ``ym-accepted:…``); None when there is none.
    receipt: str | None = None
    # When the service took the message in (intake's ``messages.taken_at``); None where the
    # caller has no intake time (then ``created_at`` stands for it).
    taken_at: datetime | None = None


class Target(Protocol):
    """A shop the worker delivers to.

    Optional: ``batches_at_once`` (an int, 1 when absent): how many claimed batches the worker
    may have out at once (``DeliveryLoop.drain``); more than 1 only for a target that keeps
    its account's limit itself on every request (Wildberries). ``requests_at_once`` (an int,
    or absent): the most requests of this worker the target lets be in flight, below the
    worker's own limit (Yandex Market's share of ``ym_parallel``): what the pace figures show
    as the limit (``DeliveryLoop.pace_figures``). ``requests_at_once_of`` (an int, None, or
    absent): where set, ``requests_at_once`` is every worker's of the channel together (Yandex
    Market's places in the database) and this the most it can be: the figures show both as
    they are, marked shared (``limit_shared``: never summed over the workers). ``item_of``
    (a function of a message, or absent): the key of the item a message goes in with others
    of the request (a marketplace's SKU); the breaker's one probe sends its first message's
    whole item (``DeliveryLoop._probe_first``)."""

    name: str
    """Short and stable: ``api``, ``bitrix``, ``woocommerce``; for logs and status."""

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        """How a leased batch travels: the messages in order, one list per request, at most
        one message of an aggregate in a request."""
        ...

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        """Send one request (as ``requests`` grouped it, or a part of it) and judge the answer:
        one classification per message, in the order given. Never raises for what the shop or
        the network does: a failure is a classification (temporary, unknown)."""
        ...

    async def health(self) -> Classification:
        """Whether the shop is up and accepts the credentials, with no effect on it:
        ``DELIVERED`` when it does, ``PAUSE`` when it refuses the credentials."""
        ...

    def reload_credentials(self) -> bool:
        """Read the credentials again (an operator replaced a secret file): whether they differ
        from those held before (the worker's pause tries new ones at once); raises
        ``ConfigurationError`` when they cannot be read."""
        ...

    async def aclose(self) -> None:
        """Close connections; the target is not used afterwards."""
        ...


class Pacer(Protocol):
    """The worker's pace as a target's requests use it (contract 5c)."""

    async def turn(self) -> float:
        """Wait until the pace lets one more request go (its hold, its rate, its limit on
        requests in flight); returns the moment it went (seconds on the worker's monotonic
        clock, ``Worker.monotonic``). Every ``turn`` is followed by one ``done``."""
        ...

    def done(self, sent_at: float, status: int | None, retry_after: str | None) -> None:
        """The request that went at ``sent_at`` has ended: its HTTP status (None: no answer, a
        transport failure) and the ``Retry-After`` it carried. Ends the turn; the pace learns
        the answer."""
        ...


class Unpaced:
    """The pace of a target used outside a worker (``exchange check``, tests): none."""

    async def turn(self) -> float:
        return time.monotonic()

    def done(self, sent_at: float, status: int | None, retry_after: str | None) -> None:
        return None


UNPACED = Unpaced()


@runtime_checkable
class PacedTarget(Target, Protocol):
    """A target whose own requests wait for the worker's pace, one turn each."""

    def pace_with(self, pacer: Pacer) -> None:
        """Every request from now on takes its turn from ``pacer``."""
        ...


@runtime_checkable
class SharesAccount(Protocol):
    """A target that keeps a limit of the account it sends with (a marketplace's budget per
    seller account, per Client-Id, per business), which every worker delivering to the
    channel spends together. The worker tells it how many live workers share the channel,
    itself included, as it splits EXCHANGE_SITE_MAX_RATE (``DeliveryLoop.share_site``): the
    target keeps its share of the account's limit (never below one request)."""

    def share(self, workers: int) -> None:
        """``workers`` live workers (at least one) spend the account's limit from now on."""
        ...


# -- reading prices back (exchange verify, contract 15) -----------------------------------------


@dataclass(frozen=True, slots=True)
class HeldPrice:
    """What a shop holds now for one delivered price message, read back."""

    message_id: str
    sku: str
    where: str  # the shop's name for the price: regular_price, sale_price, a marketplace's own
    sent: Decimal | None  # the price the message carried; None: it could not be read
    held: Decimal | None  # what the shop holds there; None: no price at all
    found: bool = True  # False: the shop has no product with this SKU
    unreadable: str | None = None  # why this message's price could not be compared

    @property
    def agrees(self) -> bool:
        """The one rule of verify: the shop has the product and holds the price as sent."""
        return self.unreadable is None and self.found and self.held == self.sent


@runtime_checkable
class ReadsPrices(Protocol):
    """A target that can read prices back from the shop (``exchange verify``): WooCommerce
    today, the marketplaces later. The shop API's and 1C-Bitrix's protocols have no way to
    read a price back, so their targets do not offer it and verify says so."""

    async def read_prices(self, messages: Sequence[OutgoingMessage]) -> list[HeldPrice]:
        """The prices the shop holds now for these delivered messages, one per message, in
        order, with no effect on the shop; raises ``ReadBackFailed`` when the shop cannot be
        read at all (not reached, the key refused)."""
        ...


# -- withheld prices (contract 13) -------------------------------------------------------------


class Shown(StrEnum):
    """What a channel shows buyers of a version it took and withheld (``Verdict.WITHHELD``)."""

    LIVE = "live"  # buyers see this version's price now: the delivery ends delivered
    WITHHELD = "withheld"  # still withheld: ask again later
    UNKNOWN = "unknown"  # the channel cannot say now (not reached, no longer listed): later
    # The channel no longer withholds it and shows buyers another price (the seller's own,
    # set where the channel is managed): this version never reached them, and the delivery
    # ends cancelled, reason superseded (contract 13), in words that say so.
    ELSEWHERE = "elsewhere"
    # The channel withholds another price for the good in this version's place (a newer upload
    # replaced it in the channel's price quarantine): this version will never reach buyers, and
    # the delivery ends cancelled, reason superseded, in words that say so.
    REPLACED = "replaced"


@dataclass(frozen=True, slots=True)
class Release:
    """A channel's answer to a person's release of one withheld version."""

    asked: bool  # the channel was asked and agreed; False: it has no way, or refused
    detail: str  # the channel's answer, or where the seller must act instead (its own words)
    shown: Shown = Shown.UNKNOWN  # what buyers see after it, where the answer says so


@runtime_checkable
class WithholdsPrices(Protocol):
    """A channel that may take a price and withhold it from buyers until a person confirms it
    (a marketplace's price quarantine). The worker asks ``withheld_shown`` for its withheld
    deliveries now and then (``exchange.delivery.withheld.recheck``); ``exchange withheld
    release`` calls ``release_withheld``. Both take any number of messages (the caller pages
    them) and answer one per message, in order; neither raises for what the channel does."""

    async def withheld_shown(self, messages: Sequence[OutgoingMessage]) -> list[Shown]:
        """Whether buyers see each withheld version now, with no effect on the channel."""
        ...

    async def release_withheld(self, messages: Sequence[OutgoingMessage]) -> list[Release]:
        """Ask the channel to show each withheld version to buyers, where it has a way."""
        ...


@runtime_checkable
class HoldsAfterAccepting(Protocol):
    """A channel whose price quarantine may hold a price it accepted, said only a little
    later (Yandex Market: a 200, then its quarantine lists the offer; the delivery waits for
    its read-back meanwhile and is ``withheld`` once listed). ``exchange withheld release``
    refusing an older price behind such a newer one says it may be held too (words38 item 6),
    never that the newer is not delivered yet as if it had not gone."""

    def accepted_unshown(self, receipt: str | None) -> bool:
        """Whether a delivery with this receipt was accepted by the channel and is not shown
        to buyers yet (read back later; the quarantine may list it meanwhile)."""
        ...

"""Yandex Market's Partner API for prices as a ``Target`` (contract 14; research §3).

How a leased batch travels (``requests``): one item per offer (the SKU trimmed as Yandex trims
``offerId``, §3.1 ``ShopSku``), at most ``MAX_OFFERS`` (500, §3.1) offers a request, two SKUs
that Yandex reads as one offer never in one request (a duplicate is a 400, §3.6.7).

How one request goes (``send``):

1. each payload read; a price type ``ym_price_types`` does not map is TERMINAL
   ``unmapped-price-type``, one mapped to null is ``not-for-this-shop``;
2. the messages of one SKU make one item carrying every mapped price type: the batch's, and the
   latest known of the others (``KnownPrices``: never a price it does not know), because
   Yandex drops ``discountBase`` and ``minimumForBestseller`` from an update that leaves them
   out (§3.1, §3.6.2);
3. Yandex's rules checked before sending (§3.1): ``value`` above 0 with at most 7 decimals,
   ``discountBase`` a whole number above ``value`` with a discount of 5–99 %,
   ``minimumForBestseller`` in 0 < x ≤ 100 000 000 (0: no minimum, left out of the update),
   an ``offerId`` of 1–255 characters, the
   roubles (``RUR``): otherwise TERMINAL ``invalid-for-channel`` with the rule;
4. ``POST /v2/businesses/{businessId}/offer-prices/updates`` at Yandex's pace (pace.py: offers
   a minute, requests at once; a 420 waited out or the parallelism lowered, then sent again);
   a 400 naming offers makes those TERMINAL with Yandex's words and sends the rest again,
   except an offer Yandex may hold all the same (its words say "already set", or an earlier
   400 that did not name it may have taken it, §8): read back as in 5–6, and TERMINAL with
   Yandex's words only when not shown within ``ym_apply_timeout`` (``_update``); one refused
   ``OFFER_NOT_FOUND`` is TERMINAL ``unknown-sku``; one shown as sent at once is delivered only
   when the quarantine list holds no other price of the offer, else it waits behind that one
   (``_in_force``), as does one refused "already set" whose read-back shows the withheld price
   while the list names it as the last valid one;
5. a 200 means accepted, not applied (§3.4): each message is ``AWAITING`` and waits, not
   charged and not in flight, for the read-back (``again_in``: ``ym_apply_timeout``/40, then
   doubling up to ``ym_apply_timeout``/10); the item sent is remembered by message;
6. leased again, a remembered message is read back instead of sent (``POST …/offer-prices``,
   at most 200 offers, within the read's own budget): the item shown as sent and not listed in
   ``price-quarantine`` is DELIVERED; listed there, WITHHELD (Yandex's verdict in words);
   missing from the read-back (every page read), AWAITING again, and TERMINAL ``unknown-sku``
   once ``ym_apply_timeout`` passed; not shown yet, AWAITING again until
   ``ym_apply_timeout`` from the 200, then TEMPORARY (charged: sent again). The item goes
   again once: a message of it due again after the first re-send, which carried its price,
   reads that update back (``_sent_again_since``).

An update accepted while an earlier one of its SKU may still land (Yandex promises no order,
§3.5) counts only once ``ym_apply_timeout`` has passed since its 200, since a read-back cannot
tell 1C's 100, 120, 100 apart: the earlier one known to this process's memory, or to the
database (``EarlierSends``: another worker's, one before a restart, or one whose answer never
came, its receipt ``ym-sent:``). The database also names the SKUs the channel already gave an
offer: a second SKU of that offer is ``invalid-for-channel``, whichever worker sent the first.

What is remembered survives a restart in the delivery's receipt (``ym-accepted:`` and, as
JSON, when Yandex accepted it, the offer and the fields sent; the 200's ``AWAITING`` carries it
and the claim hands it back as ``OutgoingMessage.receipt``): a message leased again by a worker
that does not remember it is read back from its receipt, never sent again, its timeout counted
from the time in the receipt. A delivery sent again after a timeout (``NotApplied``) has its
receipt replaced by ``ym-not-applied``, so its next attempt sends. A worker's memory of a
message counts only while the delivery's receipt is still the one it is of (``_remembered``):
with several workers, the receipt another wrote since (its "not applied", its new 200) wins.

``withheld_shown`` and ``release_withheld`` (contract 13) read the read-back and the quarantine
list, and call ``price-quarantine/confirm`` (at most 200 offers); ``read_prices`` serves
``exchange verify``. Every request, whichever the method, goes through ``_call``: within the
one ``ym_parallel`` (``Parallel``) and its method's own budget (§3.3: a resource a method), a
420 waited out or the parallelism lowered there; a read refused by Yandex's pace decides
nothing and is read again later. The key (``Api-Key`` header, §3.2) is never logged nor put
in a detail.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import math
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

import httpx

from exchange.domain.prices import AWAITING_1C, KnownPrice
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ReadBackFailed
from exchange.targets.base import (
    UNPACED,
    HeldPrice,
    OutgoingMessage,
    Pacer,
    Release,
    Shown,
)
from exchange.targets.marketplace import items as shared
from exchange.targets.marketplace.articles import NO_ARTICLES, Articles
from exchange.targets.marketplace.hold import (
    NO_SHARED_HOLD,
    NO_SHARED_LEFT,
    NO_SHARED_SLOTS,
    SharedHold,
    SharedLeft,
    SharedSlots,
)
from exchange.targets.marketplace.holders import NoHolders, OfferHolders, OneSkuAGood
from exchange.targets.marketplace.money import Money
from exchange.targets.prices import (
    NO_KNOWN_PRICES,
    NOTHING_WAITING,
    KnownPrices,
    MappedPrice,
    WaitingPrices,
    read_price,
)
from exchange.targets.wire import (
    http_client,
    httpx_failure,
    key_masked,
    key_masked_failure,
    transport_verdict,
)
from exchange.targets.yandex_market import answers
from exchange.targets.yandex_market.pace import (
    LONGEST_WAIT,
    PARALLEL_KEPT,
    PAST_UNTIL,
    Later,
    OfferBudget,
    Parallel,
    learned_limit,
    parallel_heard,
    parallel_kept,
    parallel_places,
)

log = logging.getLogger(__name__)

# Seconds a request waits for its budget at most (None: as long as the budget says), set by
# ``send`` for the requests it makes (pace.py ``LONGEST_WAIT``).
_PATIENCE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "ym_patience", default=None
)
# Seconds a read-back (and its quarantine list) of accepted updates waits for its budget inside
# a send: none. The read budget is spent as fast as the updates' (every accepted offer is read
# back once), so a lease of read-backs alone found it spent; waiting there held the worker,
# and the next lease's updates with it, for most of a window (bench marketplace_pace: 0.78 of
# Yandex's allowed rate on PostgreSQL). Held, a read goes back uncharged, read again when the
# budget has room (``Later``: nothing counted, nothing sent).
READ_PATIENCE = 0.0

PRODUCTION_URL = "https://api.partner.market.yandex.ru"
USER_AGENT = "exchange/0.1"
MAX_OFFERS = 500  # §3.1 UpdateBusinessPricesRequest: 1..500
MAX_READ = 200  # §3.4 GetDefaultPricesRequest: ≤ 200 offerIds
MAX_CONFIRM = 200  # §3.4 ConfirmPricesRequest: 1..200
MAX_OFFER_ID = 255  # §3.1 ShopSku: 1..255 characters
MAX_DIGITS = 7  # §3.1 value: ≤ 7 decimal places
MAX_BESTSELLER = Decimal(100_000_000)  # §3.1 minimumForBestseller
DISCOUNT_MIN, DISCOUNT_MAX = 5, 99  # §3.1 DiscountBase: 5..99 %
RUR = "RUR"  # §3.1 CurrencyType: Yandex's code for roubles (ISO 4217's RUB)
# What each field takes (contract 14's money, item 0): value and minimumForBestseller are
# numbers with at most 7 decimals (§3.1), discountBase an integer (§3.1 DiscountBase).
MONEY = {
    "value": Money(places=MAX_DIGITS),
    # 0 is "no discount" (as Ozon's old_price 0): the update goes without it (``_no_discount``).
    "discountBase": Money(places=0, zero=True),
    # 0 is "no minimum" (review ym400): the update goes without it, and Yandex deletes the
    # minimum an update leaves out (§3.1 "Не передать этот параметр — удалится значение").
    # At most 100 000 000 (§3.1): a minimum above it is refused alone, at once.
    "minimumForBestseller": Money(places=MAX_DIGITS, zero=True, most=MAX_BESTSELLER),
}
FIELDS = ("value", "discountBase", "minimumForBestseller")
# The prices whose rules depend on ``value`` (contract 14, issue 32): a new one that breaks a
# rule beside a new value is refused alone; the item goes without it, never with the delivered
# one 1C replaced: no discount (discountBase 0: left out of the update, §3.1, §3.6.2), no
# minimum (left out: Yandex deletes it, §3.1). minimumForBestseller is one (review rev42 4,
# rev42b H4): taken for a price of its own, a minimum out of Yandex's range held 1C's new value
# back with it, a SKU's first row of it was quarantined at once, and the discount's checks
# compared the old price with it. Its "none" is None, as Ozon's min_price: no strikethrough
# price buyers see, nothing for a send to clear (``items._clearing``).
DEPENDENT: dict[str, Decimal | None] = {"discountBase": Decimal(0), "minimumForBestseller": None}
MAIN_FIELD = "value"  # the price an old price stands beside (``items.Channel.main``)
SLOT_POLL = 0.05  # seconds between looks for a free place of ``ym_parallel`` (``_slot``)
# Seconds a place stays taken after its request was cut off by our timeout (``_slot``): Yandex
# may still be serving it, and a request sent at once in its place would be one too many at
# once (as a place a dead worker held ends ``http_timeout`` and 5 s after it was taken).
PLACE_COOLING = 5.0
TRIES = 4  # sends of one request through 420s (waited out) before its 420 is the verdict
RESENDS = 3  # rounds of "a 400 named some offers: the rest sent again"
# Requests one refused update may add, halving itself to find the offers a 400 naming none
# refused (``_Unnamed``): a bad offer among 500 is found in 18; beyond, the rest ends http-400.
SPLITS = 20
# The delivery's receipt while Yandex's 200 waits for its read-back (it survives a restart).
ACCEPTED = "ym-accepted:"
# The receipt of a delivery not applied in time: its next attempt sends, never reads back.
NOT_APPLIED = "ym-not-applied"
# The receipt of an update whose answer never came (a timeout after the request left, a 5xx):
# Yandex may have taken it, and it may still land (``EarlierSends``).
SENT = "ym-sent:"
# What replaces ``ym-sent:`` on an update a 400 refused (never taken): nothing may land.
REFUSED = "ym-refused"
# The receipt of an update refused as a repeat ("already set") while the read-back, read after
# the list, shows another price and nothing of the channel's may still land: the price Yandex
# held when it refused changed since (a held one confirmed in the cabinet went live). Its next
# attempt sends, once: refused the same way again, it is read back as any "already set" is.
HELD_CHANGED = "ym-held-changed"
# What replaces ``ym-sent:`` on an update whose request never left (``_unsent``), when the
# delivery had no receipt before: nothing may land.
UNSENT = "ym-unsent"
# The offer the health check reads back: any name will do (an offer Yandex does not know is
# left out of the read-back, §3.4); never none, which reads a page of the whole catalogue.
HEALTH_OFFER = "exchange-health-check"


def offer_id(sku: str) -> str:
    """The ``offerId`` Yandex keeps for a SKU: leading and trailing whitespace trimmed (§3.1
    ``ShopSku``: ``" SKU123 "`` ≡ ``"SKU123"``)."""
    return sku.strip()


def number(amount: Decimal) -> str:
    """A JSON number exactly as the Decimal holds it (never a float, never an exponent)."""
    return format(amount, "f")


def dump(value: Any) -> str:
    """JSON with Decimals as numbers written from their text (json.dumps cannot)."""
    import json

    if isinstance(value, Decimal):
        return number(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)


@dataclass(slots=True)
class _Item:
    """One offer as one update carries it: every mapped field, and the messages it carries as
    new (their verdict is the item's)."""

    offer: str
    sku: str
    fields: dict[str, Decimal]
    carried: list[OutgoingMessage] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)  # field -> its price's version
    fields_of: dict[str, str] = field(default_factory=dict)  # carried message_id -> its field
    # The verdict of the carried messages once Yandex shows the item (``shared.Built.clears``:
    # dependent prices quarantined, the item clearing the one 1C replaced); None: delivered.
    then: Classification | None = None

    def json(self, currency: str) -> dict[str, Any]:
        price: dict[str, Any] = {"value": self.fields["value"], "currencyId": currency}
        for name in FIELDS[1:]:
            # 0: no discount, no minimum; left out, Yandex drops it (§3.1, §3.6.2)
            if self.fields.get(name):
                price[name] = self.fields[name]
        return {"offerId": self.offer, "price": price}


@dataclass(slots=True)
class _Accepted:
    """An item Yandex accepted with a 200, not yet shown (by message)."""

    offer: str
    fields: dict[str, Decimal]
    accepted_at: float  # monotonic
    reads: int = 0
    sku: str | None = None  # as staged (from the message itself after a restart)
    # Accepted while an earlier update of the offer, with other prices, was not shown yet:
    # the read-back cannot tell this update's prices from the ones before that one (1C went
    # 100, 120, 100), so it counts only from this monotonic moment, ``ym_apply_timeout`` on.
    settles_at: float | None = None
    # field -> the version of the price it carries; a field missing (a receipt written before
    # versions were kept) is taken as the newest.
    versions: dict[str, int] = field(default_factory=dict)
    # Refused by a 400 in these words (``CODE message``), yet maybe Yandex's all the same
    # (``answers.maybe_taken``: "already set", or an earlier 400 may have taken it): shown as
    # sent it is delivered; not shown within ``ym_apply_timeout``, terminal with these words.
    refused: str | None = None
    # The delivery's receipt this memory is of (the one ``_took`` gave the 200, or the one it
    # was read from): the claim hands the delivery's receipt back, and one that differs means
    # the delivery moved on without this worker (another worker found it not applied, or sent
    # it again): the database's receipt is then what counts, never this memory.
    receipt: str | None = None
    # The fields of the earlier updates of the offer that were not shown yet when this one was
    # accepted (``_unsettled``, this process's memory): the read-back showing one of them says
    # it landed after this one (review words35b item 3), in this one's history.
    earlier: list[dict[str, Decimal]] = field(default_factory=list)
    # The verdict once shown as sent (``_Item.then``), kept in the receipt; None: delivered.
    then: Classification | None = None
    # The words of a 400 that refused this update sent once more without the dependent price
    # 1C replaced (``_without_replaced``, ``_clearing_refused``): Yandex still shows that
    # price, and the read-back that delivers this update says so; never sent so again.
    uncleared: str | None = None


@dataclass(frozen=True, slots=True)
class _Listed:
    """An offer Yandex lists in its price quarantine (§3.4): its verdicts in words and the
    price it withholds (``currentPrice.value``, else the verdict's ``CURRENT_PRICE``; None
    when the entry names none). An offer stays listed with the withheld price while a later
    update of it waits to be applied, so being listed says nothing of that later price."""

    words: str
    value: Decimal | None
    # The price buyers see meanwhile (``lastValidPrice.value``, else the verdict's
    # ``LAST_VALID_PRICE``; None when the entry names none).
    last_valid: Decimal | None = None

    def holds(self, value: Decimal | None) -> bool:
        """Whether the price Yandex withholds is ``value`` (an entry naming no price: taken
        as the one asked about, Yandex's listing being all there is to go on)."""
        return self.value is None or self.value == value

    def said(self) -> str:
        held = f" value={number(self.value)}" if self.value is not None else ""
        return f"{held.strip() or 'a price'} ({self.words})"


@dataclass(slots=True)
class _Read:
    """What the read-back says of one offer."""

    found: bool
    shown: dict[str, Decimal]


@dataclass(slots=True)
class _Looked:
    """Yandex's quarantine list as read before the read-back it judges (``_look_first``):
    the offers listed; those the list could not be read for (``unread``), and why
    (``cannot``: None when every offer was read)."""

    listed: dict[str, _Listed]
    unread: set[str] = field(default_factory=set)
    cannot: Classification | None = None


class EarlierSends(OfferHolders, Protocol):
    """The port the target reads the channel's earlier updates of a SKU through, whichever
    worker sent them (``exchange.db.sent_times``; a channel of its name dropped since
    included: its update may land over the price of the one added again), and the SKUs it
    gave each offer (the marketplaces' ``OfferHolders``): the receipts of the deliveries of
    the SKU's prices updated since ``moment`` whose receipt begins with one of ``prefixes``
    and that did not end shown, or that are in flight and not ``leaving_out``'s (None: no
    receipt)."""

    def unsettled_since(
        self,
        skus: Iterable[str],
        moment: datetime,
        prefixes: Iterable[str],
        leaving_out: Iterable[str] = (),
    ) -> dict[str, list[str | None]]: ...

    def sending(self, receipts: Mapping[str, str]) -> None:
        """Before an update leaves: each message's delivery, in flight, keeps ``receipts``'
        text (``ym-sent:``), committed, so a worker killed before the answer leaves a send
        ``unsettled_since`` still counts."""
        ...

    def sending_first(
        self,
        receipts: Mapping[str, str],
        goods: Mapping[str, tuple[str, str]],
        prefixes: Iterable[str],
        *,
        by_article: bool = False,
    ) -> dict[str, str]:
        """``sending``, one offer at a time across workers: a message whose offer (``goods``:
        ``message_id`` -> (offer, SKU)) another SKU was already sent to (a receipt beginning
        with one of ``prefixes``, delivered, withheld) is not marked; returned, with that SKU
        (issue 32: two workers that each read the holders before the other's mark was in)."""
        ...


class _NoEarlierSends(NoHolders):
    def unsettled_since(
        self,
        skus: Iterable[str],
        moment: datetime,
        prefixes: Iterable[str],
        leaving_out: Iterable[str] = (),
    ) -> dict[str, list[str | None]]:
        return {}

    def sending(self, receipts: Mapping[str, str]) -> None:
        return None

    def sending_first(
        self,
        receipts: Mapping[str, str],
        goods: Mapping[str, tuple[str, str]],
        prefixes: Iterable[str],
        *,
        by_article: bool = False,
    ) -> dict[str, str]:
        return {}


# Without a database (``exchange check``, the tests of one process): this process's memory only.
NO_EARLIER_SENDS: EarlierSends = _NoEarlierSends()


class _Whole(Exception):
    """An answer that decides every offer of its request. ``unsent``: no request left at all
    (no key, or no connection made before any answer came): Yandex took nothing."""

    def __init__(self, classification: Classification, *, unsent: bool = False) -> None:
        super().__init__(classification.detail)
        self.classification = classification
        self.unsent = unsent
        # A read-back cut in parts: the offers the parts before this answer asked for, and
        # what they read (``_read_back``).
        self.asked: set[str] = set()
        self.read: dict[str, _Read] = {}
        # A quarantine list cut in parts: the offers the parts before asked for, and those
        # of them Yandex lists (``_quarantined``).
        self.listed_asked: set[str] = set()
        self.listed: dict[str, _Listed] = {}
        self.held = False  # our budget held the request: it never left (``_call``)
        # Yandex's pace: a 420 still refused after the waits, or our budget held the request
        # (``_call``): no word on the offers, never a sign an update was not applied.
        self.paced = False


class _Unnamed(_Whole):
    """A 400 of an update that names none of its offers (review 32b: "Internal validation
    failed"): split in halves to find which (``YandexMarketTarget._update``)."""


class YandexMarketTarget:
    name = "yandex-market"
    # A SKU's price types go in one item; the breaker's probe sends the whole item (base.py).
    item_of = staticmethod(shared.sku_of)

    def __init__(
        self,
        url: str,
        business_id: int,
        key: Callable[[], str | None],
        *,
        price_types: Mapping[str, str | None],
        currency: str = "RUB",
        sku_source: str = "sku",
        rounding: str = "none",
        pair_settle: float = 0.0,
        articles: Articles = NO_ARTICLES,
        offers_per_minute: int = 10_000,
        parallel: int = 4,
        apply_timeout: float = 600.0,
        timeout: float = 30.0,
        known: KnownPrices = NO_KNOWN_PRICES,
        waiting: WaitingPrices = NOTHING_WAITING,
        earlier: EarlierSends = NO_EARLIER_SENDS,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_offers: int = MAX_OFFERS,
        channel_said: str | None = None,
        spent: Callable[[str], SharedHold] | None = None,
        slots: SharedSlots = NO_SHARED_SLOTS,
        past_until: float = PAST_UNTIL,
        left: Callable[[str], SharedLeft] | None = None,
    ) -> None:
        """``max_offers``: offers a request at most (Yandex's 500; fewer where a minute of the
        budget cannot hold 500, as a bench's scaled simulator whose minute lasts a second).
        ``earlier``: the channel's earlier updates of a SKU that may still land, from the
        database (another worker's, or this one's before a restart or a timeout).
        ``channel_said``: what its words call the channel (``Channel.said``: "channel ym
        (Yandex Market)" under EXCHANGE_CHANNELS); without it, the marketplace's name.
        ``spent``: a method's budget spent as any worker of the business heard Yandex say it
        (``SharedHold`` by method: until when, and the budget a 420 named); without it, this
        process's own hearing only. ``slots``: the business's ``ym_parallel`` places, one
        taken by each request whichever worker sends it (without it, this process's share of
        them only, ``Parallel``). ``left``: what is left of a method's budget until its
        window ends as the business's last answers said it (``SharedLeft`` by method), each
        request of any worker taking its offers from it first (``_left_taken``).
        ``pair_settle``: seconds a price taken in alone beside the known price of its pair's
        other type waits for 1C's row of that type (``items._settles``; 0: never waits)."""
        self.url = url.rstrip("/")
        self.business_id = business_id
        self._key_source = key
        self._key = key()
        self.price_types = dict(price_types)
        self.channel = shared.Channel(
            "yandex-market",
            self.price_types,
            "ym_price_types",
            MONEY,
            currency=currency,
            sku_source=sku_source,
            rounding=rounding,
            dependent=DEPENDENT,
            struck=frozenset({"discountBase"}),
            called=channel_said or "Yandex Market",
            settle=pair_settle,
            main=MAIN_FIELD,
        )
        self.currency_id = RUR if currency == "RUB" else currency
        self.articles = articles
        self.apply_timeout = apply_timeout
        self.known = known
        self.waiting = waiting
        self.earlier = earlier
        self.per_request = max(1, min(MAX_OFFERS, max_offers, offers_per_minute))
        # A read, quarantine list or confirm of at most what a minute takes, too (pace.py: a
        # request larger than the budget would be refused whole, never made smaller).
        self.per_read = max(1, min(MAX_READ, offers_per_minute))
        # ... and of at most this worker's share of the minute (``share``).
        self._most_per_request, self._most_per_read = self.per_request, self.per_read
        self._first_per_request, self._first_per_read = self.per_request, self.per_read
        self.workers = 1
        # The shortest window that holds a whole request (pace.py): 3 s at Yandex's figures.
        window = max(1.0, 60.0 * self.per_request / offers_per_minute)
        read_window = max(1.0, 60.0 * self.per_read / offers_per_minute)
        self.budget = OfferBudget(
            offers_per_minute,
            window=window,
            monotonic=monotonic,
            sleep=sleep,
            past_until=past_until,
        )
        self.read_budget = OfferBudget(
            offers_per_minute,
            window=read_window,
            monotonic=monotonic,
            sleep=sleep,
            past_until=past_until,
        )
        # §3.3: a resource a method; the quarantine list's and the confirm's figures are not
        # in the research: the read's. Each holds its own 420's Until.
        self.quarantine_budget = OfferBudget(
            offers_per_minute,
            window=read_window,
            monotonic=monotonic,
            sleep=sleep,
            past_until=past_until,
        )
        self.confirm_budget = OfferBudget(
            offers_per_minute,
            window=read_window,
            monotonic=monotonic,
            sleep=sleep,
            past_until=past_until,
        )
        self.parallel = Parallel(parallel, shared=slots is not NO_SHARED_SLOTS)
        self.slots = slots
        # The business's places in force as this process last read them (``_take_place``,
        # ``_parallel_heard``): ``ym_parallel``, or fewer while a lowering holds.
        self._places = max(1, parallel)
        self._slot_lease = timeout + 5.0  # a place a dead worker held ends by itself
        self._spent: dict[str, SharedHold] = {
            method: spent(method) if spent is not None else NO_SHARED_HOLD
            for method in (
                "offer-prices/updates",
                "offer-prices",
                "price-quarantine",
                "price-quarantine/confirm",
            )
        }
        self._left: dict[str, SharedLeft] = {
            method: left(method) if left is not None else NO_SHARED_LEFT for method in self._spent
        }
        # The note of each method's row (the business's learned limit) as this process last
        # read it (``_spent_heard``): a changed note is followed, both ways.
        self._noted: dict[str, str | None] = {}
        self._monotonic = monotonic
        self._now = now
        self.past_until = max(0.0, past_until)
        self._accepted: dict[str, _Accepted] = {}
        # Messages found not applied in time: sent on their next lease while their receipt
        # still says what it said then (a release that charged nothing, e.g. a probe, keeps
        # ``ym-accepted:``): by message, that receipt. Another receipt since (another worker
        # sent it again and Yandex took it) is read back, never sent once more.
        self._not_applied: dict[str, str | None] = {}
        # One SKU an offer: another SKU Yandex reads as the same offer (one article, or equal
        # once trimmed, §3.1) would overwrite its price. The SKUs any worker gave each offer
        # (delivered, withheld, in flight, or a receipt of a send), and this process's claims.
        self.one_sku = OneSkuAGood(earlier, (ACCEPTED, SENT, NOT_APPLIED), "Yandex Market")
        self._pacer: Pacer = UNPACED
        self._http = http_client(
            base_url=f"{self.url}/v2/businesses/{business_id}",
            timeout=timeout,
            verify=verify,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
        )
        self.requests_sent: dict[str, int] = {}  # by method, for the bench and the tests

    # -- the seam --------------------------------------------------------------------------

    def pace_with(self, pacer: Pacer) -> None:
        """Every request also takes its turn from the worker's pace (contract 5c)."""
        self._pacer = pacer

    @property
    def requests_at_once(self) -> int:
        """What ``exchange status`` shows as this worker's limit (``DeliveryLoop.pace_figures``):
        with the business's places in the database, those in force (``ym_parallel``, or fewer
        while a 420's lowering holds), every worker's requests together (its own share is only
        how many of them it may hold: three workers' shares of 4 add up to 6, and a sum of them
        read as the business's would mislead); alone, this process's share of ``ym_parallel``
        (less a parallel 420's lowering)."""
        if self.slots is NO_SHARED_SLOTS:
            return self.parallel.limit
        return min(self._places, self.parallel.account)

    @property
    def requests_at_once_of(self) -> int | None:
        """The most ``requests_at_once`` can be where it is every worker's together (the
        business's places): ``ym_parallel``; None where it is this process's own."""
        return None if self.slots is NO_SHARED_SLOTS else self.parallel.account

    def share(self, workers: int) -> None:
        """The channel's live workers (this one included) spend the business's budget and
        requests at once together (§3.3): this target keeps its share of both (pace.py),
        its requests no larger than its share of a minute."""
        self.workers = max(1, workers)
        self.parallel.share(self.workers)
        self._fit()

    def _fit(self) -> None:
        """Requests of at most this worker's share of the minute, and the budgets kept to
        it (pace.py)."""
        share = max(1, self.budget.account // self.workers)
        self.per_request = max(1, min(self._most_per_request, share))
        self.budget.share(self.workers, self.per_request)
        reads = (self.read_budget, self.quarantine_budget, self.confirm_budget)
        share = max(1, min(b.account for b in reads) // self.workers)
        self.per_read = max(1, min(self._most_per_read, share))
        for budget in reads:
            budget.share(self.workers, self.per_read)

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        """At most ``per_request`` offers a request, a SKU's messages together, never two
        messages of one aggregate in one request, and two SKUs that trim to one ``offerId`` in
        different requests."""
        out: list[tuple[list[OutgoingMessage], dict[str, str], set[str]]] = []
        for message in messages:
            sku = _sku(message)
            key = offer_id(sku) if sku is not None else f"\0{message.message_id}"
            raw = sku if sku is not None else key
            for group, offers, aggregates in out:
                held = offers.get(key)
                if message.aggregate not in aggregates and (
                    held == raw or (held is None and len(offers) < self.per_request)
                ):
                    group.append(message)
                    offers[key] = raw
                    aggregates.add(message.aggregate)
                    break
            else:
                out.append(([message], {key: raw}, {message.aggregate}))
        return [group for group, _, _ in out]

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        # Within a send, a request waits for the budget LONGEST_WAIT at most (the worker's stop
        # waits for its sends); ``exchange verify`` and ``release`` wait as long as it says.
        patience = _PATIENCE.set(LONGEST_WAIT)
        try:
            return await self._send(messages)
        finally:
            _PATIENCE.reset(patience)

    async def _send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        self._forget_old()
        answers_: dict[str, Classification] = {}
        groups: dict[str, list[OutgoingMessage]] = {}
        for message in messages:
            groups.setdefault(shared.sku_of(message) or f"\0{message.message_id}", []).append(
                message
            )
        to_read: list[tuple[OutgoingMessage, _Accepted]] = []
        to_send: list[OutgoingMessage] = []
        beside: list[KnownPrice] = []
        along: list[list[tuple[OutgoingMessage, _Accepted | None]]] = []
        remembered_all = {m.message_id: self._remembered(m) for m in messages}
        adopted = await self._sent_again_since(
            [m for m in messages if remembered_all[m.message_id] is None]
        )
        for group in groups.values():
            remembered = [remembered_all[m.message_id] or adopted.get(m.message_id) for m in group]
            pairs = list(zip(group, remembered, strict=True))
            if all(a is not None for a in remembered):
                to_read += [(m, a) for m, a in pairs if a]
            elif any(remembered):
                # A price of the SKU claimed with an accepted update of it that is due for its
                # read-back: one waiting for 1C's next package (``AWAITS_COMPANION``), or 1C's
                # next price come before Yandex shows the accepted one. The accepted one is
                # read back, never sent again (review rev35ym: 1100 went again about once a
                # second for the 10 minutes its discountBase 1150 waited); the other is judged
                # beside it, as the known price of its type, as it is once the read-back is
                # done: it goes, or waits for 1C's next package (review yrace39 R2: 1C's value
                # 1500, 2 s after its accepted pair 1000/1400, went as new with 1400 again;
                # 1400 was quarantined "the price went without it", and 1500 beside the
                # accepted 1400 too, at once).
                to_read += [(m, a) for m, a in pairs if a]
                to_send += [m for m, a in pairs if a is None]
                beside += [k for k in (self._as_known(m) for m, a in pairs if a) if k]
                along.append(pairs)
            else:
                to_send += group
        if to_send:
            # An offer without its value (or breaking a rule) while a price of its SKU waits
            # for its retry waits for it, looked at again as often as an accepted one is read
            # at most (``_look_every``).
            built = await shared.gather(
                to_send,
                self.channel,
                known=_WithAccepted(self.known, beside) if beside else self.known,
                articles=self.articles,
                rule=_rule,
                waiting=self.waiting,
                now=self._now(),
                most=self._look_every(),
            )
            answers_.update(built.answers)
            again = self._without_replaced(along, answers_)
            clearing = [
                (m, a, i)
                for pairs in along
                for m, a in pairs
                for i in again
                if a is not None and m in i.carried
            ]
            clears = await self._clears(built, answers_)
            await self._said_shown(to_send, answers_)
            to_read = [(m, a) for m, a in to_read if all(m not in i.carried for i in again)]
            # Two SKUs of one offerId (one article, or equal once trimmed) never in one update:
            # Yandex refuses the request as a duplicate (§3.6.7); each goes in its own wave.
            waves: list[list[_Item]] = []
            holders = await self.one_sku.read(
                (offer_id(item.offer_id) for item in built.items),
                by_article=self.channel.sku_source == "article",
            )
            for item in self._with_accepted_all([*built.items, *again, *clears], answers_, holders):
                item.then = next(
                    (then for c, then in built.clears for m in c.carried if m in item.carried),
                    None,
                )
                wave = next((w for w in waves if all(x.offer != item.offer for x in w)), None)
                if wave is None:
                    waves.append([item])
                else:
                    wave.append(item)
            for wave in waves:
                answers_.update(await self._update(wave))
            if clearing:
                answers_.update(await self._clearing_refused(clearing, answers_))
        if to_read:
            patience = _PATIENCE.set(READ_PATIENCE)
            try:
                answers_.update(await self._read_accepted(to_read))
            finally:
                _PATIENCE.reset(patience)
            for message_id, a in adopted.items():
                said = answers_.get(message_id)
                if said is not None and said.verdict is Verdict.AWAITING and said.receipt is None:
                    # The update it now waits for is its SKU's re-send: its receipt, so that
                    # its next attempt (any worker's, after a restart too) reads that one back.
                    said.receipt = a.receipt
        return [answers_[m.message_id] for m in messages]

    async def _sent_again_since(self, messages: Sequence[OutgoingMessage]) -> dict[str, _Accepted]:
        """The messages found not applied in time (``ym-not-applied``: due to go again) whose
        SKU's update went again since, carrying their very price (the same version, the same
        amount), accepted within ``ym_apply_timeout``: each takes that update as its own and
        reads it back, never sends it once more. The messages of one item are found not
        applied together, but each is due again after its own retry delay (full jitter, per
        message): the first re-sends the whole item, and the next, a few seconds later, sent
        it again, charged (review rev39y H3: the same accepted update went twice more). Found
        in this worker's memory, else in the database's receipts (another worker's re-send,
        ``EarlierSends``); what cannot be read is sent, as before."""
        due: list[tuple[OutgoingMessage, MappedPrice]] = []
        for message in messages:
            if message.receipt != NOT_APPLIED and not (
                message.receipt is None and message.message_id in self._not_applied
            ):
                continue
            price = self._read(message)
            if not isinstance(price, Classification):
                due.append((message, price))
        if not due:
            return {}

        def carries(
            offer: str,
            sku: str | None,
            fields: Mapping[str, Decimal],
            versions: Mapping[str, int],
            message: OutgoingMessage,
            price: MappedPrice,
        ) -> bool:
            return (
                offer == offer_id(price.sku)
                and sku in (price.sku, None)
                and versions.get(price.mapped) == message.version
                and fields.get(price.mapped) == price.amount
            )

        out: dict[str, _Accepted] = {}
        since = self._monotonic() - self.apply_timeout
        for message, price in due:
            found = max(
                (
                    a
                    for a in self._accepted.values()
                    if a.accepted_at >= since
                    and a.receipt is not None
                    and a.refused is None
                    and a.then is None
                    and not a.uncleared
                    and carries(a.offer, a.sku, a.fields, a.versions, message, price)
                ),
                key=lambda a: a.accepted_at,
                default=None,
            )
            if found is not None:
                out[message.message_id] = replace(
                    found,
                    fields=dict(found.fields),
                    versions=dict(found.versions),
                    earlier=list(found.earlier),
                    sku=price.sku,
                )
        rest = [(m, p) for m, p in due if m.message_id not in out]
        if rest:
            now = self._now()
            try:
                found_ = await asyncio.to_thread(
                    self.earlier.unsettled_since,
                    sorted({p.sku for _, p in rest}),
                    now - timedelta(seconds=self.apply_timeout),
                    (ACCEPTED,),
                    [m.message_id for m in messages],
                )
            except Exception as exc:  # the service's database: sent, as before
                log.warning(
                    "Yandex Market: the SKU's re-sends could not be read (%s): sent again",
                    type(exc).__name__,
                )
                found_ = {}
            for message, price in rest:
                best: tuple[datetime, str] | None = None
                for receipt in found_.get(price.sku, []):
                    read = _from_receipt(receipt)
                    if read is None or receipt is None:
                        continue
                    offer, fields, at, versions, _ = read
                    if (
                        (now - at).total_seconds() < self.apply_timeout
                        and _refusal(receipt) is None
                        and _then(receipt) is None
                        and carries(offer, None, fields, versions, message, price)
                        and (best is None or at > best[0])
                    ):
                        best = (at, receipt)
                if best is None:
                    continue
                known = self._accepted_from(best[1], message)
                if known is not None:
                    out[message.message_id] = known
        for message_id, known in out.items():
            self._not_applied.pop(message_id, None)
            self._accepted[message_id] = known
        return out

    async def _said_shown(
        self, sent: Sequence[OutgoingMessage], answers_: dict[str, Classification]
    ) -> None:
        """A dependent price quarantined with nothing sent for its item is said with the
        strikethrough price the known prices give as still shown (``shared.still_shown_words``);
        one that went once more without it (``_without_replaced``) is not shown: read back, the
        words say only what Yandex shows (unread: they stay)."""
        marked: dict[str, list[tuple[str, str, str]]] = {}
        for message in sent:
            said = answers_.get(message.message_id)
            price = self._read(message)
            if said is None or said.verdict is not Verdict.TERMINAL:
                continue
            if isinstance(price, Classification) or price.mapped not in DEPENDENT:
                continue
            mark = f"; {self.channel.said} still shows {price.mapped} "
            if mark in said.detail:
                found = marked.setdefault(offer_id(price.sku), [])
                found.append((message.message_id, price.mapped, mark))
        if not marked:
            return
        patience = _PATIENCE.set(READ_PATIENCE)
        try:
            seen = await self._read_back(sorted(marked))
        except Exception:  # unread (its budget, a failure): the words stay as they are
            return
        finally:
            _PATIENCE.reset(patience)
        for offer, found in marked.items():
            read = seen.get(offer)
            for message_id, mapped, mark in found:
                if read is not None and read.found and not read.shown.get(mapped):
                    said = answers_[message_id]
                    answers_[message_id] = replace(said, detail=said.detail.split(mark)[0])

    def _without_replaced(
        self,
        along: list[list[tuple[OutgoingMessage, _Accepted | None]]],
        answers_: Mapping[str, Classification],
    ) -> list[shared.Item]:
        """The accepted updates that go once more without the dependent price 1C replaced: a
        newer one of its type (``discountBase``), taken along waiting, still breaks Yandex's
        rule beside them and waits on for 1C's next package (``AWAITING_1C``). The update
        accepted before it came carries the one 1C replaced (1100 beside 1200 where 1C now
        says 1150), a discount 1C no longer gives (docs/marketplaces.md: the old price 1C no
        longer states is a false discount): it goes again, once, without it (Yandex: no
        ``discountBase``, §3.6.2), as it would have gone had both come in one package (review
        rev35ym, HARMFUL 2)."""
        out: list[shared.Item] = []
        for pairs in along:
            waiting: dict[str, int] = {}
            for message, accepted in pairs:
                said = answers_.get(message.message_id)
                if accepted is not None or said is None or said.error_class != AWAITING_1C:
                    continue  # not a wait for 1C's next package: it broke no rule beside them
                price = self._read(message)
                if isinstance(price, Classification) or price.mapped not in DEPENDENT:
                    continue
                waiting[price.mapped] = max(waiting.get(price.mapped, 0), message.version)
            for message, accepted in pairs:
                if accepted is None or accepted.refused is not None or accepted.uncleared:
                    continue
                replaced = {
                    f: v
                    for f, v in waiting.items()
                    if accepted.fields.get(f) and accepted.versions.get(f, 0) < v
                }
                price = self._read(message)
                if not replaced or isinstance(price, Classification):
                    continue
                # The replaced price as none (discountBase 0: left out of the update), never
                # dropped from the fields: the read-back then checks Yandex shows no
                # discountBase beside the value. Dropped, only the value was compared, and the
                # earlier update (value with the replaced 1200), landing after this one
                # (§3.5: no order promised; ymsim ``apply_order=newest-first``), was read back
                # as this one delivered (review rev35re: 1100 beside 1200, ``find`` said
                # delivered).
                prices = dict(accepted.fields)
                for name in replaced:
                    none = DEPENDENT[name]
                    if none is None:
                        prices.pop(name, None)
                    else:
                        prices[name] = none
                out.append(
                    shared.Item(
                        price.sku,
                        accepted.offer,
                        prices,
                        [message],
                        {price.mapped},
                        {**accepted.versions, **replaced},
                        {message.message_id: price.mapped},
                    )
                )
        return out

    async def _clearing_refused(
        self,
        clearing: list[tuple[OutgoingMessage, _Accepted, shared.Item]],
        answers_: Mapping[str, Classification],
    ) -> dict[str, Classification]:
        """Accepted updates sent once more without the dependent price 1C replaced
        (``_without_replaced``) whose send a 400 refused: that refusal is of the update
        without it, never of the price the message carries, which Yandex took with its 200 and
        may show. Each is read back as its accepted update (``_read_accepted``), delivered once
        Yandex shows it, and never sent without the replaced price again (``uncleared``): its
        words say Yandex refused that update and still shows the price 1C replaced (rev39y H1:
        1000/1400 accepted, 1C's discountBase 1050 broke the rule beside 1000, the value 1000
        went without 1400 and Yandex answered 400: 1000 was quarantined http-400 "refused"
        while Yandex showed 1000 with 1400, a discount 1C replaced, and no word said so)."""
        refused: list[tuple[OutgoingMessage, _Accepted]] = []
        for message, accepted, item in clearing:
            said = answers_.get(message.message_id)
            taken = self._accepted.get(message.message_id)
            if said is None:
                continue
            if said.verdict is Verdict.TERMINAL and said.http_status == 400:
                words = said.detail
            elif (
                said.verdict is Verdict.AWAITING
                and taken is not None
                and taken is not accepted
                and taken.refused is not None
            ):
                # Refused in words that may mean Yandex holds it ("already set", ``_took``):
                # what Yandex holds is the update it took with its 200, read back as it was.
                words = f"HTTP 400: Yandex Market refused offer {item.offer_id!r}: {taken.refused}"
            else:
                continue
            gone = [
                f"{name} {number(accepted.fields[name])}"
                for name in DEPENDENT
                if accepted.fields.get(name) and not item.prices.get(name)
            ]
            accepted.uncleared = answers.uncleared_words(
                accepted.offer, ", ".join(gone) or "?", words
            )
            self._accepted[message.message_id] = accepted
            refused.append((message, accepted))
        if not refused:
            return {}
        patience = _PATIENCE.set(READ_PATIENCE)
        try:
            read = await self._read_accepted(refused)
        finally:
            _PATIENCE.reset(patience)
        out: dict[str, Classification] = {}
        for message, accepted in refused:
            said = read[message.message_id]
            if said.verdict is Verdict.AWAITING:
                # Its next attempt reads back the update Yandex took (the memory counts only
                # while the receipt is still the one it is of: ``_remembered``).
                said = replace(said, detail=said.detail + (accepted.uncleared or ""))
                said.receipt = accepted.receipt
            out[message.message_id] = said
        return out

    async def _clears(
        self, built: shared.Built, answers_: dict[str, Classification]
    ) -> list[shared.Item]:
        """The items of ``built.clears`` to send: a dependent price quarantined beside the
        delivered value while Yandex shows the ``discountBase`` 1C replaced (1100 beside 1200
        where 1C now says 1150, a later package than 1100's) is quarantined only once Yandex
        shows the value without it, as the other paths leave it (``_without_replaced``,
        ``_value_alone``; docs/marketplaces.md: the old price 1C no longer states is a false
        discount; review pairlate36). Read back first: one Yandex shows without it already
        (the value went once more without it, ``_without_replaced``) is not sent again;
        unread, it is sent (1C's value alone is what 1C states)."""
        found = [
            item
            for item, _ in built.clears
            if all(
                (c := answers_.get(m.message_id)) is not None and c.verdict is Verdict.TERMINAL
                for m in item.carried
            )
        ]
        if not found:
            return []
        seen: dict[str, _Read] = {}
        patience = _PATIENCE.set(READ_PATIENCE)
        try:
            seen = await self._read_back(sorted({offer_id(i.offer_id) for i in found}))
        except Exception:  # unread (its budget, a failure): sent all the same
            seen = {}
        finally:
            _PATIENCE.reset(patience)
        out: list[shared.Item] = []
        for item in found:
            read = seen.get(offer_id(item.offer_id))
            if (
                read is not None
                and read.found
                and not any(read.shown.get(item.fields_of[m.message_id]) for m in item.carried)
            ):
                continue  # Yandex shows none of them: the words say so (``_said_shown``)
            for message in item.carried:
                answers_.pop(message.message_id, None)
            out.append(item)
        return out

    def _as_known(self, message: OutgoingMessage) -> KnownPrice | None:
        """The price of an accepted ``message`` as a known price of its SKU (its delivery is
        in flight in this batch, so the database's known prices leave it out)."""
        price = read_price(
            message,
            target=self.channel.target,
            mapping=self.channel.price_types,
            setting=self.channel.setting,
        )
        if isinstance(price, Classification):
            return None
        try:
            price_type = str(json.loads(message.payload).get("price_type", ""))
        except (ValueError, AttributeError):
            return None
        return KnownPrice(price.sku, price_type, price.amount, price.currency, message.version)

    def _remembered(self, message: OutgoingMessage) -> _Accepted | None:
        """What Yandex accepted for ``message``: this worker's memory, else the delivery's
        receipt (a restart, or another worker), its age counted from the time it names.

        The memory counts only while the delivery's receipt (as the claim read it; None: a
        caller that keeps none) is still the one it is of: with two workers, the other may
        have had the delivery since, found it not applied (``ym-not-applied``: this memory's
        read-back would charge that one failure a second time) or sent it again (a new
        ``ym-accepted:``: this worker's "not applied" would send it a second time)."""
        known = self._accepted.get(message.message_id)
        if known is not None:
            if message.receipt is None or message.receipt == known.receipt:
                return known
            del self._accepted[message.message_id]
        if message.message_id in self._not_applied:
            if message.receipt is None or message.receipt == self._not_applied[message.message_id]:
                return None
            del self._not_applied[message.message_id]
        known = self._accepted_from(message.receipt, message)
        if known is not None:
            self._accepted[message.message_id] = known
        return known

    def _accepted_from(self, receipt: str | None, message: OutgoingMessage) -> _Accepted | None:
        """The accepted update an ``ym-accepted:`` ``receipt`` names, as ``message``'s, its
        age counted from the time it names; None for any other receipt."""
        read = _from_receipt(receipt)
        if read is None:
            return None
        offer, fields, at, versions, settles = read
        now = self._now()
        age = max(0.0, (now - at).total_seconds())
        return _Accepted(
            offer,
            fields,
            self._monotonic() - age,
            versions=versions,
            sku=_sku(message),
            refused=_refusal(receipt),
            then=_then(receipt),
            settles_at=(
                None if settles is None else self._monotonic() + (settles - now).total_seconds()
            ),
            receipt=receipt,
        )

    def _with_accepted_all(
        self,
        items: list[shared.Item],
        answers_: dict[str, Classification],
        holders: Mapping[str, list[str]] | None = None,
    ) -> list[_Item]:
        """The items as sent (``_with_accepted``); one that breaks Yandex's rules only with a
        price accepted and not shown yet is ``invalid-for-channel``, as with a known one, and
        so is one whose offer the channel gave another SKU (``holders``, the database: any
        worker, before a restart too; this process's own claims besides: ``OneSkuAGood``)."""
        out: list[_Item] = []
        for item in items:
            sent = self._with_accepted(item)
            # Claimed at once, before sending: a batch sent meanwhile sees it (review 32e).
            other = self.one_sku.keeper(sent.offer, sent.sku, holders or {})
            if other != sent.sku:
                answers_.update(shared.spread(item, shared.invalid(_one_offer(sent, other))))
                continue
            broken = _rule_broken(sent)
            if broken is None:
                out.append(sent)
            else:
                answers_.update(shared.spread(item, shared.invalid(broken)))
        return out

    def _with_accepted(self, item: shared.Item) -> _Item:
        """The item as sent: a field this batch does not set takes the price Yandex accepted
        for the offer and may not show yet (its delivery waits for its read-back, not in
        flight, so the known prices do not hold it), never left out (an update without
        ``discountBase`` or ``minimumForBestseller`` drops it, §3.6.2, and this one lands
        after the accepted one), and never older than the known one: an accepted update
        whose message was since superseded, or whose price another worker delivered newer,
        stays in memory a while (``_forget_old``) and must not bring its price back."""
        offer = offer_id(item.offer_id)
        fields = dict(item.prices)
        versions = dict(item.versions)
        accepted = [
            a for a in self._accepted.values() if a.offer == offer and a.sku in (item.sku, None)
        ]
        for name in sorted({n for a in accepted for n in a.fields} - item.new):
            best = max(
                (a for a in accepted if name in a.fields),
                key=lambda a: (a.versions.get(name, 0), a.accepted_at),
            )
            version = best.versions.get(name)
            if version is not None and version == versions.get(name) and name in fields:
                # The very version the item carries as known: 1C's own amount, never what
                # went for it then (review yrace39 R3: 1C's discountBase 1000 beside the value
                # 1000 went as no discount, ``_no_discount``; 1C's value 800 then went with
                # that "no discount" in place of 1000, a 20 % discount 1C states, and both
                # were delivered while Yandex showed 800 without it).
                continue
            if version is None or version >= versions.get(name, 0):
                fields[name] = best.fields[name]
                if version is not None:
                    versions[name] = version
        return _Item(
            offer,
            item.sku,
            _no_discount(fields),
            list(item.carried),
            versions,
            dict(item.fields_of),
        )

    async def health(self) -> Classification:
        """A read of one offer's price (no effect): the key is accepted. The read names its
        offer (``HEALTH_OFFER``; one Yandex does not know is left out of the answer, §3.4):
        without ``offerIds`` the method's answer is a page of the whole catalogue, and a
        simulator written from the research refused it (review 32: the probe's 400 kept the
        breaker open for good)."""
        try:
            await self._call("offer-prices", {"offerIds": [HEALTH_OFFER]}, cost=1)
        except _Whole as whole:
            return whole.classification
        return Classification(Verdict.DELIVERED, "HTTP 200", http_status=200)

    def reload_credentials(self) -> bool:
        before, self._key = self._key, self._key_source()
        return self._key != before

    async def aclose(self) -> None:
        await self._http.aclose()

    async def offers_found(self, skus: Sequence[str]) -> set[str] | Classification:
        """Of ``skus``, those whose offer (the SKU, or its article under ``sku_source =
        article``) Yandex lists among the cabinet's offers (``exchange check``), read with no
        effect; the answer that refused the read otherwise."""
        shown = await self.offers_shown(skus)
        return shown if isinstance(shown, Classification) else set(shown)

    async def offers_shown(self, skus: Sequence[str]) -> dict[str, frozenset[str]] | Classification:
        """``offers_found`` with the price fields Yandex shows for each (``value``,
        ``discountBase``, ``minimumForBestseller``): ``exchange check`` names those the
        channel does not map, which the first update erases (§3.6.2)."""
        prices = [MappedPrice(sku, Decimal(0), "", "") for sku in skus]
        try:
            offers = await self._offers(prices)
            shown = await self._read_back(sorted({o for o in offers.values() if o}))
        except _Whole as whole:
            return whole.classification
        return {
            sku: frozenset(k for k, v in shown[offer].shown.items() if v)
            for sku, offer in offers.items()
            if offer in shown
        }

    # -- reading prices back (exchange verify) ---------------------------------------------

    async def read_prices(self, messages: Sequence[OutgoingMessage]) -> list[HeldPrice]:
        read = [(m, self._read(m)) for m in messages]
        try:
            offers = await self._offers(p for _, p in read)
            shown = await self._read_back(sorted(set(offers.values())))
        except _Whole as whole:
            raise ReadBackFailed(whole.classification.detail) from None
        held: list[HeldPrice] = []
        for message, p in read:
            if not isinstance(p, MappedPrice):
                held.append(HeldPrice(message.message_id, "", "", None, None, unreadable=p.detail))
                continue
            offer = offers.get(p.sku)
            seen = shown.get(offer) if offer is not None else None
            held.append(
                HeldPrice(
                    message.message_id,
                    p.sku,
                    p.mapped,
                    p.amount,
                    _held(seen, p),
                    found=seen is not None and seen.found,
                    unreadable=None if offer is not None else "the SKU has no article (sku_source)",
                )
            )
        return held

    # -- withheld prices (contract 13) -----------------------------------------------------

    async def withheld_shown(self, messages: Sequence[OutgoingMessage]) -> list[Shown]:
        """LIVE when the read-back shows the message's price and Yandex no longer lists the
        offer in its quarantine; WITHHELD while it lists the price the delivery carried;
        UNKNOWN otherwise (another price of the offer listed: a later update's, say). The
        worker's recheck asks it between its sends: a read waits for its budget (a 420's
        Until) ``LONGEST_WAIT`` at most, as a send's do; held longer, all is UNKNOWN (looked
        at again at the next recheck), never a worker held for minutes."""
        read = [(m, self._read(m)) for m in messages]
        patience = _PATIENCE.set(LONGEST_WAIT)
        try:
            offers = await self._offers(p for _, p in read)
            wanted = sorted(set(offers.values()))
            shown = await self._read_back(wanted)
            listed = await self._quarantined(wanted)
        except _Whole:
            return [Shown.UNKNOWN for _ in messages]
        finally:
            _PATIENCE.reset(patience)
        out: list[Shown] = []
        for m, p in read:
            offer = offers.get(p.sku) if isinstance(p, MappedPrice) else None
            if not isinstance(p, MappedPrice) or offer is None:
                out.append(Shown.UNKNOWN)
                continue
            seen = shown.get(offer)
            entry = listed.get(offer)
            if entry is not None:
                sent = _sent_value(m, p)
                out.append(Shown.WITHHELD if entry.holds(sent) else Shown.UNKNOWN)
            elif seen is not None and _held(seen, p) == p.amount:
                # An old price of 0 (no discount) or a minimum of 0 is live as none shown.
                out.append(Shown.LIVE)
            else:
                out.append(Shown.UNKNOWN)
        return out

    def accepted_unshown(self, receipt: str | None) -> bool:
        """A delivery Yandex accepted with a 200 and not read back as shown yet (``ACCEPTED``):
        its price quarantine may be holding it, listed a little later (``HoldsAfterAccepting``,
        words38 item 6)."""
        return bool(receipt) and str(receipt).startswith(ACCEPTED)

    async def release_withheld(self, messages: Sequence[OutgoingMessage]) -> list[Release]:
        """``POST …/price-quarantine/confirm`` for the offers whose withheld price is the one
        the message's delivery carried (contract 13), 200 a request; the price then shows
        within minutes and the delivery ends delivered on the read-back. Yandex confirms the
        price it lists, whatever update asked: an offer listed at another price (an earlier
        update's, still listed while this one waits to be applied) is never confirmed, the
        release refused in one line saying what Yandex withholds."""
        read = [(m, self._read(m)) for m in messages]
        try:
            offers = await self._offers(p for _, p in read)
        except _Whole as whole:
            return [Release(False, whole.classification.detail) for _ in messages]
        wanted = list(dict.fromkeys(offers.values()))
        said: dict[str, Release] = {}
        try:
            listed = await self._quarantined(sorted(wanted))
            unlisted = sorted(o for o in wanted if o not in listed)
            shown = await self._read_back(unlisted) if unlisted else {}
        except _Whole as whole:
            return [Release(False, f"Yandex Market: {whole.classification.detail}") for _ in read]
        # Each message's own answer where Yandex withholds another price than its delivery's.
        mismatch: dict[str, Release] = {}
        confirmable: set[str] = set()
        for m, p in read:
            offer = offers.get(p.sku) if isinstance(p, MappedPrice) else None
            entry = listed.get(offer) if offer is not None else None
            if offer is None or entry is None or not isinstance(p, MappedPrice):
                continue
            sent = _sent_value(m, p)
            if sent is not None and entry.value is not None and entry.value == sent:
                confirmable.add(offer)
            else:
                mismatch[m.message_id] = _other_withheld(offer, entry, sent)
        # An offer Yandex no longer withholds has nothing to confirm: what it shows is said
        # per message below (its price live, or a later update's in its place).
        wanted = [o for o in wanted if o in confirmable]
        start = 0
        while start < len(wanted):
            part = wanted[start : start + min(MAX_CONFIRM, self.per_read)]
            start += len(part)
            try:
                await self._call("price-quarantine/confirm", {"offerIds": part}, cost=len(part))
            except _TooBig:  # per_read is below len(part) now (``_lower``): confirmed, cut
                start -= len(part)
                continue
            except _Whole as whole:
                refused = Release(False, f"Yandex Market: {whole.classification.detail}")
                said.update((offer, refused) for offer in part)
                continue
            agreed = Release(
                True,
                "Yandex Market confirmed the price (price-quarantine/confirm): it shows within "
                "minutes, and the delivery ends delivered when the read-back shows it",
            )
            said.update((offer, agreed) for offer in part)
        out: list[Release] = []
        for m, p in read:
            offer = offers.get(p.sku) if isinstance(p, MappedPrice) else None
            if offer is None:
                why = p.detail if isinstance(p, Classification) else "the SKU has no article"
                out.append(Release(False, f"not a price this channel sent: {why}"))
            elif m.message_id in mismatch:
                out.append(mismatch[m.message_id])
            elif offer in said or not isinstance(p, MappedPrice):
                out.append(said[offer])
            else:
                out.append(_not_withheld(offer, p, shown.get(offer)))
        return out

    # -- items -----------------------------------------------------------------------------

    def _read(self, message: OutgoingMessage) -> MappedPrice | Classification:
        """A delivered message's price as this channel sent it (its field), for the reads."""
        return read_price(
            message, target="yandex-market", mapping=self.price_types, setting="ym_price_types"
        )

    async def _offers(self, prices: Iterable[MappedPrice | Classification]) -> dict[str, str]:
        """Each SKU's offerId: the SKU, or its article (``sku_source = article``), trimmed."""
        skus = sorted({p.sku for p in prices if isinstance(p, MappedPrice)})
        if self.channel.sku_source != "article":
            return {sku: offer_id(sku) for sku in skus}
        try:
            found = await asyncio.to_thread(self.articles.of, skus)
        except Exception as exc:  # the service's database
            raise _Whole(
                Classification(
                    Verdict.UNKNOWN, f"the articles could not be read: {type(exc).__name__}"
                )
            ) from None
        return {sku: offer_id(article) for sku, article in found.items()}

    # -- the update ------------------------------------------------------------------------

    async def _update(
        self,
        items: list[_Item],
        splits: list[int] | None = None,
        *,
        went: bool = False,
        refused_before: bool = False,
    ) -> dict[str, Classification]:
        """Send the items; a 400 naming offers ends those and sends the rest again. A 400 is
        most likely all-or-nothing (research §3.4, open in §8), and a price sent twice is most
        likely answered 200 (§3.5): so an offer a 400 names, in the first answer or only when
        the rest is sent again (a 400 may name its first bad offer only), was never taken and
        is terminal at once, unless the read-back shows it as sent (Yandex holds it already,
        e.g. a repeat refused after a first 400 that applied the rest). Review 32: an offer
        named only on the resend waited for its read-back the whole ym_apply_timeout.
        ``went``: the items are parts of a request that left and was refused (a 420 naming a
        smaller budget): their ``ym-sent:`` marks stay even if a part is not sent now.

        ``refused_before``: each item was in an earlier 400 that did not name it (a half of a
        request refused naming none, or the rest of one refused naming others). Whether a 400
        applies the rest of its request is open (§8): if it does, Yandex took those items
        then, and a repeat of a price taken may be refused (§3.5 open too). So an item
        refused after that in words not about the offer as sent (``answers.maybe_taken``), or
        in words that say its price is already set, is read back as an accepted one is, never
        ended at once (review ym400: prices Yandex held were quarantined http-400, and a later
        update of another price type brought the older price back)."""
        out: dict[str, Classification] = {}
        splits = [SPLITS] if splits is None else splits  # shared by the halves (``_Unnamed``)
        if len(items) > self.per_request:  # cut to Yandex's limit (``_TooBig``)
            for start in range(0, len(items), self.per_request):
                part = items[start : start + self.per_request]
                out.update(
                    await self._update(part, splits, went=went, refused_before=refused_before)
                )
            return out
        left = items
        for round_ in range(RESENDS):
            chain = refused_before or round_ > 0  # ``left`` was in a 400 that did not name it
            if not left:
                break
            unmarked, others = await self._mark_sent(left)
            if unmarked is not None:
                out.update((m.message_id, unmarked) for i in left for m in i.carried)
                return out
            if others:
                # Another SKU of the offer was sent meanwhile by a worker that read the holders
                # before this one's claim was in: this one never goes (issue 32).
                for item in left:
                    other = next(
                        (others[m.message_id] for m in item.carried if m.message_id in others), None
                    )
                    if other is not None:
                        self.one_sku.lost(item.offer, other)
                        said = shared.invalid(_one_offer(item, other))
                        out.update((m.message_id, said) for m in item.carried)
                left = [i for i in left if all(m.message_id not in others for m in i.carried)]
                if not left:
                    return out
            offers = [i.offer for i in left]
            try:
                await self._call(
                    "offer-prices/updates",
                    {"offers": [i.json(self.currency_id) for i in left]},
                    cost=len(left),
                    rejects=offers,
                )
            except _TooBig:  # per_request is below len(left) now: cut, each part sent
                # (the refused request went: its ``ym-sent:`` marks stay, ``went``)
                out.update(await self._update(left, splits, went=True, refused_before=chain))
                return out
            except _Unnamed as unnamed:
                # A 400 naming no offer (research §3.4: validation errors name the offending
                # offerId; this one does not): halves sent apart find the offers it refused,
                # the others go (sent twice at worst: most likely 200, §3.5), bounded by
                # SPLITS; an offer refused alone, or past the bound, ends with its words.
                # After an earlier 400 (``chain``), Yandex may hold some already (a 400 that
                # took the rest, §8): the read-back says which, and only the rest is halved.
                if chain and len(left) > 1:
                    held, left = await self._held_already(left, unnamed.classification.detail)
                    out.update(held)
                    if not left:
                        return out
                if len(left) > 1 and splits[0] >= 2:
                    splits[0] -= 2
                    half = len(left) // 2
                    out.update(await self._update(left[:half], splits, refused_before=True))
                    out.update(await self._update(left[half:], splits, refused_before=True))
                    return out
                words = unnamed.classification.detail
                if len(left) == 1 and _value_alone(left[0]) is not None:
                    tried = await self._value_alone(left[0], words, chain)
                    if tried is not None:
                        out.update(tried)
                        return out
                out.update(
                    await self._refused(
                        left, {i.offer: words for i in left}, refused_before=chain, unnamed=True
                    )
                )
                return out
            except _Whole as whole:
                out.update(self._unanswered(left, whole.classification))
                if whole.unsent and not went:
                    await self._unsent(left)
                return out
            except _Rejected as rejected:
                named = [i for i in left if i.offer in rejected.named]
                out.update(
                    await self._refused(named, rejected.named, rejected.rules, refused_before=chain)
                )
                left = [i for i in left if i.offer not in rejected.named]
                continue
            out.update(await self._took(left, "HTTP 200"))
            return out
        if len(left) > 1 and splits[0] >= 2:
            # Each 400 named other offers (one at a time, say: research §3.4 does not promise
            # every bad offer is named): halves sent apart, within the same SPLITS bound, so
            # the good offers go and the bad ones are named (review 32e: 500 offers, 5 bad,
            # all 500 quarantined after three rounds).
            splits[0] -= 2
            half = len(left) // 2
            out.update(await self._update(left[:half], splits, refused_before=True))
            out.update(await self._update(left[half:], splits, refused_before=True))
            return out
        # Each of the RESENDS 400s left these unnamed: any may have taken them (§8).
        words = (
            f"HTTP 400: Yandex Market refused the request {RESENDS} times, each naming other offers"
        )
        out.update(
            await self._refused(
                left, {i.offer: words for i in left}, refused_before=True, unnamed=True
            )
        )
        return out

    async def _value_alone(
        self, item: _Item, words: str, chain: bool
    ) -> dict[str, Classification] | None:
        """One offer a 400 naming nothing refused (``_Unnamed``, down to it) that carries a new
        dependent price (``discountBase``) beside its new value: which of them broke a rule is
        not said, so the value goes alone, as it goes after a 400 that names the discount
        (``shared.spread_rule``; docs/marketplaces.md: a rule of two price types quarantines
        only the one that broke it). Accepted alone: only the dependent price is quarantined,
        ``channel-rule`` with Yandex's words. Refused alone too: None, the item ends as any
        refused offer does (``_refused``). Neither (a 420, a 5xx, no answer): every price of
        the item takes the value's answer, and the item goes whole again. After an earlier
        400 (``chain``) that may have taken the item (§8), the read-back says so first."""
        if chain:
            held, rest = await self._held_already([item], words)
            if not rest:
                return held
        alone = _value_alone(item)
        assert alone is not None
        tried = await self._update([alone], [0])
        said = [tried[m.message_id] for m in alone.carried]
        alone_ids = {m.message_id for m in alone.carried}
        if all(c.verdict in (Verdict.AWAITING, Verdict.DELIVERED) for c in said):
            rule = answers.refused_by_rule(item.offer, words.removeprefix("HTTP 400: "))
            tried.update(
                (m.message_id, rule) for m in item.carried if m.message_id not in alone_ids
            )
            return tried
        if all(c.verdict is Verdict.TERMINAL and c.http_status == 400 for c in said):
            return None
        tried.update((m.message_id, said[0]) for m in item.carried if m.message_id not in alone_ids)
        return tried

    async def _mark_sent(self, items: list[_Item]) -> tuple[Classification | None, dict[str, str]]:
        """Before the update leaves, each item's deliveries keep ``ym-sent:`` and the item, in
        the database (``EarlierSends.sending``): a worker killed before Yandex's answer
        leaves its send counted by the next one (``_unsettled``), even once a newer version
        superseded the delivery. None when written; the items' verdict, not sent, when the
        database cannot take it (a send it could not count is never made). Written one offer
        at a time across workers (``EarlierSends.sending_first``): the messages of an item
        whose offer another SKU was sent to meanwhile are not marked, returned with that SKU
        (they are not sent)."""
        at = self._now()
        receipts = {
            m.message_id: _receipt(item.offer, item.fields, at, item.versions, prefix=SENT)
            for item in items
            for m in item.carried
        }
        goods = {m.message_id: (item.offer, item.sku) for item in items for m in item.carried}
        try:
            others = await asyncio.to_thread(
                self.earlier.sending_first,
                receipts,
                goods,
                self.one_sku.prefixes,
                by_article=self.channel.sku_source == "article",
            )
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: the send could not be recorded before it left (%s): not sent",
                type(exc).__name__,
            )
            return Classification(
                Verdict.TEMPORARY,
                f"the send could not be recorded before it left ({type(exc).__name__}): not "
                "sent, sent again later",
                error_class="SendNotRecorded",
            ), {}
        return None, others

    async def _not_taken(self, items: list[_Item]) -> None:
        """Items a 400 refused (never taken, §3.4): the ``ym-sent:`` written before they left
        is replaced (``REFUSED``), so they neither hold back a later update's read-back nor
        hold the offer for their SKU. Best effort: left as it is, it only errs on the side of
        waiting."""
        receipts = {m.message_id: REFUSED for item in items for m in item.carried}
        if not receipts:
            return
        try:
            await asyncio.to_thread(self.earlier.sending, receipts)
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: a refused send could not be recorded (%s)", type(exc).__name__
            )

    async def _unsent(self, items: list[_Item]) -> None:
        """Items whose request never left (``_Whole.unsent``: no key, or no connection made
        before any answer): the ``ym-sent:`` written before they were to leave gives way to
        the receipt the delivery had before (``UNSENT`` when none), so it holds back neither a
        later update's read-back (``_unsettled``) nor the known prices (issue 32).

        Which ``ym-sent:`` marks may be dropped, decided here: only those of a request that
        provably never left, or that a 400 refused (``_not_taken``). Any request that left may
        still land (§3.4: accepted is not applied; §3.5: no order promised), whatever becomes
        of its delivery afterwards (paused, superseded, quarantined, released), so its mark
        keeps counting until ``ym_apply_timeout`` has passed since it (``_unsettled``): a
        timeout, a 5xx, a 420 after the request left (the research does not say a 420 was not
        taken), a 401/403 answer, a worker killed or cancelled after the mark. The receipt
        before is put back, not cleared: an earlier attempt's ``ym-sent:`` (its answer never
        came) or ``ym-not-applied`` (accepted, not shown in time) may still land. Best effort:
        left as it is, a mark only errs on the side of waiting."""
        receipts = {m.message_id: m.receipt or UNSENT for item in items for m in item.carried}
        if not receipts:
            return
        try:
            await asyncio.to_thread(self.earlier.sending, receipts)
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: a send that never left could not be recorded (%s)",
                type(exc).__name__,
            )

    def _lower(self, limit: int, budget: OfferBudget) -> None:
        """Yandex's budget is ``limit`` offers a minute, below ours: requests of at most that
        many from now on, and the budget kept to it (pace.py). ``budget``: the method's (a
        resource a method, §3.3): the updates', or a read's (the read-back, the quarantine
        list, the confirm: requests of ``per_read``)."""
        reads = budget is not self.budget
        if reads:
            # A read of more offers than the minute holds is refused every time (review
            # revmp2: 90 offers read at 30 a minute, every delivery left waiting for good).
            self._most_per_read = max(1, min(self._most_per_read, limit))
            budget.lower(limit, self._most_per_read)
        else:
            self._most_per_request = max(1, min(self._most_per_request, limit))
            self.budget.lower(limit, self._most_per_request)
        self._fit()
        log.warning(
            "Yandex Market allows %d offers a minute (X-RateLimit-Resource-Limit), fewer than "
            "ym_offers_per_minute: at most %d offers a request from now on (%s)",
            limit,
            self.per_read if reads else self.per_request,
            "a read" if reads else "offer-prices/updates",
        )

    def _follow(self, limit: int | None, budget: OfferBudget) -> None:
        """Yandex's named limit as learned (pace.py ``learned_limit``): ``limit`` offers a
        minute from now on (None: ``ym_offers_per_minute``), higher or lower than before, and
        requests of at most that many (as ``_lower``; a raised limit lets them grow back, up to
        what they were at the start)."""
        before = budget.account
        if budget is self.budget:
            budget.follow(limit, self.per_request)
            self._most_per_request = max(1, min(self._first_per_request, budget.account))
        else:
            budget.follow(limit, self.per_read)
            reads = (self.read_budget, self.quarantine_budget, self.confirm_budget)
            least = min(b.account for b in reads)
            self._most_per_read = max(1, min(self._first_per_read, least))
        self._fit()  # the requests and every budget's window kept to the limit now
        if budget.account != before:
            log.warning(
                "Yandex Market allows %d offers a minute (X-RateLimit-Resource-Limit%s): %s "
                "from %d (%s)",
                budget.account,
                "" if limit is not None else ", ym_offers_per_minute",
                "raised" if budget.account > before else "lowered",
                before,
                "offer-prices/updates" if budget is self.budget else "a read",
            )

    async def _limit_heard(self, method: str, budget: OfferBudget, heard: int | None) -> None:
        """An answer named ``heard`` (``X-RateLimit-Resource-Limit``, §3.3: every answer, the
        cabinet's limit now): a limit learned before follows it both ways (pace.py
        ``learned_limit``), here and in the business's row, which every worker follows before
        its next request of the method (``_spent_heard``): a cabinet allowed more (Yandex
        raises limits with the seller's tier) is sent more without a restart or any SQL."""
        kept = budget.learned
        new = learned_limit(kept, heard, budget.configured)
        if new == kept:
            return
        self._follow(new, budget)
        hold = self._spent[method]
        if hold is NO_SHARED_HOLD:
            return
        was, note = (None if kept is None else str(kept)), (None if new is None else str(new))
        try:
            if await asyncio.to_thread(hold.renote, was, note):
                self._noted[method] = note
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: a changed limit could not be told to the other workers (%s)",
                type(exc).__name__,
            )

    def _unanswered(self, items: list[_Item], said: Classification) -> dict[str, Classification]:
        """An answer that decides every offer of the request and is no 200. One that may have
        been taken (no answer after the request left, a 5xx, Yandex's 499) keeps what was
        sent in the receipt (``ym-sent:``): until ``ym_apply_timeout`` has passed, it may land
        after a later update of the offer (§3.5: no order promised), so that update's read-back
        counts only then, whichever worker sends it (``_unsettled``)."""
        status = said.http_status
        maybe_taken = said.result_unknown or (
            status is not None and (status == 499 or status >= 500)
        )
        out: dict[str, Classification] = {}
        at = self._now()
        for item in items:
            verdict = said
            if maybe_taken and said.verdict is not Verdict.PAUSE:
                receipt = _receipt(item.offer, item.fields, at, item.versions, prefix=SENT)
                verdict = replace(said, receipt=receipt)
            out.update((m.message_id, verdict) for m in item.carried)
        return out

    async def _unsettled(
        self, items: list[_Item], at: datetime
    ) -> dict[str, list[dict[str, Decimal]]]:
        """The SKUs of ``items`` with an earlier update on the channel that may still land
        (``EarlierSends``, the database: another worker's, or this one's before a restart or
        a client timeout), sent within ``ym_apply_timeout`` before ``at`` and not this item's
        fields (the same fields show the same whichever lands last). What cannot be read is
        taken as unsettled: a read-back then counts only once ``ym_apply_timeout`` passed. By
        SKU: the fields of those earlier updates the receipts name (none where unknown)."""
        since = at - timedelta(seconds=self.apply_timeout)
        carried = sorted({m.message_id for item in items for m in item.carried})
        skus = sorted({item.sku for item in items})
        try:
            found = await asyncio.to_thread(
                self.earlier.unsettled_since, skus, since, (ACCEPTED, SENT, NOT_APPLIED), carried
            )
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: the earlier updates could not be read (%s): each read-back "
                "counts once ym_apply_timeout has passed",
                type(exc).__name__,
            )
            return {sku: [] for sku in skus}
        out: dict[str, list[dict[str, Decimal]]] = {}
        for item in items:
            for receipt in found.get(item.sku, []):
                sent = _from_receipt(receipt, SENT) or _from_receipt(receipt)
                if sent is None:  # in flight at a crash, or not applied in time: unknown
                    out.setdefault(item.sku, [])
                    continue
                offer, fields, sent_at, _, _ = sent
                if sent_at < since:
                    continue  # landed by now, or never will (``ym_apply_timeout``)
                if offer != item.offer or fields != item.fields:
                    out.setdefault(item.sku, []).append(dict(fields))
        return out

    async def _took(
        self, taken: list[_Item], why: str, refused: Mapping[str, str] | None = None
    ) -> dict[str, Classification]:
        """Items Yandex took (or may have): each waits for its read-back (``AWAITING``).
        ``refused``: offer -> the words of a 400 that refused it while it may be Yandex's all
        the same (``answers.maybe_taken``): read back the same way, and terminal with those
        words when not shown within ``ym_apply_timeout`` (``_Accepted.refused``)."""
        refused = refused or {}
        out: dict[str, Classification] = {}
        now = self._monotonic()
        wait = self._wait(0)
        at = self._now()
        unsettled = await self._unsettled(taken, at)
        for item in taken:
            # An update accepted earlier for the offer is shown as this one once this one lands:
            # this one carries its prices (``_with_accepted``) and replaces it whole (§3.6.2).
            # An earlier one the database knows of (another worker's, one whose answer never
            # came) may land after this one (§3.5): the read-back cannot tell 1C's 100, 120, 100
            # apart until ``ym_apply_timeout`` has passed.
            settles_at: float | None = now + self.apply_timeout if item.sku in unsettled else None
            words = refused.get(item.offer)
            before = list(unsettled.get(item.sku, []))
            for earlier in self._accepted.values():
                if earlier.offer == item.offer and earlier.sku == item.sku:
                    if earlier.fields != item.fields:
                        settles_at = now + self.apply_timeout
                        before.append(dict(earlier.fields))
                    if words is None:  # taken for sure: it replaces the earlier whole
                        earlier.fields = dict(item.fields)
                        earlier.versions = dict(item.versions)
                        earlier.refused = None
            # The settling moment survives a restart in the receipt (review 32e).
            settles = None if settles_at is None else at + timedelta(seconds=self.apply_timeout)
            receipt = _receipt(
                item.offer, item.fields, at, item.versions, settles, refused=words, then=item.then
            )
            for m in item.carried:
                self._not_applied.pop(m.message_id, None)
                self._accepted[m.message_id] = _Accepted(
                    item.offer,
                    dict(item.fields),
                    now,
                    versions=dict(item.versions),
                    sku=item.sku,
                    settles_at=settles_at,
                    refused=words,
                    receipt=receipt,
                    earlier=[f for f in before if f != item.fields],
                    then=item.then,
                )
                if words is None:
                    said = f"{why}: Yandex Market accepted offer {item.offer!r}"
                else:
                    said = (
                        f"HTTP 400 ({words}), yet Yandex Market may hold offer {item.offer!r} "
                        "as sent (an earlier 400 may have taken it, or its price is already "
                        "set)"
                    )
                taken_ = _accepted(f"{said}; read back in {shared.seconds_said(wait)} s", wait)
                taken_.receipt = receipt
                out[m.message_id] = taken_
        return out

    async def _refused(
        self,
        named: list[_Item],
        said: dict[str, str],
        rules: Mapping[str, frozenset[str]] | None = None,
        *,
        refused_before: bool = False,
        unnamed: bool = False,
    ) -> dict[str, Classification]:
        """Offers a 400 refused (``said``: offer -> Yandex's words; ``unnamed``: the words are
        the whole answer's, naming no offer): terminal with Yandex's words, unless the
        read-back shows each field as sent (a price already set, refused as a repeat:
        delivered), or the offer may be Yandex's all the same (``answers.maybe_taken``, with
        ``refused_before`` as ``_update`` says): then it waits for its read-back as an
        accepted one does (``_took``), delivered when shown, terminal with these words when
        not shown within ``ym_apply_timeout``. One refused as not in the catalogue
        (``OFFER_NOT_FOUND``) is ``unknown-sku`` (contract 14). One refused only for its
        discount (``rules``: the dependent fields Yandex's words concern, §3.1) is a price
        rule, ``channel-rule``, decided as the rule is before sending (issue 32): where the
        item carried a new discount base beside a new value, only the discount base takes it,
        and the value goes again without it, not charged (``shared.spread_rule``)."""
        rules = rules or {}
        offers = sorted({i.offer for i in named})
        # The list before the read-back (``_look_first``): a confirmation landing between
        # them never has a price called delivered while the held one is live.
        looked = await self._look_first(offers)
        try:
            shown = await self._read_back(offers)
        except _Whole:
            shown = {}
        waiting: dict[str, str] = {}
        in_force: list[_Item] = []
        other_shown: list[tuple[_Item, Decimal]] = []
        for item in named:
            seen = shown.get(item.offer)
            if seen is not None and _shows(seen, item.fields, self.price_types.values()):
                in_force.append(item)  # settled by the quarantine list (``_in_force``)
            elif (
                seen is not None
                and (other := seen.shown.get("value")) is not None
                and item.fields.get("value") is not None
                and answers.already_set(said[item.offer])
            ):
                other_shown.append((item, other))  # the read-back may show a withheld price
        out = self._in_force(in_force, said, looked, other_shown)
        if not refused_before:
            out.update(await self._held_changed(other_shown, said, out, looked))
        for item in named:
            words = said[item.offer]
            if item in in_force or all(m.message_id in out for m in item.carried):
                continue
            if item.offer in rules:
                rule = answers.refused_by_rule(item.offer, words)
                out.update(shared.spread_rule(item, self.channel, rule, rules[item.offer]))
                continue
            elif answers.maybe_taken(words, refused_before=refused_before):
                waiting[item.offer] = words.removeprefix("HTTP 400: ")
                continue
            else:
                verdict = Classification(
                    Verdict.TERMINAL,
                    words
                    if unnamed
                    else f"HTTP 400: Yandex Market refused offer {item.offer!r}: {words}",
                    http_status=400,
                    reason=Reason.UNKNOWN_SKU if answers.not_found(words) else None,
                )
            out.update((m.message_id, verdict) for m in item.carried)
        if waiting:
            out.update(
                await self._took([i for i in named if i.offer in waiting], "HTTP 400", waiting)
            )
        await self._not_taken(
            [
                i
                for i in named
                if i.offer not in waiting
                and not _shows(shown.get(i.offer), i.fields, self.price_types.values())
            ]
        )
        return out

    async def _held_changed(
        self,
        other_shown: Sequence[tuple[_Item, Decimal]],
        said: Mapping[str, str],
        decided: Mapping[str, Classification],
        looked: _Looked,
    ) -> dict[str, Classification]:
        """Of items refused "already set" whose read-back shows another value (``_refused``'s
        ``other_shown``) and that ``_in_force`` left undecided, those whose offer the
        quarantine list, read before the read-back (``_look_first``), does not list, while no
        earlier update of their SKU may still land (this worker's memory, ``EarlierSends``):
        Yandex compared this price with one it held when it refused, and the read-back shows
        that price changed since, so nothing Yandex holds or will apply carries this one. Each
        is sent again, uncharged (``AWAITING``, receipt ``HELD_CHANGED``: its next attempt
        sends), never read back for ``ym_apply_timeout`` and quarantined ``http-400``. The
        flake of the confirm test in CI's loaded runs (yfix40): 1C's 1000 waited behind the
        held 300; the look after the seller's confirmation sent 1000 while the confirmed 300
        was not applied yet, refused as a repeat of the live 1000; 300 went live before the
        list was read, the list was empty, the read-back showed 300, and 1000 was read back
        3 s and quarantined, Yandex left at 300. Once only: an item whose message was sent
        again so (its receipt) and is refused the same way is read back as before (the
        research does not say what Yandex compares a repeat with, §3.5)."""
        items = [
            (item, other)
            for item, other in other_shown
            if not any(m.message_id in decided for m in item.carried)
            and item.offer not in looked.listed
            and item.offer not in looked.unread
            and all(m.receipt != HELD_CHANGED for m in item.carried)
        ]
        if not items:
            return {}
        may_land = await self._may_land([item for item, _ in items])
        out: dict[str, Classification] = {}
        wait = self._wait(0)
        for item, other in items:
            carried = {m.message_id for m in item.carried}
            if item.sku in may_land or any(
                a.offer == item.offer and a.sku in (item.sku, None)
                for k, a in self._accepted.items()
                if k not in carried
            ):
                continue
            words = said[item.offer].removeprefix("HTTP 400: ")
            verdict = Classification(
                Verdict.AWAITING,
                f"HTTP 400 ({words}), yet Yandex Market's read-back shows value={number(other)} "
                f"for offer {item.offer!r}, its price quarantine lists nothing, and no earlier "
                "update of it may still land: the price Yandex held then changed since (a held "
                "price confirmed in the cabinet, say); sent again in "
                f"{shared.seconds_said(wait)} s",
                http_status=400,
                again_in=wait,
                receipt=HELD_CHANGED,
            )
            out.update((m.message_id, verdict) for m in item.carried)
        return out

    async def _may_land(self, items: list[_Item]) -> set[str]:
        """The SKUs of ``items`` with an earlier update on the channel that may still land
        (``EarlierSends``, any worker's, sent within ``ym_apply_timeout``), whatever its
        fields (``_unsettled`` leaves out those equal to the item's: here an equal one is the
        very one that may make a repeat "already set"). What cannot be read may land."""
        since = self._now() - timedelta(seconds=self.apply_timeout)
        skus = sorted({item.sku for item in items})
        carried = sorted({m.message_id for item in items for m in item.carried})
        try:
            found = await asyncio.to_thread(
                self.earlier.unsettled_since, skus, since, (ACCEPTED, SENT, NOT_APPLIED), carried
            )
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: the earlier updates could not be read (%s)", type(exc).__name__
            )
            return set(skus)
        out: set[str] = set()
        for sku, receipts in found.items():
            for receipt in receipts:
                sent = _from_receipt(receipt, SENT) or _from_receipt(receipt)
                if sent is None or sent[2] >= since:  # unknown, or sent within the timeout
                    out.add(sku)
        return out

    async def _held_already(
        self, items: list[_Item], words: str
    ) -> tuple[dict[str, Classification], list[_Item]]:
        """Of items a 400 naming none refused after an earlier 400 (which may have taken
        them, §8), those the read-back shows as sent are settled by the quarantine list, read
        before it (``_look_first``, ``_in_force``); the rest returned."""
        offers = sorted({i.offer for i in items})
        looked = await self._look_first(offers)
        try:
            shown = await self._read_back(offers)
        except _Whole:
            return {}, items
        mapped = self.price_types.values()
        held = [i for i in items if _shows(shown.get(i.offer), i.fields, mapped)]
        rest = [i for i in items if i not in held]
        return self._in_force(held, {i.offer: words for i in held}, looked), rest

    async def _look_first(self, offers: list[str]) -> _Looked:
        """Yandex's quarantine list for ``offers``, read before the read-back that
        ``_in_force`` judges beside it. Read after it, a seller's confirmation landing between
        the two (1C's 1000 live, 300 held, 1000 again refused "already set") left the read-back
        showing 1000 and the list empty: 1000 was called delivered while 300 went live. Read
        first, the list names 300 while it is held, and a confirmation landing after it shows
        300 in the read-back (then 1000 waits, ``other_shown``), never 1000 called delivered
        on a list read before 300 went live. A list that cannot be read decides nothing: the
        offers it missed are read again (``_in_force``)."""
        if not offers:
            return _Looked({})
        try:
            return _Looked(await self._quarantined(offers))
        except _Whole as whole:
            return _Looked(whole.listed, set(offers) - whole.listed_asked, whole.classification)

    def _in_force(
        self,
        items: list[_Item],
        said: Mapping[str, str],
        looked: _Looked,
        other_shown: Sequence[tuple[_Item, Decimal]] = (),
    ) -> dict[str, Classification]:
        """Items a 400 refused (``said``: offer -> its words) whose read-back shows each field
        as sent (a price already set, refused as a repeat: §3.5 leaves open whether Yandex
        refuses one, the simulator's ``repeat_price``). The read-back shows the last valid
        price while Yandex's quarantine withholds another (§3.4), so the quarantine list,
        ``looked``, read before the read-back (``_look_first``), settles them: listing nothing,
        the price is delivered; listing this price,
        withheld; listing another (1C's 1000 live, 300 withheld, 1000 again refused "already
        set": Yandex keeps 300 listed, which a seller's confirmation would put live over 1000,
        review ym34), this price waits, uncharged (``AWAITING``, a look every ``_look_every``
        seconds: sent again, as the receipt ``REFUSED`` says, at the cost of one offer of the
        minute), and the earlier version stays withheld, its row saying it
        is not to be confirmed (``ops.withheld_behind``); as Wildberries' ``_behind_quarantine``.
        A list that cannot be read: read again, never delivered on the read-back alone.

        ``other_shown``: items refused "already set" whose read-back shows another price (each
        with the value it shows). The research does not say whether the read-back of a
        withheld offer shows the price buyers see or the one withheld (the simulator's
        ``readback_quarantined=new``): where the list withholds another price and names this
        item's value as the last valid one, the item waits behind it as above (review rev35ym:
        never sent again as not applied, charged, until ``retry-limit``), its words saying
        what the read-back showed and that buyers see the last valid price until the held one
        is confirmed, never that Yandex held this price already (``answers.behind_words``);
        any other is left out of the answer, for the caller to decide."""
        if not items and not other_shown:
            return {}
        listed, unread, cannot = looked.listed, looked.unread, looked.cannot
        wait = float(max(1, math.ceil(self._look_every())))

        def read_again() -> Classification:
            assert cannot is not None
            if cannot.verdict is Verdict.PAUSE:
                return cannot
            return Classification(
                Verdict.AWAITING,
                f"the quarantine list could not be read ({cannot.detail}); read again",
                http_status=400,
                again_in=max(self._wait(0), cannot.again_in or 0.0),
                receipt=REFUSED,
            )

        def behind(item: _Item, entry: _Listed, shown: Decimal | None = None) -> Classification:
            value = item.fields.get("value")
            return Classification(
                Verdict.AWAITING,
                answers.behind_words(
                    item.offer,
                    number(value) if value is not None else "?",
                    entry.said(),
                    shown=number(shown) if shown is not None and shown != value else None,
                ),
                http_status=400,
                again_in=wait,
                receipt=REFUSED,
            )

        out: dict[str, Classification] = {}
        for item in items:
            words = said[item.offer].removeprefix("HTTP 400: ")
            entry = listed.get(item.offer)
            value = item.fields.get("value")
            if cannot is not None and item.offer in unread:
                verdict = read_again()
            elif entry is None:
                verdict = Classification(
                    Verdict.DELIVERED,
                    f"HTTP 400 ({words}), read back: offer {item.offer!r} holds the price as "
                    "sent already",
                    http_status=400,
                    receipt=item.offer,
                )
            elif entry.holds(value):
                verdict = Classification(
                    Verdict.WITHHELD,
                    f"Yandex Market took offer {item.offer!r} and withholds its price in its "
                    f"price quarantine ({entry.words}): release it with `exchange withheld "
                    "release`, or in the cabinet",
                    http_status=400,
                )
            else:
                verdict = behind(item, entry)
            out.update((m.message_id, verdict) for m in item.carried)
        for item, other in other_shown:
            entry = listed.get(item.offer)
            value = item.fields.get("value")
            if cannot is not None and item.offer in unread:
                verdict = read_again()
            elif (
                entry is not None
                and entry.value is not None
                and not entry.holds(value)
                and entry.last_valid == value
            ):
                verdict = behind(item, entry, other)
            else:
                continue
            out.update((m.message_id, verdict) for m in item.carried)
        return out

    def _wait(self, reads: int) -> float:
        """Seconds before the next read-back of an accepted item: ``ym_apply_timeout``/40, then
        doubling, at most ``ym_apply_timeout``/10."""
        return float(min(self.apply_timeout / 10, (self.apply_timeout / 40) * 2.0 ** min(reads, 8)))

    def _look_every(self) -> float:
        """Seconds between looks of a price that waits on Yandex or 1C rather than on its own
        read-back, one decision for them all: a rule's wait for another price of its SKU
        (``shared.gather``'s ``most``) and a wait behind a price Yandex's quarantine holds
        (``_in_force``), each at most as long as the longest wait between read-backs of an
        accepted price (``_wait``: ``ym_apply_timeout``/10, a minute at Yandex's ten). So a
        seller's confirmation of the held price in the cabinet is followed by 1C's newer price
        within a look (review: 300 was live 4 min 11 s while the wait behind the quarantine
        looked every 300 s). Within the budget: a look costs the waiting offer one offer of
        the updates' minute, of the list's and of the read-back's (10,000 each), and the pace
        holds whatever goes beyond, uncharged (``answers.budget_held``)."""
        return self._wait(8)

    def _read_again(self, a: _Accepted, whole: _Whole) -> float:
        """Seconds until an accepted item whose read ``whole`` stopped is read again: held by
        our own budget (it never went: ``READ_PATIENCE``), when the budget has room, not
        counted as a read; otherwise the next read's wait (``_wait``), at least until a
        420's hold ends."""
        again = whole.classification.again_in or 0.0
        if whole.held and again > 0:
            return again
        a.reads += 1
        return max(self._wait(a.reads), again)

    def _forget_old(self) -> None:
        """Items accepted long ago whose messages never came back (superseded, cancelled)."""
        limit = self._monotonic() - 2 * self.apply_timeout - 60
        for message_id in [k for k, a in self._accepted.items() if a.accepted_at < limit]:
            del self._accepted[message_id]

    # -- the read-back of accepted items ---------------------------------------------------

    async def _read_accepted(
        self, pending: list[tuple[OutgoingMessage, _Accepted]]
    ) -> dict[str, Classification]:
        out: dict[str, Classification] = {}
        offers = sorted({a.offer for _, a in pending})
        now = self._monotonic()
        try:
            shown = await self._read_back(offers)
        except _Whole as whole:
            # The offers of the parts read before (a budget of fewer offers a minute than
            # the read: review revmp2) are judged below; the others are read again later.
            shown = whole.read
            unread = [(m, a) for m, a in pending if a.offer not in whole.asked]
            pending = [(m, a) for m, a in pending if a.offer in whole.asked]
            for m, a in unread:
                # Held by the budget, or refused by Yandex's pace (a 420 after the waits): no
                # sign the update was not applied, read again (never charged, never sent).
                overdue = now - a.accepted_at >= self.apply_timeout and not whole.paced
                if whole.classification.verdict is Verdict.PAUSE or overdue:
                    self._accepted.pop(m.message_id, None)
                    said = whole.classification
                    if overdue and said.verdict is not Verdict.PAUSE:
                        said = replace(said, receipt=NOT_APPLIED)  # its next attempt sends
                    out[m.message_id] = said
                else:
                    # Held by our own budget, the read never went: nothing failed, it waits
                    # (seller review 35: "the read-back failed (held: …)").
                    why = (
                        f"the read-back waits for the per-minute budget "
                        f"({whole.classification.detail}); read then"
                        if whole.held
                        else f"the read-back failed ({whole.classification.detail}); read again"
                    )
                    out[m.message_id] = _accepted(why, self._read_again(a, whole))
            if not pending:
                return out
        # By message, never by offer: each is judged by what its own update carried.
        shown_as_sent = {
            m.message_id
            for m, a in pending
            if (seen := shown.get(a.offer)) is not None
            and _shows(seen, a.fields, self.price_types.values())
        }
        as_sent = {
            m.message_id
            for m, a in pending
            if m.message_id in shown_as_sent and (a.settles_at is None or now >= a.settles_at)
        }
        late = {m.message_id for m, a in pending if now - a.accepted_at >= self.apply_timeout}
        ask = sorted({a.offer for m, a in pending if m.message_id in as_sent | late})
        listed: dict[str, _Listed] = {}
        unlisted: set[str] = set()  # offers the quarantine list could not be read for
        cannot = ""
        unread_list: _Whole | None = None
        try:
            listed = await self._quarantined(ask) if ask else {}
        except _Whole as whole:
            # The parts listed before count (a list's budget below the offers asked: the
            # rest held), as the read-back's do; the others are read again later.
            listed = whole.listed
            unlisted = set(ask) - whole.listed_asked
            cannot = whole.classification.detail
            unread_list = whole
        for m, a in pending:
            seen = shown.get(a.offer)
            if (seen is None or not seen.found) and m.message_id not in late:
                # A new offer may be listed only once its first price is applied (§3.4: "до
                # нескольких минут"; what Yandex lists for an unknown offerId is unconfirmed).
                a.reads += 1
                wait = self._wait(a.reads)
                out[m.message_id] = _accepted(
                    f"Yandex Market does not list offer {a.offer!r} in its read-back yet; read "
                    f"back in {shared.seconds_said(wait)} s",
                    wait,
                )
                continue
            if seen is None or not seen.found:
                self._accepted.pop(m.message_id, None)
                took = (
                    f"Yandex Market accepted offer {a.offer!r}"
                    if a.refused is None
                    else f"HTTP 400: Yandex Market refused offer {a.offer!r} ({a.refused}),"
                )
                out[m.message_id] = Classification(
                    Verdict.TERMINAL,
                    f"{took} but its read-back (offer-prices) does not list it "
                    f"{self.apply_timeout:g} s later: no such offer in the cabinet's catalogue",
                    http_status=200 if a.refused is None else 400,
                    reason=Reason.UNKNOWN_SKU,
                    receipt=None if a.refused is None else REFUSED,
                )
                continue
            if m.message_id in as_sent or m.message_id in late:
                if a.offer in unlisted and unread_list is not None:
                    out[m.message_id] = _accepted(
                        f"the quarantine list could not be read ({cannot}); read again",
                        self._read_again(a, unread_list),
                    )
                    continue
                entry = listed.get(a.offer)
                if entry is not None and entry.holds(a.fields.get("value")):
                    self._accepted.pop(m.message_id, None)
                    out[m.message_id] = Classification(
                        Verdict.WITHHELD,
                        f"Yandex Market took offer {a.offer!r} and withholds its price in its "
                        f"price quarantine ({entry.words}): release it with `exchange withheld "
                        "release`, or in the cabinet",
                        http_status=200,
                    )
                    continue
                if entry is not None and m.message_id not in late:
                    # Another price of the offer is withheld (an earlier update's): this one
                    # is not applied yet, whatever the read-back shows (the last valid price
                    # may equal it). Applied, it leaves the quarantine or is listed itself.
                    a.reads += 1
                    wait = self._wait(a.reads)
                    out[m.message_id] = _accepted(
                        f"Yandex Market withholds another price of offer {a.offer!r} in its "
                        f"price quarantine, {entry.said()}, not this update's value="
                        f"{number(a.fields['value'])}, which it has not applied yet; read back "
                        f"in {shared.seconds_said(wait)} s",
                        wait,
                    )
                    continue
                if entry is not None:
                    self._accepted.pop(m.message_id, None)
                    self._not_applied[m.message_id] = a.receipt
                    out[m.message_id] = Classification(
                        Verdict.TEMPORARY,
                        f"Yandex Market accepted offer {a.offer!r} but {self.apply_timeout:g} s "
                        f"later still withholds another price of it in its price quarantine, "
                        f"{entry.said()}, not this update's value={number(a.fields['value'])}: "
                        "sent again",
                        http_status=200,
                        error_class="NotApplied",
                        receipt=NOT_APPLIED,
                        about_item=True,
                    )
                    continue
            if m.message_id in as_sent and a.then is not None:
                # A clearing of the dependent price 1C replaced, shown: the new one it
                # carried is quarantined (``_clears``).
                self._accepted.pop(m.message_id, None)
                out[m.message_id] = replace(a.then)
            elif m.message_id in as_sent:
                self._accepted.pop(m.message_id, None)
                out[m.message_id] = Classification(
                    Verdict.DELIVERED,
                    f"HTTP 200, read back: offer {a.offer!r} shows "
                    + ", ".join(f"{k}={number(v)}" for k, v in a.fields.items())
                    + (a.uncleared or ""),
                    http_status=200,
                    receipt=a.offer,
                )
            elif m.message_id in late and a.refused is not None:
                # Refused by a 400 and not Yandex's after all: it was never taken.
                self._accepted.pop(m.message_id, None)
                out[m.message_id] = Classification(
                    Verdict.TERMINAL,
                    f"HTTP 400: Yandex Market refused offer {a.offer!r}: {a.refused}; its "
                    f"read-back does not show the price {self.apply_timeout:g} s later either",
                    http_status=400,
                    receipt=REFUSED,
                )
            elif m.message_id in late:
                self._accepted.pop(m.message_id, None)
                self._not_applied[m.message_id] = a.receipt
                landed = _landed_late(seen, a)
                out[m.message_id] = Classification(
                    Verdict.TEMPORARY,
                    f"Yandex Market accepted offer {a.offer!r} but does not show the price "
                    f"{self.apply_timeout:g} s later, and does not list it in its price "
                    "quarantine: sent again"
                    if landed is None
                    else f"{landed}, {self.apply_timeout:g} s after Yandex Market accepted this "
                    "one: sent again",
                    http_status=200,
                    error_class="NotApplied",
                    receipt=NOT_APPLIED,
                    # Yandex answered every read well: this offer alone is late, never a sign
                    # the cabinet is down (no breaker, no health check, charged).
                    about_item=True,
                )
            elif m.message_id in shown_as_sent:
                a.reads += 1
                wait = self._wait(a.reads)
                out[m.message_id] = _accepted(
                    f"Yandex Market shows offer {a.offer!r} as sent, but an earlier update of it "
                    "was not shown yet when this one was accepted: it counts once "
                    f"ym_apply_timeout has passed; read back in {shared.seconds_said(wait)} s",
                    wait,
                )
            else:
                a.reads += 1
                wait = self._wait(a.reads)
                # before ym_apply_timeout the cause is not known yet: a rise Yandex's
                # quarantine holds reads the same until it is listed (words38 item 7)
                landed = _landed_late(seen, a, known=False)
                out[m.message_id] = _accepted(
                    f"Yandex Market does not show offer {a.offer!r}'s price yet; read back in "
                    f"{shared.seconds_said(wait)} s"
                    if landed is None
                    else f"{landed}; read back in {shared.seconds_said(wait)} s, sent again "
                    "if not shown within ym_apply_timeout",
                    wait,
                )
        return out

    async def _read_back(self, offers: list[str]) -> dict[str, _Read]:
        """``POST …/offer-prices`` for ``offers``, 200 a request, every page of each answer
        followed (``result.paging.nextPageToken``, as every paged Yandex method answers): each
        listed offer's price by Yandex field."""
        out: dict[str, _Read] = {}
        start = 0
        while start < len(offers):
            part = offers[start : start + self.per_read]
            token: str | None = None
            try:
                for _ in range(100):
                    query = f"page_token={token}" if token else ""
                    response = await self._call(
                        "offer-prices",
                        {"offerIds": part},
                        cost=len(part),
                        query=query,
                    )
                    self._read_page(response, out)
                    token = _next_page(response)
                    if token is None:
                        break
            except _TooBig:  # per_read is below len(part) now (``_lower``): read again, cut
                continue
            except _Whole as whole:  # the parts read so far count (the rest read again later)
                whole.asked = set(offers[:start])
                whole.read = {o: r for o, r in out.items() if o in whole.asked}
                raise
            start += len(part)
        return out

    @staticmethod
    def _read_page(response: httpx.Response, out: dict[str, _Read]) -> None:
        """One page of ``offer-prices``' answer into ``out``."""
        for entry in _result(response, "offers"):
            name = entry.get("offerId")
            if not isinstance(name, str):
                continue
            price = entry.get("price")
            shown: dict[str, Decimal] = {}
            if isinstance(price, dict):
                for key in FIELDS:
                    amount = _decimal(price.get(key))
                    if amount is not None:
                        shown[key] = amount
            out[offer_id(name)] = _Read(True, shown)

    async def _quarantined(self, offers: list[str]) -> dict[str, _Listed]:
        """The offers of ``offers`` Yandex lists in ``price-quarantine``, each with the price it
        withholds and its verdicts in words (§3.4)."""
        out: dict[str, _Listed] = {}
        start = 0
        while start < len(offers):
            part = offers[start : start + self.per_read]
            token: str | None = None
            try:
                for _ in range(100):
                    query = f"page_token={token}" if token else ""
                    response = await self._call(
                        "price-quarantine", {"offerIds": part}, cost=len(part), query=query
                    )
                    for entry in _result(response, "offers"):
                        name = entry.get("offerId")
                        if isinstance(name, str):
                            out[offer_id(name)] = _Listed(
                                _verdicts(entry),
                                _withheld_value(entry),
                                _withheld_value(entry, "lastValidPrice", "LAST_VALID_PRICE"),
                            )
                    token = _next_page(response)
                    if token is None:
                        break
            except _TooBig:  # per_read is below len(part) now (``_lower``): read again, cut
                continue
            except _Whole as whole:  # the parts listed so far count (the rest read again later)
                whole.listed_asked = set(offers[:start])
                whole.listed = {o: e for o, e in out.items() if o in whole.listed_asked}
                raise
            start += len(part)
        return out

    # -- the wire --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[_Place]:
        """One of the business's ``ym_parallel`` places (``SharedSlots``, every worker's
        requests together, §3.3), among the fewer a 420 for parallel requests lowered them to
        while that holds (``_take_place``), waited for while all are taken, given back when
        the request ends. A database that does not answer is looked at again as a taken
        place is (a busy SQLite under four workers once let a request go without one, a 420);
        unreadable past a place's whole lease, the request goes on this process's share
        (``Parallel``). A request cut off by our timeout may still be in flight at Yandex: its
        place stays taken ``PLACE_COOLING`` more (``_Place.cooling``)."""
        token: str | None = None
        place = _Place()
        if self.slots is not NO_SHARED_SLOTS:
            failing_since: float | None = None
            failures = 0
            while True:
                try:
                    token = await asyncio.to_thread(self._take_place)
                    failing_since, failures = None, 0
                except Exception:  # the service's database
                    now = self._monotonic()
                    failing_since = now if failing_since is None else failing_since
                    failures += 1
                    failing = max(now - failing_since, failures * SLOT_POLL)
                    if failing >= self._slot_lease:
                        break
                if token is not None:
                    break
                await asyncio.sleep(SLOT_POLL)
        try:
            yield place
        finally:
            if token is not None:
                with contextlib.suppress(Exception):  # left: it ends by itself
                    await asyncio.to_thread(self.slots.give, token, place.cooling)

    def _take_place(self) -> str | None:
        """A place among those in force (pace.py ``parallel_places``: ``ym_parallel``, or
        fewer while a lowering holds), the lowering renewed by this request when half its time
        has passed (``parallel_kept``). In a thread: the database's."""
        lowered, until = self.slots.lowered()
        now = self._now()
        renewed = parallel_kept(until, now)
        if renewed is not None:
            self.slots.keep(renewed)
        places = parallel_places(self.parallel.account, lowered, until, now)
        self._places = places
        return self.slots.take(self._slot_lease, places)

    async def _parallel_heard(self) -> None:
        """A 420 for parallel requests, heard while this request still holds its place: the
        business's places become fewer than were taken then, for every worker (pace.py
        ``parallel_heard``); this process's own share is lowered too (``Parallel.lower``),
        which alone never goes below one place a worker. Best effort: unwritten, the others
        hear it from Yandex themselves."""
        if self.slots is NO_SHARED_SLOTS:
            return

        def lower() -> int:
            lowered, until = self.slots.lowered()
            now = self._now()
            places = parallel_places(self.parallel.account, lowered, until, now)
            fewer = parallel_heard(places, self.slots.taken())
            self.slots.lower(fewer, now + timedelta(seconds=PARALLEL_KEPT))
            self._places = fewer
            return fewer

        try:
            fewer = await asyncio.to_thread(lower)
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: fewer parallel requests could not be told to the other workers "
                "(%s)",
                type(exc).__name__,
            )
            return
        log.warning(
            "Yandex Market refused a request for parallel requests: every worker of the "
            "business sends at most %d at once from now on",
            fewer,
        )

    async def _spend_told(self, method: str, until: datetime | None, limit: int | None) -> None:
        """Yandex said this method's budget is spent until ``until`` (a 420 for it, or
        ``X-RateLimit-Resource-Remaining`` 0): every worker of the business holds its
        requests of the method until then (``_spent_heard``), and divides ``limit`` among
        them (``X-RateLimit-Resource-Limit`` below a request's offers: this one's requests and
        budget were cut to it, ``_lower``). Best effort: unwritten, the others hear it from
        Yandex themselves."""
        hold = self._spent[method]
        if hold is NO_SHARED_HOLD or until is None:
            return
        moment = until + timedelta(seconds=self.past_until)
        if moment <= self._now() and limit is None:
            return
        try:
            await asyncio.to_thread(hold.hold, moment, None if limit is None else str(limit))
        except Exception as exc:  # the service's database
            log.warning(
                "Yandex Market: a spent budget could not be told to the other workers (%s)",
                type(exc).__name__,
            )

    async def _spent_heard(self, method: str, budget: OfferBudget) -> None:
        """The method's budget as another worker of the business heard it (``_spend_told``,
        ``_limit_heard``), read before each request: its hold kept here too (not charged:
        ``take`` hands the offers back when it is long), its budget a minute divided here
        too: a limit below this process's from the first read on, and a changed one either
        way (raised by another worker's answer, or none any more: ``ym_offers_per_minute``).
        An unchanged note leaves this process's own hearing as it is (its own lowering whose
        write failed stays)."""
        hold = self._spent[method]
        if hold is NO_SHARED_HOLD:
            return
        try:
            until, note = await asyncio.to_thread(hold.read)
        except Exception:  # the service's database: this process's own hearing stands
            return
        learned = int(note) if note is not None and note.isdigit() and int(note) > 0 else None
        changed = method in self._noted and note != self._noted[method]
        self._noted[method] = note
        if learned is not None and learned < budget.account:
            self._lower(learned, budget)
        elif changed and learned != budget.learned:
            self._follow(learned, budget)
        if until is not None:
            budget.held_elsewhere((until - self._now()).total_seconds())

    async def _left_told(self, method: str, remaining: int | None, until: datetime | None) -> None:
        """An answer's ``X-RateLimit-Resource-Remaining`` and ``-Until`` (§3.3), every
        worker's to take from (``_left_taken``), kept until ``past_until`` after the moment
        named, as a hold is (an RFC 822 date's whole seconds). Each worker learning only its
        own answers' count sent on a count another worker's later answer had already lowered:
        a 420 nearly every minute with three workers (the four-worker budget test, under
        load). Best effort: unwritten, the others hear it from Yandex themselves."""
        share = self._left[method]
        if share is NO_SHARED_LEFT or remaining is None or until is None:
            return
        moment = until + timedelta(seconds=self.past_until)
        if moment <= self._now():
            return
        with contextlib.suppress(Exception):  # the service's database
            await asyncio.to_thread(share.told, moment, remaining)

    async def _left_taken(self, method: str, budget: OfferBudget, cost: int) -> bool:
        """The request's offers taken from what the business's last answers left of the
        method's budget (``_left_told``), before it goes: False when fewer are left, the
        budget held until the window's end (``take`` waits or hands the offers back). None
        known (a new window, or no database): taken; a database that does not answer: this
        process's own count stands."""
        share = self._left[method]
        if share is NO_SHARED_LEFT:
            return True
        try:
            until = await asyncio.to_thread(share.take, cost, self._now())
        except Exception:  # the service's database
            return True
        if until is None:
            return True
        budget.unspend(cost)  # not sent: counted once, by the take after the wait
        budget.held_elsewhere((until - self._now()).total_seconds())
        return False

    def _budget_of(self, method: str) -> OfferBudget:
        """The method's own resource (§3.3: counted per method, each 420 for its resource)."""
        return {
            "offer-prices/updates": self.budget,
            "offer-prices": self.read_budget,
            "price-quarantine": self.quarantine_budget,
            "price-quarantine/confirm": self.confirm_budget,
        }[method]

    async def _call(
        self,
        method: str,
        payload: dict[str, Any],
        *,
        cost: int,
        query: str = "",
        rejects: list[str] | None = None,
    ) -> httpx.Response:
        """One POST at Yandex's pace, whatever the method (an update, a read-back, a
        quarantine list, a confirm: §3.3, each its resource, all of them within the
        parallelism): a 200 returned; a 420 waited out (the method's budget held until
        ``X-RateLimit-Resource-Until``) or the parallelism lowered, and sent again, up to
        ``TRIES`` sends; a 400 naming offers of ``rejects`` raised as ``_Rejected``; any other
        answer raised as ``_Whole`` (``paced``: a 420, or the budget held it)."""
        budget = self._budget_of(method)
        if self._key is None:
            raise _Whole(
                Classification(
                    Verdict.PAUSE,
                    "ym_api_key_file is not set or empty: the Api-Key of the cabinet is needed",
                    error_class="SettingMissing",
                ),
                unsent=True,
            )
        content = dump(payload).encode()
        path = f"/{method}" + (f"?{query}" if query else "")
        key = self._key
        headers = {"Api-Key": key, "Content-Type": "application/json"}
        response: httpx.Response | None = None
        held = 0.0
        for _ in range(TRIES):
            taken = False
            while not taken:
                await self._spent_heard(method, budget)
                try:
                    await budget.take(cost, most=_PATIENCE.get())
                except Later as later:
                    # A longer wait would hold the worker's stop (it waits for the sends in
                    # flight): the offers go back uncharged, due when the budget has room, as
                    # every wait of a marketplace's is (a try answered 420 before went).
                    waits = _Whole(
                        answers.budget_held(later.seconds, budget.per_minute, budget.account),
                        unsent=response is None,
                    )
                    waits.held = waits.paced = True
                    raise waits from None
                # Counted here already: fewer left at the business holds it until the
                # window's end, which this process's own window (seconds) ends before.
                taken = await self._left_taken(method, budget, cost)
            async with self.parallel, self._slot() as place:
                sent_at = await self._pacer.turn()
                self.requests_sent[method] = self.requests_sent.get(method, 0) + 1
                try:
                    response = await self._http.post(path, content=content, headers=headers)
                except httpx.TransportError as exc:
                    self._pacer.done(sent_at, None, None)
                    failure = key_masked_failure(httpx_failure(exc), key)
                    # No connection made, and no earlier try of this request answered: none
                    # of it left (a try answered 420 went, and its fate is Yandex's).
                    unsent = response is None and not failure.maybe_sent
                    if failure.maybe_sent:  # perhaps still in flight at Yandex
                        place.cooling = PLACE_COOLING
                    raise _Whole(transport_verdict(failure), unsent=unsent) from None
                # Yandex's words, wherever they go (a detail, a log, a receipt), never hold
                # the key.
                response = key_masked(response, key)
                status = response.status_code
                # A 420 is Yandex's pace, kept here; the worker's pace only counts it.
                self._pacer.done(sent_at, status, None)
                if status == 420 and answers.throttle(response) is answers.Throttle.PARALLEL:
                    await self._parallel_heard()  # its place still held: counted as taken
            # Every answer (200, 4xx) says what is left of the method's budget until when
            # (§3.3): no request of more goes before it (pace.py ``told``). Its limit below a
            # request's size cuts the requests and the budget (a request larger than the minute
            # is refused every time); a limit learned so follows the one every later answer
            # names, up or down (``_limit_heard``). A limit below ``ym_offers_per_minute`` but
            # not below a request is not learned: a simulator whose minute is scaled down names
            # its limit in simulated minutes (pace.py ``learned_limit``).
            budget.told(answers.remaining(response), answers.until(response))
            await self._left_told(method, answers.remaining(response), answers.until(response))
            if answers.remaining(response) == 0 and status != 420:
                await self._spend_told(method, answers.until(response), None)
            limit = answers.resource_limit(response)
            reads = budget is not self.budget
            if limit is not None and limit < (self.per_read if reads else self.per_request):
                self._lower(limit, budget)
                await self._spend_told(method, self._now(), limit)
            else:  # a limit learned before follows Yandex's, higher or lower (``_limit_heard``)
                await self._limit_heard(method, budget, limit)
            if status != 420:
                break
            if answers.throttle(response) is answers.Throttle.PARALLEL:
                self.parallel.lower()
                held = 1.0
            else:
                held = budget.hold_until(answers.until(response))
                log.info(
                    "Yandex Market's per-minute budget is spent (%s): waiting %.1f s", method, held
                )
                limit = answers.resource_limit(response)
                too_big = limit is not None and limit < cost
                # Told to every worker of the business (``_spend_told``): the hold, and the
                # budget named when it cuts this request (their shares divide that one).
                await self._spend_told(
                    method,
                    self._now() + timedelta(seconds=held - self.past_until),
                    limit if too_big else None,
                )
                if limit is not None and too_big:
                    # The cabinet's budget is below this request: sent again whole, it is
                    # refused every time (review 32b: 4 times in 3 minutes); cut to fit
                    # (an update by ``_update``, a read by ``_read_back``, ``_quarantined``
                    # and ``release_withheld``).
                    self._lower(limit, budget)
                    raise _TooBig(limit)
        assert response is not None
        if response.status_code == 200:
            refused = answers.error_in_200(response)  # §3.4: an ApiErrorResponse, no acceptance
            if refused is not None:
                raise _Whole(refused)
            return response
        if response.status_code == 420:  # the pace, never a failure (contract 14)
            paced = _Whole(answers.paced(response, max(held, 1.0)))
            paced.paced = True
            raise paced
        if response.status_code == 400 and rejects is not None:
            named = answers.named_offers(response, rejects)
            if named:
                raise _Rejected(named, answers.rule_fields(response, rejects))
            raise _Unnamed(answers.whole(response))
        raise _Whole(answers.whole(response))


@dataclass(slots=True)
class _Place:
    """A request's place of ``ym_parallel`` (``_slot``): ``cooling``, seconds it stays taken
    after the request ends."""

    cooling: float = 0.0


class _TooBig(Exception):
    """A 420 whose ``X-RateLimit-Resource-Limit`` is below the request's offers: the request
    is cut to the limit (``YandexMarketTarget._update``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Yandex Market's limit is {limit} offers a minute")
        self.limit = limit


class _Rejected(Exception):
    """A 400 naming offers of the request (by offerId), with Yandex's words for each, and
    those refused only by a rule of a dependent price (``rules``: offer -> its fields)."""

    def __init__(
        self, named: dict[str, str], rules: Mapping[str, frozenset[str]] | None = None
    ) -> None:
        super().__init__(f"{len(named)} offers refused")
        self.named = named
        self.rules = dict(rules or {})


class _WithAccepted:
    """``KnownPrices`` with the prices of accepted updates in flight in this batch (read back,
    not sent): a price of their SKU built beside them is judged beside what Yandex took."""

    def __init__(self, known: KnownPrices, accepted: Sequence[KnownPrice]) -> None:
        self.known, self.accepted = known, list(accepted)

    def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
        wanted = set(skus)
        return [*self.known.latest(sorted(wanted)), *(k for k in self.accepted if k.sku in wanted)]


def _sku(message: OutgoingMessage) -> str | None:
    import json

    try:
        payload = json.loads(message.payload)
        return str(payload["sku"])
    except (ValueError, KeyError, TypeError):
        return None


def _receipt(
    offer: str,
    fields: Mapping[str, Decimal],
    at: datetime,
    versions: Mapping[str, int],
    settles: datetime | None = None,
    *,
    prefix: str = ACCEPTED,
    refused: str | None = None,
    then: Classification | None = None,
) -> str:
    """The receipt of an accepted item: ``ym-accepted:`` and JSON of when (UTC, ISO 8601), the
    offer, each field as sent (Decimals as text), the version of each field's price and, for
    an update accepted while an earlier one was not shown, when it may count (``settles``)."""
    body: dict[str, Any] = {
        "at": at.isoformat(),
        "offer": offer,
        "fields": {k: number(v) for k, v in fields.items()},
        "versions": {k: v for k, v in versions.items() if k in fields},
    }
    if settles is not None:
        body["settles"] = settles.isoformat()
    if refused is not None:
        body["refused"] = refused
    if then is not None:
        body["then"] = {"detail": then.detail, "receipt": then.receipt}
    return prefix + json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _refusal(receipt: str | None) -> str | None:
    """The words of the 400 an ``ym-accepted:`` receipt's item was refused in while it may be
    Yandex's all the same (``_Accepted.refused``); None for any other."""
    if not receipt or not receipt.startswith(ACCEPTED):
        return None
    try:
        said = json.loads(receipt[len(ACCEPTED) :]).get("refused")
    except (ValueError, AttributeError):
        return None
    return said if isinstance(said, str) else None


def _then(receipt: str | None) -> Classification | None:
    """The quarantine an ``ym-accepted:`` receipt's clearing item gives its messages once
    shown (``_Accepted.then``); None for any other."""
    if not receipt or not receipt.startswith(ACCEPTED):
        return None
    try:
        then = json.loads(receipt[len(ACCEPTED) :]).get("then")
        detail, kept = then["detail"], then.get("receipt")
    except (ValueError, AttributeError, TypeError, KeyError):
        return None
    if not isinstance(detail, str) or not isinstance(kept, str | None):
        return None
    said = shared.invalid(detail)
    said.receipt = kept
    return said


def _from_receipt(
    receipt: str | None, prefix: str = ACCEPTED
) -> tuple[str, dict[str, Decimal], datetime, dict[str, int], datetime | None] | None:
    """The offer, fields, time and versions of an ``ym-accepted:`` receipt (no versions in one
    written before they were kept); None for any other receipt (``ym-not-applied``, an offer's
    name once delivered, none) or one that does not read."""
    if not receipt or not receipt.startswith(prefix):
        return None
    try:
        body = json.loads(receipt[len(prefix) :])
        at = datetime.fromisoformat(body["at"])
        offer = body["offer"]
        fields = {str(k): Decimal(str(v)) for k, v in body["fields"].items()}
        versions = {str(k): int(v) for k, v in body.get("versions", {}).items()}
        settles = datetime.fromisoformat(body["settles"]) if "settles" in body else None
    except (ValueError, KeyError, TypeError, AttributeError, InvalidOperation):
        return None
    if at.tzinfo is None or not isinstance(offer, str) or "value" not in fields:
        return None
    if settles is not None and settles.tzinfo is None:
        return None
    return offer, fields, at, versions, settles


def _not_withheld(offer: str, price: MappedPrice, seen: _Read | None) -> Release:
    """A release of a price whose offer Yandex no longer lists in its price quarantine: the
    price live (nothing to confirm), or another in its place (a later update replaced it; a
    confirm would release nothing)."""
    held = _held(seen, price)  # no discount or no minimum asked: none shown is it
    if held == price.amount:
        return Release(
            False,
            f"Yandex Market no longer withholds offer {offer!r} and shows {price.mapped}="
            f"{number(price.amount)}: nothing to confirm",
            Shown.LIVE,
        )
    now = f"shows {price.mapped}={number(held)}" if held is not None else "does not show it"
    return Release(
        False,
        f"Yandex Market no longer withholds offer {offer!r} and {now}, not "
        f"{number(price.amount)}: a later update replaced this price, nothing to confirm",
    )


def _no_discount(fields: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """The fields as sent: a ``discountBase`` of 0, or equal to ``value``, is no discount, kept
    as 0 and left out of the update (research §3.1: pass it "если предоставляете скидку";
    §3.6.2: an update without it removes the discount), never refused as a broken rule."""
    out = dict(fields)
    base = out.get("discountBase")
    if base is not None and (base == 0 or base == out.get("value")):
        out["discountBase"] = Decimal(0)
    return out


def _held(seen: _Read | None, price: MappedPrice) -> Decimal | None:
    """What Yandex holds for the price's field (``exchange verify``): an old price that meant
    no discount (0, or not above ``value``: sent without ``discountBase``, ``items._no_discount``)
    is held as it is when Yandex shows no discount."""
    if seen is None:
        return None
    held = seen.shown.get(price.mapped)
    value = seen.shown.get("value")
    no_discount = price.amount == 0 or (value is not None and price.amount <= value)
    if price.mapped == "discountBase" and not held and no_discount:
        return price.amount
    if price.mapped == "minimumForBestseller" and not held and price.amount == 0:
        return price.amount  # no minimum asked, none held
    return held


def _landed_late(seen: _Read | None, a: _Accepted, *, known: bool = True) -> str | None:
    """What the read-back says where it shows, instead of the update ``a``, an earlier update
    of its offer that was not shown yet when ``a`` was accepted (``_Accepted.earlier``): that
    one landed after ``a`` was sent (§3.5: no order promised; review words35b item 3, as
    Wildberries' ``lost-send-found`` says of a task found late). None: no such one shown.

    ``known=False``: said before ``ym_apply_timeout`` has passed, when that is one cause of
    two: Yandex's price quarantine may hold ``a`` (a rise), listed only a little later, and
    ``withheld`` then (words38 item 7: the interim words asserted the earlier had landed
    after it)."""
    for fields in a.earlier:
        if _shows(seen, fields):
            earlier = ", ".join(f"{k}={number(v)}" for k, v in fields.items())
            own = ", ".join(f"{k}={number(v)}" for k, v in a.fields.items())
            if not known:
                return (
                    f"Yandex Market does not show this update's {own} for offer {a.offer!r} "
                    f"yet but an earlier update of it ({earlier}), not shown yet when this one "
                    "was accepted: that one may have landed after it, or Yandex may be holding "
                    "this one in its price quarantine"
                )
            return (
                f"an earlier update of offer {a.offer!r} ({earlier}), not shown yet when this "
                "one was accepted, landed after it: Yandex Market shows that, not this update's "
                f"{own}"
            )
    return None


def _shows(
    seen: _Read | None, fields: Mapping[str, Decimal], mapped: Iterable[str | None] = ()
) -> bool:
    """Whether the read-back shows each field as sent (no discount or no minimum sent: none
    shown). ``mapped``: the fields the channel maps (``ym_price_types``): one of them the
    update left out (``discountBase``, ``minimumForBestseller``) was dropped by Yandex
    (§3.1, §3.6.2), so none is shown once it lands; one shown all the same is an earlier
    update's, landed after it (§3.5), and the update is not shown (review rev35re)."""
    if seen is None:
        return False
    absent = {n: Decimal(0) for n in FIELDS[1:] if n in set(mapped) and n not in fields}
    for name, sent in {**fields, **absent}.items():
        shown = seen.shown.get(name)
        if name in FIELDS[1:] and not sent:
            if shown:
                return False
        elif shown != sent:
            return False
    return True


def _sent_value(message: OutgoingMessage, price: MappedPrice) -> Decimal | None:
    """The ``value`` the message's delivery sent: its receipt's (``ym-accepted:``, the item as
    sent), else the message's own price where it maps to ``value``; None when unknown."""
    read = _from_receipt(message.receipt)
    if read is not None:
        return read[1].get("value")
    return price.amount if price.mapped == "value" else None


def _other_withheld(offer: str, entry: _Listed, sent: Decimal | None) -> Release:
    """A release refused: Yandex withholds another price of the offer than the delivery's
    (a confirm would publish that one), or one the release cannot compare."""
    ours = f"value={number(sent)}" if sent is not None else "a price not known here"
    return Release(
        False,
        f"Yandex Market withholds offer {offer!r} at {entry.said()}, not this delivery's "
        f"{ours}: a confirm would publish Yandex's, so nothing was confirmed (confirm it in "
        "the cabinet if that price is right, or send a new price from 1C)",
    )


def _one_offer(item: _Item, other: str) -> str:
    return (
        f"SKUs {other!r} and {item.sku!r} are one Yandex Market offer {item.offer!r} (Yandex "
        "trims offerId, and under sku_source=article two goods may share an article): each "
        "would overwrite the other's price; give them distinct SKUs (or articles) in 1C"
    )


def _value_alone(item: _Item) -> _Item | None:
    """``item`` without the dependent prices it carries as new beside its other new prices
    (none of them: no discount, §3.1, §3.6.2; never the delivered one 1C replaced, as
    ``shared.spread_rule``'s retry goes), carrying only the others; None when it carries no
    dependent price as new or nothing else."""
    dependent = [m for m in item.carried if item.fields_of.get(m.message_id) in DEPENDENT]
    if not dependent or len(dependent) == len(item.carried):
        return None
    fields = dict(item.fields)
    versions = dict(item.versions)
    for message in dependent:
        name = item.fields_of[message.message_id]
        none = DEPENDENT[name]
        if none is None:
            fields.pop(name, None)
        else:
            fields[name] = none
    gone = {m.message_id for m in dependent}
    return _Item(
        item.offer,
        item.sku,
        _no_discount(fields),
        [m for m in item.carried if m.message_id not in gone],
        versions,
        {k: v for k, v in item.fields_of.items() if k not in gone},
    )


def _rule(item: shared.Item) -> str | None:
    """Yandex's rules for the shared part's item (contract 14: checked before sending)."""
    return _rule_broken(_Item(offer_id(item.offer_id), item.sku, _no_discount(item.prices)))


def _accepted(detail: str, wait: float) -> Classification:
    return Classification(Verdict.AWAITING, detail, http_status=200, again_in=wait)


def _rule_broken(item: _Item) -> str | None:
    """Yandex's rules for one offer (§3.1), checked before sending, or None. Each field's
    money (7 decimals, discountBase whole, never 0) is the shared part's (``MONEY``)."""
    if not item.offer:
        return "the SKU is empty once Yandex trims it (offerId is 1-255 characters)"
    if len(item.offer) > MAX_OFFER_ID:
        return f"offerId {item.offer[:40]!r}… is longer than {MAX_OFFER_ID} characters"
    value = item.fields.get("value")
    if value is None:
        return (
            f"offer {item.offer!r} has no price mapped to value known yet (Yandex takes "
            "discountBase and minimumForBestseller only with the price)"
        )
    base = item.fields.get("discountBase")
    if base:  # 0: no discount, the update goes without it
        if base <= value:
            return (
                f"offer {item.offer!r}: discountBase {number(base)} is not above value "
                f"{number(value)}"
            )
        percent = (base - value) * 100 / base
        if not DISCOUNT_MIN <= percent <= DISCOUNT_MAX:
            return (
                f"offer {item.offer!r}: a discount of {percent.quantize(Decimal('0.01'))} % "
                f"(discountBase {number(base)}, value {number(value)}); Yandex Market takes "
                f"{DISCOUNT_MIN}-{DISCOUNT_MAX} %"
            )
    least = item.fields.get("minimumForBestseller")
    # 0: no minimum, the update goes without it
    if least is not None and (not least.is_finite() or not 0 <= least <= MAX_BESTSELLER):
        return (
            f"offer {item.offer!r}: minimumForBestseller {number(least)} is not in 0 < x ≤ "
            f"{MAX_BESTSELLER}"
        )
    return None


def _result(response: httpx.Response, key: str) -> list[dict[str, Any]]:
    parsed = answers.body(response)
    result = parsed.get("result") if isinstance(parsed, dict) else None
    listed = result.get(key) if isinstance(result, dict) else None
    if not isinstance(listed, list):
        raise _Whole(answers.unreadable(response, f"the answer has no result.{key} list"))
    return [entry for entry in listed if isinstance(entry, dict)]


def _next_page(response: httpx.Response) -> str | None:
    parsed = answers.body(response)
    result = parsed.get("result") if isinstance(parsed, dict) else None
    paging = result.get("paging") if isinstance(result, dict) else None
    token = paging.get("nextPageToken") if isinstance(paging, dict) else None
    return token if isinstance(token, str) and token else None


def _verdicts(entry: dict[str, Any]) -> str:
    """A quarantine entry's verdicts in words: ``PRICE_CHANGE CURRENT_PRICE=…, …``."""
    parts: list[str] = []
    for verdict in entry.get("verdicts") or []:
        if not isinstance(verdict, dict):
            continue
        params = ", ".join(
            f"{p.get('name')}={p.get('value')}"
            for p in verdict.get("params") or []
            if isinstance(p, dict)
        )
        parts.append(f"{verdict.get('type')}" + (f" {params}" if params else ""))
    return "; ".join(parts)[:300] or "no verdict given"


def _withheld_value(
    entry: dict[str, Any], field: str = "currentPrice", param_name: str = "CURRENT_PRICE"
) -> Decimal | None:
    """The price a quarantine entry withholds: ``currentPrice.value``, else the first
    verdict's ``CURRENT_PRICE`` parameter (§3.4 ``PRICE_CHANGE``, ``LOW_PRICE``); with
    ``lastValidPrice`` and ``LAST_VALID_PRICE``, the price buyers see meanwhile."""
    current = entry.get(field)
    if isinstance(current, dict):
        found = _decimal(current.get("value"))
        if found is not None:
            return found
    for verdict in entry.get("verdicts") or []:
        for param in (verdict.get("params") or []) if isinstance(verdict, dict) else []:
            if isinstance(param, dict) and param.get("name") == param_name:
                found = _decimal(param.get("value"))
                if found is not None:
                    return found
    return None


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return None

"""Ozon as a ``Target`` (contract 14): ``POST /v1/product/import/prices`` of the Seller API.

One item per SKU (``offer_id``: the SKU or its article, ``sku_source``) carrying every mapped
price type (``price``, ``old_price``, ``min_price``) as strings, at most 1,000 items a request
(exchange/targets/marketplace/). Before sending: the channel's currency, two decimals at most
(``rounding``), and Ozon's stated price rules (old-price gaps, the minimum price's bounds) are
checked, a broken one ``invalid-for-channel``. A price equal to the one delivered is not sent
again where Ozon shows it (one read of the batch's such products, ``_shown``): delivered without
a request (research §1.3: Ozon restricts senders of identical requests), and so is a channel's
first send of a SKU (no delivered price of it: a channel added, or added again, and seeded) at
exactly what Ozon shows, one read for the worker's batch (``_prices_of``); a send whose outcome is
unknown (a timeout, a crash in flight, a version superseded after it may have gone) leaves what
Ozon holds unknown. A send whose answer was lost (a timeout or a connection cut after the
request may have reached Ozon, or a 5xx) may still land, after a newer one (§1.5: no order
between two racing updates): the product's next send, the same price or a newer one, waits, not
charged, reading Ozon's prices (``/v5/product/info/prices``) every ``LOST_EVERY`` seconds until
Ozon shows the lost prices (that version delivered without a request, a newer one goes) or
``LOST_HOLD`` has passed since the send (``_late``, ``marketplace.late``; the lost send is kept
in its deliveries' receipts, every worker's).
The answers are read by answers.py; the hourly limit per product by hours.py: the 11th update
of a product within the hour (every worker's sends, counted in the database and the send's slot
taken there before its request leaves, one worker at a time: ``SentTimes.reserve``) is held
(``Verdict.AWAITING``: not charged), and a product Ozon
refused for it is tried once more an hour later, its newer versions too (the wait is the
product's, kept across a restart by the refusal's receipt). Every request keeps under Ozon's
requests a second (rate.py) and waits its turn of the worker's pace (``pace_with``). "Circle is
open" (the method blocked for a few minutes, §1.3) holds every item three minutes without a
request, not charged, on every worker of the Client-Id (``SharedHold``: the one that heard it
writes the wait to the database, the others read it before a request). While Ozon refuses
the key, the health check (the worker's probe in a pause) asks ``/v1/roles`` once every
``probe_every`` seconds, or at once when the key file changed (§1.3: erroneous requests risk
the account).
``Client-Id`` and ``Api-Key`` go in headers, the key never in a log, an error or a detail.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx

from exchange.domain.pause import SETTING_MISSING
from exchange.domain.prices import OZON_HOUR, PAIR_RULE, KnownPrice
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ReadBackFailed
from exchange.targets.base import UNPACED, HeldPrice, OutgoingMessage, Pacer
from exchange.targets.marketplace import late
from exchange.targets.marketplace.articles import NO_ARTICLES, Articles
from exchange.targets.marketplace.hold import (
    NO_SHARED_HOLD,
    NO_SHARED_TURN,
    SharedHold,
    SharedTurn,
)
from exchange.targets.marketplace.holders import (
    NO_HOLDERS,
    OfferHolders,
    OneSkuAGood,
    shared_article,
)
from exchange.targets.marketplace.items import (
    Built,
    Channel,
    Item,
    by_sku,
    cleared_words,
    clearing,
    clearing_waits_words,
    gather,
    invalid,
    pair_words,
    refused_before_words,
    refused_clearing_words,
    shown_dependent,
    sku_of,
    spread,
    spread_rule,
    still_shown_words,
)
from exchange.targets.marketplace.money import Money, text
from exchange.targets.ozon.answers import (
    CIRCLE,
    CIRCLE_SECONDS,
    KEY_PAUSES,
    RULES,
    circle_held,
    circle_in,
    item_answer,
    matched,
    refusal,
)
from exchange.targets.ozon.hours import (
    LOST,
    NO_SENT_TIMES,
    REFUSED,
    RULED,
    SENDING,
    ProductHours,
    SentTimes,
    refused_at,
    refused_receipt,
    sending_receipt,
)
from exchange.targets.ozon.rate import PER_SECOND, RequestRate
from exchange.targets.prices import (
    NO_KNOWN_PRICES,
    NOTHING_WAITING,
    KnownPrices,
    WaitingPrices,
    read_price,
)
from exchange.targets.wire import (
    http_client,
    httpx_failure,
    key_masked,
    key_masked_failure,
    paced_request,
    transport_verdict,
)

IMPORT_PRICES = "/v1/product/import/prices"  # research §1.1
INFO_PRICES = "/v5/product/info/prices"  # §1.4: the read-back
ROLES = "/v1/roles"  # §1.2: the key's roles and methods
MAX_ITEMS = 1000  # §1.1
# Requests one refused import may add, halving itself to find the items a 400 refused whole:
# a bad item among 1,000 is found in 20; beyond, the rest ends with the 400 (§1.3: erroneous
# requests may get the account restricted; review 32c: 127 refused requests for 64 items).
SPLITS = 20
# §1.1: money as strings, "до двух знаков после точки"; old_price "0" clears it.
MONEY = {"price": Money(2), "old_price": Money(2, zero=True), "min_price": Money(2)}
# The prices whose rules depend on ``price`` (contract 14, issue 32): a new one that breaks a
# rule beside a new price is refused alone; the item goes without it, never with the delivered
# one 1C replaced: old_price "0" (§1.1, §1.6.3: no old price) and no min_price (Ozon keeps its
# own).
DEPENDENT: dict[str, Decimal | None] = {"old_price": Decimal(0), "min_price": None}
MAIN_FIELD = "price"  # the price an old price stands beside (``items.Channel.main``)
USER_AGENT = "exchange (1C prices)"
# A send whose answer was lost (a timeout or a connection cut after the request may have reached
# Ozon) may still be applied after a newer one: §1.4, the import answers synchronously, but how
# long Ozon may go on with a request its sender gave up on is not documented (§8: propagation
# UNCONFIRMED), and §1.5: "Two racing updates: no documented ordering guarantee". The product's
# next send waits, reading Ozon's prices (``_late``), until Ozon shows the lost prices, at most
# LOST_HOLD seconds from the send: 60 times the client's default timeout (10 s), ten minutes of
# a product's hour (§1.3: 10 updates an hour), past any proxy's hold on an open request. Then
# it is taken for never applied, and the price goes.
LOST_HOLD = 600.0
# Seconds between two reads of a waiting product's prices: at most 20 reads a lost send (§1.3:
# identical requests may get the account restricted), one read for a send's waiting products.
LOST_EVERY = 30.0
# Seconds a read of Ozon's prices serves the batch's other requests (``_prices_of``): a batch
# of 1,000 SKUs in requests of a few items goes in a few seconds at Ozon's pace (§1.3).
READ_FRESH = 30.0
# Seconds a request waits, held, while another worker's request goes first after "Circle is
# open" (``_first_after_circle``): an import is answered within the client's timeout.
PROBE_WAIT = 2.0

# The verdicts of a clearing that is not settled yet and goes again (held, its answer lost, a
# retry): their words say the rule the price it carries broke first (``clearing_waits_words``).
WAITS = (Verdict.AWAITING, Verdict.TEMPORARY)

ApiKey = Callable[[], str | None]
log = logging.getLogger(__name__)


def ozon_rule(item: Item) -> str | None:
    """Ozon's stated price rules (research §1.1, §1.4, §1.6), on the fields the item sets:
    the old price's gap by tier of the price (more than 20 ₽ up to 400 ₽, 5 % of the old price
    up to 10,000 ₽, 500 ₽ above; under 90 %), the old price above the price, the minimum price
    at least half the price and below it. A gap exactly at its threshold goes to Ozon (whether
    it takes it: UNCONFIRMED, §1.4), and Ozon's answer decides."""
    price = item.prices.get("price")
    old = item.prices.get("old_price")
    low = item.prices.get("min_price")
    if price is None:
        return None
    if old is not None and old > 0:
        gap = old - price
        if old < price:
            return (
                f"old_price {old} is below price {price}: Ozon refuses it "
                "(old_price_less_than_price: Цена до скидки должна быть выше текущей цены.)"
            )
        if gap * 10 >= old * 9:
            return (
                f"old_price {old} is 90 percent or more above price {price}: Ozon refuses it "
                "(discount_too_big: Разница между ценами до и после скидки должна быть "
                "меньше 90%.)"
            )
        for top, needed, code in (
            (Decimal(400), Decimal(20), "discount_for_low_price_is_too_small"),
            (Decimal(10000), old * Decimal("0.05"), "discount_for_average_price_is_too_small"),
            (None, Decimal(500), "discount_for_top_price_is_too_small"),
        ):
            if top is None or price <= top:
                if gap < needed:
                    return (
                        f"the gap between old_price {old} and price {price} is {gap}, less "
                        f"than Ozon's {needed.normalize():f} for this price ({code})"
                    )
                break
    if low is not None and low > 0:
        if low >= price:
            return f"min_price {low} is not below price {price}: Ozon refuses it"
        if low * 2 < price:
            return (
                f"min_price {low} is less than half of price {price}: Ozon refuses it "
                "(min_auto_price_too_small: Минимальная цена должна быть не меньше 50% от "
                "вашей цены.)"
            )
    return None


def _goes_without_old_price(item: Item) -> bool:
    """Whether ``item`` carries old_price "0" (no old price, research §1.1) beside a price."""
    return item.prices.get("old_price") == DEPENDENT["old_price"] and "price" in item.prices


def own_old_price_words(
    said: str, old: Decimal | None, price: Decimal | None, mapped: Sequence[str] = ()
) -> str:
    """Ozon's refusal ``said`` of a price by its rule of ``old_price`` when 1C sent none: the
    old price Ozon holds (``old``; None or 0: unread) was set outside 1C, in the seller's
    cabinet, and the way out (research §1.1: ``old_price`` "0" clears it). ``mapped``: the 1C
    price types the channel maps to ``old_price``; where there are some, the way out is 1C's
    old price of this SKU, not a mapping the channel has already (review ozonpair item 2); "had
    sent none … when Ozon refused": one 1C sends later waits for the decision on this price,
    which ``exchange history`` names (review words35b item 1)."""
    held = "an old price" if not old else f"old_price {text(old)}"
    if mapped:
        way = (
            "send this SKU's old price from 1C (price type "
            f"{', '.join(repr(t) for t in sorted(mapped))}, mapped to old_price; 1C had sent "
            "none for this SKU when Ozon refused this price)"
        )
    else:
        way = (
            "send an old price from 1C (map a 1C price type to old_price in the channel's "
            "price types)"
        )
    return (
        f"{said.rstrip('.')}. Ozon holds {held} set outside 1C (in the seller's cabinet), "
        f"which the price {'?' if price is None else text(price)} sent does not fit: {way} "
        "or clear the old price in Ozon's seller cabinet"
    )


@dataclass(frozen=True, slots=True)
class Roles:
    """What ``/v1/roles`` says of the key: whether it may set prices, and until when."""

    may_write: bool
    may_read: bool
    expires_at: str | None
    names: list[str]


class OzonTarget:
    name = "ozon"
    # A SKU's price types go in one item; the breaker's probe sends the whole item (base.py).
    item_of = staticmethod(sku_of)

    def __init__(
        self,
        url: str,
        client_id: str,
        api_key: ApiKey,
        *,
        price_types: dict[str, str | None],
        currency: str = "RUB",
        sku_source: str = "sku",
        rounding: str = "none",
        pair_settle: float = 0.0,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | None = None,
        known: KnownPrices = NO_KNOWN_PRICES,
        delivered: KnownPrices = NO_KNOWN_PRICES,
        waiting: WaitingPrices = NOTHING_WAITING,
        articles: Articles = NO_ARTICLES,
        holders: OfferHolders = NO_HOLDERS,
        clock: Callable[[], float] = time.time,
        hours: ProductHours | None = None,
        sent: SentTimes = NO_SENT_TIMES,
        circle: SharedHold = NO_SHARED_HOLD,
        circle_turn: SharedTurn = NO_SHARED_TURN,
        max_items: int = MAX_ITEMS,
        probe_every: float = 300.0,
        requests_per_second: float | None = PER_SECOND,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        lost_hold: float = LOST_HOLD,
        lost_every: float = LOST_EVERY,
        channel_said: str | None = None,
    ) -> None:
        """``known``: the newest price of each price type Ozon may hold, delivered or in
        doubt (an item carries them); ``delivered``: the latest delivered only (a price
        equal to it is not sent again); ``waiting``: the prices still to be given to the
        channel (an item breaking Ozon's rules waits for a newer price of its SKU, issue
        32); ``articles``: under ``sku_source = article``; ``holders``: the SKUs the
        channel gave each article (``marketplace.holders``: one 1C SKU an Ozon offer).
        ``clock``: seconds, for the hourly limit (the simulator's scaled clock in tests);
        ``sent``: the channel's accepted sends (the deliveries' history, every worker's), read
        for each SKU right before it goes, so that the count holds across workers and a
        restart. ``circle``: "Circle is open" heard by any worker of the account (its end on
        ``clock``), so that the others send nothing into it either. ``probe_every``: seconds
        between two
        ``health`` requests while Ozon refuses the key (EXCHANGE_RETRY_MAX_DELAY), unless the
        key file changed. ``requests_per_second``: Ozon's limit per Client-Id (rate.py), kept
        by every request (``monotonic``, ``sleep``: its clock). ``lost_hold``: seconds a
        product waits after a send whose answer was lost, for Ozon to show its prices
        (``_late``), read every ``lost_every`` seconds. ``channel_said``: what its words
        call the channel (``Channel.said``: "channel ozon (Ozon)" under EXCHANGE_CHANNELS);
        without it, the marketplace's name. ``pair_settle``: seconds a price taken in alone
        beside the known price of its pair's other type waits for 1C's row of that type
        (``items._settles``; 0: never waits)."""
        self.url = url.rstrip("/")
        self.client_id = client_id
        self._key_source = api_key
        self._key = api_key()
        self.channel = Channel(
            "ozon",
            dict(price_types),
            "ozon_price_types",
            MONEY,
            currency=currency,
            sku_source=sku_source,
            rounding=rounding,
            dependent=DEPENDENT,
            struck=frozenset({"old_price"}),
            called=channel_said or "Ozon",
            settle=pair_settle,
            main=MAIN_FIELD,
        )
        self.known, self.delivered, self.articles = known, delivered, articles
        self.waiting = waiting
        # One SKU an offer_id: two 1C SKUs sharing an article would overwrite each other's
        # price on Ozon; the first sent keeps it, any worker's (the marketplaces' rule).
        self.one_sku = OneSkuAGood(holders, (SENDING,), "Ozon")
        self.clock = clock
        self.hours = hours or ProductHours()
        self.sent = sent
        self.max_items = max(1, min(max_items, MAX_ITEMS))
        # offer_id -> field -> (amount, version): what Ozon took from this process, known here
        # before the channel's delivered prices hold it (``_unchanged``).
        self._accepted: dict[str, dict[str, tuple[Decimal, int]]] = {}
        self._http = http_client(
            timeout=timeout,
            verify=verify,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
            base_url=self.url,
        )
        self._pacer: Pacer = UNPACED
        self.probe_every = probe_every
        # (asked at, the key asked with, Ozon's answer): the last health refused for the key.
        self._key_refused: tuple[float, str | None, Classification] | None = None
        self._circle_until = -math.inf  # "Circle is open" on the import until then (clock)
        self.circle = circle  # the same, heard by any worker (``_circle``)
        # The request that goes first once the wait is over, one of the account's at a time
        # (``_first_after_circle``), held at most this long by a holder that dies.
        self.circle_turn, self._turn_seconds = circle_turn, timeout + 5.0
        self._answered_past = -math.inf  # a request was answered, not "Circle is open", after
        self._turn: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self.rate = RequestRate(requests_per_second, monotonic=monotonic, sleep=sleep)
        self._marks: dict[str, str] = {}  # SKU -> the mark of its send about to leave
        self.lost_hold, self.lost_every = lost_hold, lost_every
        self._monotonic = monotonic
        # Ozon's prices read for the batch (``_prices_of``): offer_id -> (read at, on
        # ``monotonic``; its entry, None: not listed), the reads under way, and the batch's
        # SKUs whose requests have not asked yet (``requests``).
        self._read: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._reading: dict[str, asyncio.Future[str | None]] = {}
        self._ahead: dict[str, None] = {}
        # SKU -> its lost send's word (``late.token``), without a database (``sent``) only:
        # with one, the deliveries' receipts hold it for every worker (``SentTimes.lost``).
        self._lost_here: dict[str, str] = {}
        # SKU -> Ozon's codes of its refusal of the price its clearing carries, while that
        # clearing is being sent (``_clear_refused``; ``_lose`` keeps them with a lost send).
        self._ruled: dict[str, list[str]] = {}

    def pace_with(self, pacer: Pacer) -> None:
        self._pacer = pacer

    def share(self, workers: int) -> None:
        """The channel's live workers spend the Client-Id's requests a second together
        (§1.3): this target keeps its share (``RequestRate.share``)."""
        self.rate.share(workers)

    # -- the seam --------------------------------------------------------------------------

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        requests = by_sku(messages, self.max_items)
        # The batch's SKUs, for a read of one request's prices to take the others' along
        # (``_prices_of``); a read no send took within READ_FRESH is forgotten.
        fresh = self._monotonic() - READ_FRESH
        self._read = {o: got for o, got in self._read.items() if got[0] >= fresh}
        skus = (sku_of(m) for m in messages) if len(requests) > 1 else ()
        self._ahead = dict.fromkeys(sku for sku in skus if sku is not None)
        return requests

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        built = await gather(
            messages,
            self.channel,
            known=self.known,
            articles=self.articles,
            rule=ozon_rule,
            waiting=self.waiting,
            now=datetime.fromtimestamp(self.clock(), UTC),
        )
        answers = dict(built.answers)
        clears = self._clears(built, answers)
        built.items = [*built.items, *clears]
        if self.channel.sku_source == "article":
            # Articles come trimmed (``exchange.db.articles``), as the database's offers.
            kept, refused = await self.one_sku.split(
                built.items, lambda i: i.offer_id, lambda i: i.sku, by_article=True
            )
            for item, other in refused:
                said = shared_article(other, item.sku, item.offer_id, "Ozon")
                answers.update(spread(item, invalid(said)))
            built.items = kept
        unchanged, first = await self._unchanged(built.items)
        if first:
            # A first send held by "Circle is open" is read when it may go, not now.
            await self._circle_heard()
            if self._circle_until > self.clock():
                first = set()
        # A clearing (old_price "0" in place of the one 1C replaced) is read first as well:
        # Ozon may show no old price already (an item sent beside a new price went with "0",
        # which the known prices never hold: the quarantined old price is not delivered), and
        # an identical update spends one of the product's 10 an hour (§1.3; review rev39: the
        # clearing went again where Ozon showed 1500 with no old price).
        cleared = {c.sku for c in clears}
        # So is an item going with old_price "0" beside a price (1C's pair broke Ozon's rule, or
        # 1C ended its discount): a re-export of the same pair would send Ozon the update it
        # shows already, each one of the product's 10 an hour, until 1C's real change waited
        # for the hour (review rev43 H2: 1050/"0" sent seven times, then 990 held 54 minutes).
        cleared |= {i.sku for i in built.items if _goes_without_old_price(i)}
        wanted = unchanged | first | cleared
        shown = await self._shown([i for i in built.items if i.sku in wanted])
        unchanged = (unchanged | cleared) & set(shown)
        now = self.clock()
        # The channel's first send of a SKU (a channel added, or added again under its name,
        # and seeded): what Ozon shows at exactly its prices is not sent (§1.3: every send
        # counts in the product's 10 an hour), unless a lost send may still land over it.
        there = {sku for sku in first if sku in shown}
        if there:
            there -= set(await self._lost_pending(sorted(there), now))
        await self._seed([item.sku for item in built.items], now)
        await self._refusals([i.sku for i in built.items if i.sku not in unchanged | there], now)
        going: list[Item] = []
        if any(item.sku not in unchanged | there for item in built.items):
            await self._circle_heard()
        circle = self._circle_until - now
        for item in built.items:
            if item.sku in there:
                said = (
                    f"Ozon shows {shown[item.sku]} already (read before the channel's first "
                    "send of it), not sent"
                )
                answers.update(spread(item, Classification(Verdict.DELIVERED, said)))
                continue
            if item.sku not in unchanged and circle > 0:
                # §1.3: the method is blocked for a few minutes; a request now would only
                # prolong the "lot of requests" that blocked it.
                said = 'held: Ozon answered "Circle is open" (the prices method is blocked)'
                answers.update(spread(item, circle_held(said, circle)))
                continue
            if item.sku in unchanged:
                answers.update(
                    spread(
                        item,
                        Classification(
                            Verdict.DELIVERED,
                            f"unchanged: Ozon shows {shown[item.sku]} already (read now), not "
                            "sent again",
                        ),
                    )
                )
                continue
            free = self.hours.free_at(item.sku, now)
            if free is not None:
                after = self.hours.by_refusal(item.sku, free)
                answers.update(spread(item, self._held(free - now, after_refusal=after)))
                continue
            going.append(item)
        going = await self._late(going, now, answers)
        if going and self._circle_until > self._answered_past:
            await self._first_after_circle(going, now, answers)
        elif going:
            await self._send_now(going, now, answers)
        self._refused_before(built.items, clears, answers)
        await self._cleared(built, clears, answers)
        await self._clear_refused(built.items, clears, answers)
        return [answers[m.message_id] for m in messages]

    @staticmethod
    def _refused_before(
        items: list[Item], clears: list[Item], answers: dict[str, Classification]
    ) -> None:
        """The waits (``AWAITING``) of a price Ozon refused by its rule whose clearing's
        answer was lost (``_clear_refused``, ``_lose``: the refusal's codes kept beside the
        lost send, ``RULED``): the next tries wait for that send (``_late``) or the product's
        hour, and their words still say Ozon's refusal, its code and meaning, first (review
        rev39 W3: "Ozon may still apply the send of old_price 0" for ten minutes, the refusal
        said nowhere)."""
        for item in items:
            if any(item is c for c in clears):
                continue
            codes = {
                code
                for m in item.carried
                for word in (m.receipt or "").split()
                if word.startswith(RULED)
                for code in word[len(RULED) :].split(",")
                if code in RULES
            }
            if not codes:
                continue
            refusal = "Ozon: " + "; ".join(f"{c}: {RULES[c]}" for c in sorted(codes))
            for m in item.carried:
                said = answers.get(m.message_id)
                if said is not None and said.verdict is Verdict.AWAITING:
                    words = refused_before_words(refusal, said.detail)
                    answers[m.message_id] = replace(said, detail=words)

    async def _clear_refused(
        self, items: list[Item], clears: list[Item], answers: dict[str, Classification]
    ) -> None:
        """Ozon refused by a rule of two price types (``OzonPriceRule``, ``channel-rule``) an
        item that carried only new dependent prices (1C's old price 1000 alone beside the
        delivered 950, a gap exactly at Ozon's 5 %: research §1.4, the boundary UNCONFIRMED,
        so it went) while Ozon shows the old price 1C replaced (1400, ``_shown_dependent``):
        as the service's own rule does (``Built.clears``), the known prices go once more
        without it (old_price "0", §1.1, §1.6.3; ``_clearing``), through the same path (the
        product's hour, "Circle is open", the send's mark), so buyers never keep seeing a
        strikethrough price 1C replaced (review: 950 "was 1400" stayed). Taken: the refused
        price's quarantine says so (``cleared_words``); refused: it says Ozon still shows the
        old price and why (``still_shown_words``, ``refused_clearing_words``); held or its
        answer lost: that wait stands, not charged where it says so, and the next try
        decides again. Where no clearing can go (unread known prices, a rule broken without
        it too), the quarantine says what Ozon still shows where that is known."""
        dependent = set(self.channel.dependent)
        refused = [
            item
            for item in items
            if not any(item is c for c in clears)
            and item.carried
            and item.new
            and item.new <= dependent
            and all(
                (said := answers.get(m.message_id)) is not None
                and said.verdict is Verdict.TERMINAL
                and said.error_class == "OzonPriceRule"
                for m in item.carried
            )
        ]
        if not refused:
            return
        try:
            latest = await asyncio.to_thread(self.known.latest, sorted({i.sku for i in refused}))
        except Exception:  # the service's database: Ozon's refusal stands as it was said
            return
        held: dict[str, list[KnownPrice]] = {}
        for price in latest:
            held.setdefault(price.sku, []).append(price)
        now = self.clock()
        going: list[Item] = []
        then: dict[str, tuple[Classification, Item, tuple[str, Decimal]]] = {}
        for item in refused:
            known = held.get(item.sku, [])
            shown = shown_dependent(item, self.channel, known)
            if shown is None:
                continue
            clear = clearing(item, self.channel, known, ozon_rule)
            if clear is None:
                for m in item.carried:
                    said = answers[m.message_id]
                    words = said.detail + still_shown_words(self.channel, *shown)
                    answers[m.message_id] = replace(said, detail=words)
                continue
            for m in item.carried:
                then[m.message_id] = (answers[m.message_id], clear, shown)
            free = self.hours.free_at(item.sku, now)
            wait: Classification | None = None
            if free is not None:
                after = self.hours.by_refusal(item.sku, free)
                wait = self._held(free - now, after_refusal=after)
            elif self._circle_until > now:
                blocked = 'held: Ozon answered "Circle is open" (the prices method is blocked)'
                wait = circle_held(blocked, self._circle_until - now)
            if wait is not None:
                # Ozon's refusal of the price still said first (review rev39 W3).
                for m in item.carried:
                    words = answers[m.message_id].detail + clearing_waits_words(
                        self.channel, clear, *shown, wait.detail
                    )
                    answers[m.message_id] = replace(wait, detail=words)
                continue
            going.append(clear)
        if not going:
            return
        tried: dict[str, Classification] = {}
        # Ozon may show no old price already (review rev39: an earlier "0" that the known
        # prices never hold, or a clearing whose answer was lost and that landed): read first,
        # and where it shows the clearing's prices, no identical update is sent (§1.3).
        read = await self._shown(going)
        for clear in going:
            if clear.sku in read:
                note = f"unchanged: Ozon shows {read[clear.sku]} already (read now), not sent"
                tried.update(spread(clear, Classification(Verdict.DELIVERED, note)))
        sending = [clear for clear in going if clear.sku not in read]
        for clear in sending:
            quarantine = then[clear.carried[0].message_id][0]
            self._ruled[clear.sku] = [c for c in RULES if f"{c}:" in quarantine.detail]
        try:
            await self._send_now(sending, now, tried)
        finally:
            for clear in sending:
                self._ruled.pop(clear.sku, None)
        for item in going:
            for m in item.carried:
                said = tried.get(m.message_id)
                quarantine, clear, shown = then[m.message_id]
                if said is None:
                    continue
                if said.verdict is Verdict.DELIVERED:
                    words = quarantine.detail + cleared_words(self.channel, clear, *shown)
                    answers[m.message_id] = replace(quarantine, detail=words)
                elif said.verdict is Verdict.TERMINAL:
                    words = (
                        quarantine.detail
                        + still_shown_words(self.channel, *shown)
                        + refused_clearing_words(self.channel, clear, said.detail)
                    )
                    answers[m.message_id] = replace(quarantine, detail=words)
                elif said.verdict not in WAITS:
                    answers[m.message_id] = said  # a pause (the key), said as it is
                else:
                    # Held, or its answer lost (Ozon may still apply it): that wait, with
                    # Ozon's refusal of the price still said first (review rev39 W3: only
                    # "HTTP 500" was said, and nowhere that Ozon had refused the old price).
                    words = quarantine.detail + clearing_waits_words(
                        self.channel, clear, *shown, said.detail
                    )
                    answers[m.message_id] = replace(said, detail=words)

    @staticmethod
    def _clears(built: Built, answers: dict[str, Classification]) -> list[Item]:
        """The items of ``built.clears`` to send (``items._clearing`` decides which): Ozon
        shows the old price 1C replaced by one quarantined beside the delivered price (1000
        with 1400 where 1C now says 1020, alone, a gap under Ozon's 5 %, research §1.1), and a
        strikethrough price 1C no longer states is a false discount; the known price goes
        with old_price "0" (§1.1, §1.6.3: "0" removes it), carrying the quarantined price,
        which is quarantined once Ozon took the item (``_cleared``). Each goes as any item:
        held by the product's hour (§1.3), "Circle is open", a lost send, not charged and
        waiting, its quarantine decided again at its next try. Not where another item of its
        SKU goes in this batch (one item a product a request)."""
        going = {item.sku for item in built.items}
        return [
            item
            for item, _ in built.clears
            if item.sku not in going
            and all(
                (said := answers.get(m.message_id)) is not None and said.verdict is Verdict.TERMINAL
                for m in item.carried
            )
        ]

    async def _cleared(
        self, built: Built, clears: list[Item], answers: dict[str, Classification]
    ) -> None:
        """The verdicts of the prices the clearing items carried (``_clears``): taken by Ozon
        (``updated``), or shown already (read: no request), their quarantine (``Built.clears``,
        never delivered: 1C's price never went); refused otherwise (a rule, the offer), the
        quarantine as it was without a clearing, which says Ozon still shows the old price;
        any wait (the hour, "Circle is open", a lost send, a retry) stands, not charged where
        it says so, and the next try decides again, its words after the rule the price broke
        (``_clearing_waits``). Taken in a request, the quarantine keeps the send's mark as its
        receipt (``SentTimes.reserve``): Ozon counted the update in the product's hour, and
        the database's count of it reads the mark."""
        then = {m.message_id: t for c, t in built.clears for m in c.carried}
        waiting: list[Item] = []
        for item in clears:
            for m in item.carried:
                said = answers[m.message_id]
                if said.verdict is Verdict.DELIVERED:
                    sent = said.http_status == 200
                    quarantine = then[m.message_id]
                    answers[m.message_id] = replace(
                        quarantine, receipt=None if sent else quarantine.receipt
                    )
                elif said.verdict is Verdict.TERMINAL:
                    # Ozon's refusal of the clearing said too, its code and meaning (review
                    # ozwords38 item 4: only "still shows" was said, never why).
                    quarantine = built.answers[m.message_id]
                    why = refused_clearing_words(self.channel, item, said.detail)
                    answers[m.message_id] = replace(quarantine, detail=quarantine.detail + why)
                elif said.verdict in WAITS and not any(item is w for w in waiting):
                    waiting.append(item)
        if waiting:
            await self._clearing_waits(built, waiting, answers)

    async def _clearing_waits(
        self, built: Built, items: list[Item], answers: dict[str, Classification]
    ) -> None:
        """The waits of clearing items (``_cleared``: held by the hour or "Circle is open",
        or a lost send's), said after the rule the price they carry broke and what the
        clearing is for (``clearing_waits_words``), as where Ozon refused it (review rev39 W3:
        "HTTP 500", then "Ozon may still apply the send of old_price 0", the rule said
        nowhere). The old price Ozon shows is read from the known prices, as ``build`` read
        it; unread, the wait's words stand as they are."""
        try:
            latest = await asyncio.to_thread(self.known.latest, sorted({i.sku for i in items}))
        except Exception:  # the service's database: the wait stands as it was said
            return
        held: dict[str, list[KnownPrice]] = {}
        for price in latest:
            held.setdefault(price.sku, []).append(price)
        for item in items:
            shown = shown_dependent(item, self.channel, held.get(item.sku, []))
            if shown is None:
                continue
            still = still_shown_words(self.channel, *shown)
            for m in item.carried:
                said = answers[m.message_id]
                if said.verdict not in WAITS:
                    continue
                rule = built.answers[m.message_id].detail.removesuffix(still)
                words = rule + clearing_waits_words(self.channel, item, *shown, said.detail)
                answers[m.message_id] = replace(said, detail=words)

    async def _send_now(
        self, items: list[Item], now: float, answers: dict[str, Classification]
    ) -> None:
        going = await self._reserve(items, now, answers)
        if going:
            await self._import(going, answers)

    async def _first_after_circle(
        self, items: list[Item], now: float, answers: dict[str, Classification]
    ) -> None:
        """The first request after a "Circle is open" wait ended (no request answered since):
        §1.3, the method "starts working as usual in a few minutes", a moment no one is told,
        and every request still held for it is due at the wait's end, read alike by every
        worker of the account (``SharedHold``) and by every request of a batch: each would
        leave at once (two requests 0.17 s apart, review ozonleft35 item 2), and a method
        still blocked would be met by all. One goes first: this process's requests one at a
        time, the account's workers one at a time (``circle_turn``); the others wait for its
        answer, held (``PROBE_WAIT``, not charged) where another worker's request is out. Met
        by "Circle is open" again, the wait starts over (``_circle``); answered otherwise, the
        rest go."""
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn[0] is not loop:
            self._turn = (loop, asyncio.Lock())
        async with self._turn[1]:
            if self._circle_until <= self._answered_past:
                await self._send_now(items, now, answers)  # answered while this one waited
                return
            await self._circle_heard()
            now = self.clock()
            left = self._circle_until - now
            taken = left <= 0 and await self._take_turn()
            if not taken:
                said = 'held: Ozon answered "Circle is open" (the prices method is blocked)'
                held = circle_held(said, left if left > 0 else PROBE_WAIT)
                for item in items:
                    answers.update(spread(item, held))
                return
            try:
                await self._send_now(items, now, answers)
            finally:
                try:
                    await asyncio.to_thread(self.circle_turn.release)
                except Exception:  # the service's database: the turn ends by itself
                    log.warning('Ozon: the turn after "Circle is open" could not be given back')

    async def _take_turn(self) -> bool:
        """The account's turn to send first after "Circle is open" (``circle_turn``); the
        database unreachable, this process's own turn (the send's record fails the same)."""
        try:
            return await asyncio.to_thread(self.circle_turn.acquire, self._turn_seconds)
        except Exception:  # the service's database
            return True

    async def health(self) -> Classification:
        """``/v1/roles`` with the key. While Ozon refuses the key, asked again once every
        ``probe_every`` seconds, or at once when the key (its file) changed: between, Ozon's
        last answer stands (research §1.3: Ozon may restrict a sender of erroneous requests
        without warning, and a worker's pause asks for its health every cycle)."""
        now = self.clock()
        last = self._key_refused
        if last is not None and last[1] == self._key and now < last[0] + self.probe_every:
            return last[2]
        self._key_refused = None
        key = self._key
        try:
            response = await self._post(ROLES, {})
        except _Stop as stop:
            return stop.classification
        if response.status_code != 200:
            answer = refusal(response.status_code, response.content, None)
            if answer.error_class in KEY_PAUSES:
                self._key_refused = (now, key, answer)
            return answer
        return Classification(Verdict.DELIVERED, "Ozon: /v1/roles answered", http_status=200)

    def reload_credentials(self) -> bool:
        before, self._key = self._key, self._key_source()
        return self._key != before

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- exchange check --------------------------------------------------------------------

    async def roles(self) -> Roles | Classification:
        """The key's roles (``/v1/roles``), or why they could not be read."""
        try:
            response = await self._post(ROLES, {})
        except _Stop as stop:
            return stop.classification
        if response.status_code != 200:
            return refusal(response.status_code, response.content, None)
        try:
            body = response.json()
            roles = body.get("roles") or []
            methods = {m for role in roles for m in role.get("methods") or []}
            names = [str(role.get("name")) for role in roles]
            expires = body.get("expires_at")
        except (ValueError, AttributeError, TypeError):
            return Classification(Verdict.UNKNOWN, "Ozon: /v1/roles answered no roles")
        return Roles(
            IMPORT_PRICES in methods,
            INFO_PRICES in methods,
            str(expires) if expires else None,
            names,
        )

    async def offers(self, offer_ids: Sequence[str]) -> dict[str, dict[str, Any]] | Classification:
        """What Ozon holds for these offer_ids (``/v5/product/info/prices``), by offer_id; a
        missing one is not in the seller's account."""
        found: dict[str, dict[str, Any]] = {}
        wanted = list(dict.fromkeys(offer_ids))
        for start in range(0, len(wanted), MAX_ITEMS):
            part = wanted[start : start + MAX_ITEMS]
            cursor = ""
            while True:
                body = {"filter": {"offer_id": part}, "limit": MAX_ITEMS, "cursor": cursor}
                try:
                    response = await self._post(INFO_PRICES, body)
                except _Stop as stop:
                    return stop.classification
                if response.status_code != 200:
                    return refusal(response.status_code, response.content, None)
                try:
                    page = response.json()
                    for entry in page.get("items") or []:
                        found[str(entry.get("offer_id"))] = entry
                    cursor = str(page.get("cursor") or "")
                except (ValueError, AttributeError, TypeError):
                    return Classification(Verdict.UNKNOWN, "Ozon: the read-back is unreadable")
                if not cursor:
                    break
        return found

    async def read_prices(self, messages: Sequence[OutgoingMessage]) -> list[HeldPrice]:
        """``exchange verify`` (ReadsPrices): what Ozon shows now for each delivered message's
        field. Ozon's own promotions and strategies may change a price after it was set
        (research §1.6.5): a difference is what verify reports."""
        mapped: list[tuple[OutgoingMessage, str | None, str | None, Decimal | None]] = []
        skus = [s for s in (sku_of(m) for m in messages) if s is not None]
        articles: dict[str, str] = {}
        if self.channel.sku_source == "article":
            articles = await asyncio.to_thread(self.articles.of, skus)
        for message in messages:
            price = read_price(
                message, target="ozon", mapping=self.channel.price_types, setting="ozon"
            )
            if isinstance(price, Classification):
                mapped.append((message, None, None, None))
                continue
            offer = articles.get(price.sku) if self.channel.sku_source == "article" else price.sku
            mapped.append((message, offer, price.mapped, price.amount))
        found = await self.offers([o for _, o, _, _ in mapped if o])
        if isinstance(found, Classification):
            raise ReadBackFailed(found.detail)
        held: list[HeldPrice] = []
        for message, offer, field, sent in mapped:
            sku = sku_of(message) or ""
            if offer is None or field is None:
                held.append(HeldPrice(message.message_id, sku, "", sent, None, True, "not mapped"))
                continue
            entry = found.get(offer)
            if entry is None:
                held.append(HeldPrice(message.message_id, sku, field, sent, None, found=False))
                continue
            shown = _money(entry, field)
            if shown is None and sent == 0:
                shown = sent  # 1C's old price 0 cleared Ozon's (§1.1): none is what it sent
            elif shown is None and sent is not None and field in self.channel.struck:
                live = _money(entry, "price")
                if live is not None and sent <= live:
                    # An old price not above the price is no discount (``items._no_discount``:
                    # the price went with old_price "0"): none shown is what 1C states.
                    shown = sent
            held.append(HeldPrice(message.message_id, sku, field, sent, shown, True))
        return held

    # -- one request -----------------------------------------------------------------------

    async def _seed(self, skus: list[str], now: float) -> None:
        """The accepted sends of these SKUs within the last hour, every worker's, read from
        the database right before they go: what Ozon counted against the hour is every
        sender's, so a count of this process's own sends lets two workers send the 11th
        (review ozon 33). The database's times replace this process's count (its own sends
        are in them, recorded before the next claim); unreadable, its own count stands."""
        wanted = sorted(set(skus))
        if not wanted or self.sent is NO_SENT_TIMES:
            return
        since = datetime.fromtimestamp(now - self.hours.hour, UTC)
        try:
            found = await asyncio.to_thread(self.sent.since, wanted, since)
        except Exception:
            return
        for sku in wanted:
            self.hours.recount(sku, found.get(sku, ()))

    async def _reserve(
        self, items: list[Item], now: float, answers: dict[str, Classification]
    ) -> list[Item]:
        """The items that may go: each product's slot of the hour taken in the database
        before its request leaves (``SentTimes.reserve``: counted and marked one worker at a
        time, the mark committed), so that at most 10 updates of a product leave within the
        hour across workers (review 32: two workers each read 9 sends and both sent). A
        product whose hour is full is held as by this process's own count; under
        ``sku_source = article``, a SKU whose offer_id another worker sent another SKU to
        meanwhile is ``invalid-for-channel`` as in one batch (one offer at a time across
        workers, as Wildberries and Yandex Market check at their marks: issue 32); when the
        database cannot take the mark, the item is not sent (a send it could not count is
        never made). Without a database: all of them (this process's count only)."""
        if not items or self.sent is NO_SENT_TIMES:
            return items
        mark = sending_receipt(now)
        wanted = {item.sku: [m.message_id for m in item.carried] for item in items}
        since = datetime.fromtimestamp(now - self.hours.hour, UTC)
        by_article = self.channel.sku_source == "article"
        goods = {item.sku: item.offer_id for item in items} if by_article else None
        try:
            full, lost = await asyncio.to_thread(
                self.sent.reserve,
                wanted,
                mark,
                since,
                self.hours.limit,
                SENDING,
                goods,
                self.one_sku.prefixes,
                by_article=by_article,
                priced={item.sku: late.pairs(_sets(item)) for item in items},
            )
        except Exception as exc:  # the service's database
            failed = Classification(
                Verdict.TEMPORARY,
                f"the send could not be recorded before it left ({type(exc).__name__}): not "
                "sent, sent again later",
                error_class="SendNotRecorded",
            )
            for item in items:
                answers.update(spread(item, failed))
            return []
        going: list[Item] = []
        for item in items:
            other = lost.get(item.sku)
            if other is not None:
                # Another worker sent another SKU to the offer after this one read its holders
                # (``send``'s split): the same answer as in one batch (issue 32).
                self.one_sku.lost(item.offer_id, other)
                said = shared_article(other, item.sku, item.offer_id, "Ozon")
                answers.update(spread(item, invalid(said)))
                continue
            times = full.get(item.sku)
            if times is None:
                self._marks[item.sku] = mark
                going.append(item)
                continue
            self.hours.recount(item.sku, times)
            free = self.hours.free_at(item.sku, now)
            answers.update(spread(item, self._held((free or now + 1.0) - now)))
        return going

    async def _lose(
        self, items: list[Item], at: float, marks: dict[str, str] | None = None
    ) -> None:
        """A send of ``items`` (left at ``at``) whose answer was lost: Ozon may still apply
        it, after a newer one (§1.5). Each product's lost prices (the fields its messages set)
        go in its deliveries' receipts after the send's mark (``SentTimes.lost``), committed
        before the attempt is recorded, so that the product's next claim, any worker's, waits
        for them (``_late``). ``marks``: the sends' marks, where the answer has taken them
        already (a 5xx). Best effort: unwritten, this process's memory keeps them."""
        for item in items:
            word = late.token(LOST, late.LostSend(at, _sets(item)))
            ruled = self._ruled.get(item.sku)
            if ruled:
                # A clearing carrying a price Ozon refused by its rule: the refusal's codes,
                # so that the later tries' waits still say it (``_refused_before``).
                word += f" {RULED}{','.join(ruled)}"
            mark = (self._marks if marks is None else marks).get(item.sku)
            if self.sent is NO_SENT_TIMES or mark is None:
                self._lost_here[item.sku] = word
                continue
            try:
                await asyncio.to_thread(
                    self.sent.lost, [m.message_id for m in item.carried], mark, word
                )
            except Exception as exc:  # the service's database
                log.warning("Ozon: a lost send could not be recorded (%s)", type(exc).__name__)
                self._lost_here[item.sku] = word

    async def _answered(self, items: list[Item], marks: dict[str, str]) -> None:
        """Ozon answered the send of ``items`` (any HTTP answer): their marks lose their prices
        (``SentTimes.answered``), so that the product's next send never takes it for one
        whose worker died before the answer (``_lost_pending``: a priced mark still first).
        Best effort: left, the next send only waits for Ozon to show the prices (``_late``)."""
        if self.sent is NO_SENT_TIMES:
            return
        by_mark: dict[str, dict[str, str]] = {}
        for item in items:
            mark = marks.get(item.sku)
            if mark is not None:
                sets = late.pairs(_sets(item))
                by_mark.setdefault(mark, {}).update((m.message_id, sets) for m in item.carried)
        for mark, priced in by_mark.items():  # one mark a request
            try:
                await asyncio.to_thread(self.sent.answered, priced, mark)
            except Exception as exc:  # the service's database
                log.warning("Ozon: an answered send could not be recorded (%s)", type(exc).__name__)

    async def _late(
        self, items: list[Item], now: float, answers: dict[str, Classification]
    ) -> list[Item]:
        """The items that may go, of a product whose last send's answer was lost (``_lose``,
        within ``lost_hold`` of it): Ozon may still apply that send, and over this one (§1.5:
        no order between two racing updates; contract 13: never a version at or below the one
        delivered over a newer one). Ozon's prices are read (``offers``, one read for them
        all, within the pace): showing the lost prices, the item, when Ozon shows every price
        it carries, is delivered without a request (§1.3: identical requests may get the
        account restricted), and one setting every lost price alike goes; a newer one waits
        until ``lost_hold`` from the lost send, its word kept: the prices shown may be another
        sender's, and the lost send may still apply after it (review ozlost38 H4). Otherwise
        the item waits (``AWAITING``, not charged) and reads again in ``lost_every`` seconds;
        past ``lost_hold`` the lost send is taken for never applied, and the item goes."""
        if not items:
            return items
        pending = await self._lost_pending(sorted({item.sku for item in items}), now)
        if not pending:
            return items
        waiting = [item for item in items if item.sku in pending]
        found = await self.offers([item.offer_id for item in waiting])
        going = [item for item in items if item.sku not in pending]
        for item in waiting:
            lost, _words = pending[item.sku]
            if isinstance(found, Classification):
                why = f"its prices could not be read ({found.detail[:200]})"
                answers.update(
                    spread(
                        item,
                        late.waits("Ozon", lost, why, now, self.lost_hold, self.lost_every),
                    )
                )
                continue
            entry = found.get(item.offer_id)
            shown = {f: _money(entry, f) for f in MONEY} if entry is not None else {}
            if not late.shows(lost, shown):
                seen = {f: shown.get(f) for f in lost.prices}
                what = (
                    f"Ozon does not list offer_id {item.offer_id!r}"
                    if entry is None
                    # A product never priced (Ozon's "0", ``_money``): no price yet, never
                    # "price 0" (review words34).
                    else "Ozon shows no price yet"
                    if all(amount is None for amount in seen.values())
                    else f"Ozon shows {late.said(seen)}"
                )
                answers.update(
                    spread(
                        item,
                        late.waits("Ozon", lost, what, now, self.lost_hold, self.lost_every),
                    )
                )
                continue
            if late.shows(late.LostSend(now, dict(item.prices)), shown):
                answers.update(
                    spread(
                        item,
                        Classification(
                            Verdict.DELIVERED,
                            f"Ozon shows {late.said(item.prices)}: the send whose answer was "
                            "lost has landed; not sent again",
                        ),
                    )
                )
                continue
            if all(item.prices.get(f) == amount for f, amount in lost.prices.items()):
                # The item sets every price the lost send set, alike: landing after it, the
                # lost send changes nothing it sets.
                going.append(item)
                continue
            # Shown, the lost prices may be another sender's (review ozlost38 H4: another
            # program set 800 in Ozon, 1C's 800 went and its answer was lost): the lost send
            # may still apply, so a newer price waits until the bound, the lost word kept.
            answers.update(spread(item, late.holds("Ozon", lost, now, self.lost_hold)))
        return going

    async def _lost_pending(
        self, skus: list[str], now: float
    ) -> dict[str, tuple[late.LostSend, list[str]]]:
        """The SKUs of ``skus`` whose send's answer was lost within ``lost_hold`` (any channel's
        of the account: ``SentTimes.lost_since``; this process's memory without a database),
        each with its newest lost send and the words of every one (``_late``)."""
        since = now - self.lost_hold
        receipts: dict[str, list[str]] = {}
        if self.sent is not NO_SENT_TIMES:
            try:
                receipts = await asyncio.to_thread(
                    self.sent.lost_since,
                    skus,
                    datetime.fromtimestamp(since, UTC),
                    LOST,
                    SENDING,
                    now=datetime.fromtimestamp(now, UTC),
                )
            except Exception:  # the service's database: this process's memory only
                receipts = {}
        for sku in skus:
            if sku in self._lost_here:
                receipts.setdefault(sku, []).append(self._lost_here[sku])
        pending: dict[str, tuple[late.LostSend, list[str]]] = {}
        for sku, held in receipts.items():
            words = late.tokens(LOST, held)
            sends = [(s, w) for w in words if (s := late.read_token(LOST, w)) and s.at >= since]
            if sends:
                newest = max(sends, key=lambda pair: pair[0].at)[0]
                pending[sku] = (newest, [w for _, w in sends])
        return pending

    async def _circle(self, now: float) -> None:
        """Ozon answered "Circle is open" at ``now`` (§1.3: the method blocked for a few
        minutes): no request of this process for CIRCLE_SECONDS, nor of another worker of the
        account (``SharedHold``: each reads it before its next request). Best effort: the
        database unwritten, the others hear it from Ozon themselves."""
        self._circle_until = max(self._circle_until, now + CIRCLE_SECONDS)
        until = datetime.fromtimestamp(self._circle_until, UTC)
        try:
            await asyncio.to_thread(self.circle.hold, until)
        except Exception as exc:  # the service's database
            log.warning(
                'Ozon: "Circle is open" could not be told to the other workers (%s)',
                type(exc).__name__,
            )

    async def _circle_heard(self) -> None:
        """ "Circle is open" as another worker of the account heard it (``SharedHold``), read
        before a request: this process waits it out too. Unreadable, its own stands."""
        try:
            until = await asyncio.to_thread(self.circle.until)
        except Exception:  # the service's database
            return
        if until is not None:
            self._circle_until = max(self._circle_until, until.timestamp())

    async def _unmark(self, items: list[Item]) -> None:
        """Items whose request never left (no key, no connection made): their marks
        (``_reserve``) are taken back, so they do not count against the hour. Best effort:
        left, a mark only errs on the side of waiting."""
        by_mark: dict[str, dict[str, str | None]] = {}
        for item in items:
            mark = self._marks.pop(item.sku, None)
            if mark is not None:
                by_mark.setdefault(mark, {}).update((m.message_id, m.receipt) for m in item.carried)
        for mark, receipts in by_mark.items():  # one mark a request
            try:
                await asyncio.to_thread(self.sent.unmark, receipts, mark)
            except Exception:  # the service's database
                continue

    async def _refusals(self, skus: list[str], now: float) -> None:
        """Ozon's refusals of these SKUs for the hourly limit within the last hour and a bit,
        read at every send: another worker's (or this one's before a restart) hold the product
        as this process's own do; unreadable, this process's own are what it has."""
        if not skus:
            return
        since = datetime.fromtimestamp(now - self.hours.after_refusal, UTC)
        try:
            found = await asyncio.to_thread(self.sent.receipts_since, skus, since, REFUSED)
        except Exception:
            return
        for sku, receipts in found.items():
            for at in filter(None, map(refused_at, receipts)):
                self.hours.refused(sku, at)
            self.hours.free_at(sku, now)  # a wait already over is forgotten

    async def _unchanged(self, items: list[Item]) -> tuple[set[str], set[str]]:
        """The SKUs whose every field is what Ozon holds: delivered without a request where
        Ozon shows it (``_shown``); and those the channel has no price of yet, delivered or
        taken by this process (its first send: a channel added, or dropped and added again
        under its name, and seeded), read as well, with a database only (the channel's
        delivered prices: without them every send would be a first one). What
        Ozon holds is, field by field, the newest (by version) of the channel's delivered
        prices (any worker's) and of what Ozon took from this process (``_accepted``: a price
        it took that the delivered prices may not hold yet). A price this process saw taken
        never stands over a newer one delivered since, by another worker too (review 32c:
        worker 1 remembered 100, worker 2 delivered 200, and 1C's 100 again was answered
        "unchanged" without a request while Ozon showed 200); nor where the delivered prices
        leave the price out (another worker's later send whose outcome is unknown, or the
        database unread): with them, this process's memory only adds a version they do not
        hold yet. Without them (``exchange check``, the tests), it is all there is."""
        same: set[str] = set()
        first: set[str] = set()
        alone = self.delivered is NO_KNOWN_PRICES  # no channel's delivered prices to read
        delivered: dict[str, dict[str, tuple[Decimal, int]]] = {}
        if items:
            try:
                held = await asyncio.to_thread(self.delivered.latest, [i.sku for i in items])
            except Exception:
                held = []
            for price in held:
                field = self.channel.price_types.get(price.price_type)
                if field is not None and price.currency == self.channel.currency:
                    fields = delivered.setdefault(price.sku, {})
                    if field not in fields or fields[field][1] < price.version:
                        fields[field] = (price.amount, price.version)
        for item in items:
            holds = dict(delivered.get(item.sku, {}))
            for field, (amount, version) in self._accepted.get(item.offer_id, {}).items():
                known = holds.get(field)
                if known is None and not alone:
                    continue  # left out by the delivered prices: unknown, not this memory's
                if known is None or version >= known[1]:
                    holds[field] = (amount, version)
            if holds and all(
                field in holds and holds[field][0] == amount
                for field, amount in item.prices.items()
            ):
                same.add(item.sku)
            elif not alone and item.sku not in delivered and item.offer_id not in self._accepted:
                first.add(item.sku)
        return same, first

    async def _shown(self, items: list[Item]) -> dict[str, str]:
        """Of the items whose prices equal the delivered ones, or that the channel sends for
        the first time (``_unchanged``), those whose prices Ozon shows now (SKU -> the prices
        in words), read with one request for the batch (``_prices_of``: up to 1,000 offer_ids
        a request, §1.4, within the pace): a price set in
        the seller's cabinet, or by Ozon's strategies (§1.6.5), since the last delivery
        differs from 1C's, and 1C's price goes (review ozon34 finding 2: 1C's 500 again was
        "not sent again" while Ozon showed the cabinet's 777). Unread (Ozon refused or did
        not answer the read), none: the price goes, counted as any send. A send of 1C's price
        is never wrong, and the import answers for itself (a refused key pauses, a 5xx
        waits); a wait on the read could hold 1C's price for as long as the read fails,
        while only the hour's count (10 updates, every send's) bounds the sends."""
        if not items:
            return {}
        found, failed = await self._prices_of(items)
        if failed is not None:
            log.info("Ozon: prices not read before a send (%s)", failed[:200])
        same: dict[str, str] = {}
        for item in items:
            entry = found.get(item.offer_id)
            if entry is None:
                continue
            held = {f: _money(entry, f) for f in MONEY}
            if late.shows(late.LostSend(0.0, dict(item.prices)), held):
                same[item.sku] = late.said(item.prices)
        return same

    async def _prices_of(self, items: list[Item]) -> tuple[dict[str, dict[str, Any]], str | None]:
        """Ozon's prices of the items' offers (``offers``' entries by offer_id; one not listed
        or not read: absent), and why a read failed, if one did. One read serves the worker's
        batch: its requests (``requests``: ``max_items`` SKUs each) are sent apart, and a read
        of one request's offers takes the batch's others not asked yet along, up to 1,000
        offer_ids a read (§1.4), so that a batch of 1,000 SKUs in requests of 40 reads once,
        not 25 times (each read is one of Ozon's 50 requests a second, §1.3). A request whose
        offers are being read waits for that read; each entry serves one send, within
        ``READ_FRESH`` seconds of its read, and is forgotten once its offer is sent
        (``_import``)."""
        loop = asyncio.get_running_loop()
        fresh = self._monotonic() - READ_FRESH
        offers = [item.offer_id for item in items]
        for item in items:
            self._ahead.pop(item.sku, None)  # asked now: no later read takes it along
        missing: list[str] = []
        waits: set[asyncio.Future[str | None]] = set()
        for offer in dict.fromkeys(offers):
            got = self._read.get(offer)
            if got is not None and got[0] >= fresh:
                continue
            reading = self._reading.get(offer)
            if reading is not None and reading.get_loop() is loop and not reading.done():
                waits.add(reading)
                continue
            missing.append(offer)
        if missing:
            wanted = missing + await self._ahead_offers(missing, fresh)
            task = loop.create_task(self._read_into(wanted))
            for offer in wanted:
                self._reading[offer] = task
            waits.add(task)
        failed: str | None = None
        for reading in waits:
            failed = await reading or failed
        found: dict[str, dict[str, Any]] = {}
        for offer in dict.fromkeys(offers):
            got = self._read.pop(offer, None)
            if got is not None and got[1] is not None and got[0] >= fresh:
                found[offer] = got[1]
        return found, failed

    async def _ahead_offers(self, asked: list[str], fresh: float) -> list[str]:
        """The batch's other offers (``requests``) a read of ``asked`` takes along: not read
        since ``fresh``, nor being read, as many as fill its last 1,000 (never another
        request)."""
        room = -len(asked) % MAX_ITEMS
        if not room or not self._ahead:
            return []
        skus = list(self._ahead)
        if self.channel.sku_source == "article":
            try:
                articles = await asyncio.to_thread(self.articles.of, skus)
            except Exception:  # the service's database: this request's offers only
                return []
            offers = [articles[sku] for sku in skus if articles.get(sku)]
        else:
            offers = skus
        taken = set(asked)
        more: list[str] = []
        for offer in offers:
            got = self._read.get(offer)
            reading = self._reading.get(offer)
            if (
                offer in taken
                or (got is not None and got[0] >= fresh)
                or (reading is not None and not reading.done())
            ):
                continue
            taken.add(offer)
            more.append(offer)
            if len(more) == room:
                break
        return more

    async def _read_into(self, offers: list[str]) -> str | None:
        """``offers``' prices read (``offers``) into ``_read``; why not, if the read failed."""
        try:
            found = await self.offers(offers)
        finally:
            me = asyncio.current_task()
            for offer in offers:
                if self._reading.get(offer) is me:
                    del self._reading[offer]
        if isinstance(found, Classification):
            return found.detail
        at = self._monotonic()
        for offer in offers:
            self._read[offer] = (at, found.get(offer))
        return None

    def _held(
        self, seconds: float, *, refused: bool = False, after_refusal: bool = False
    ) -> Classification:
        """``refused``: Ozon refused this very item for its hourly limit; ``after_refusal``:
        held, not sent, because Ozon refused an earlier update of the product (its count of
        every sender's updates, not this service's sends); neither: held by this target's own
        count of its sends within the hour."""
        wait = max(1, math.ceil(seconds))
        # Ozon's refusal in Ozon's terms (its hourly limit, as its message names it: never a
        # number it did not say), and "held:" as every hold of the hour reads, whichever
        # message Ozon wrapped it in (review ozon 34b).
        if refused:
            said = (
                "held: Ozon refused an update of this product for its hourly limit (error "
                f"limiting: acquire limit per item); tried once more in {wait} s, not charged"
            )
        elif after_refusal:
            said = (
                "held: Ozon refused an update of this product for its hourly limit (Ozon counts "
                f"every sender's updates); goes in {wait} s, not charged"
            )
        else:
            said = (
                "held: 10 price updates of this product sent within the hour (Ozon's limit); "
                f"goes in {wait} s, not charged"
            )
        return Classification(Verdict.AWAITING, said, again_in=float(wait), error_class=OZON_HOUR)

    def _wire(self, item: Item) -> dict[str, Any]:
        entry: dict[str, Any] = {"offer_id": item.offer_id}
        for field in ("price", "old_price", "min_price"):
            if field in item.prices:
                entry[field] = text(item.prices[field])
        entry["currency_code"] = self.channel.currency
        return entry

    async def _import(
        self,
        items: list[Item],
        answers: dict[str, Classification],
        splits: list[int] | None = None,
    ) -> None:
        """Send the items; ``splits``: the requests the halving of a refused one may still
        add (``SPLITS``, shared by the halves)."""
        splits = [SPLITS] if splits is None else splits
        for item in items:
            # Once a send goes out, what Ozon holds is known again only from its ``updated``
            # (a timeout or a cut-off request may or may not have landed: contract 14).
            self._accepted.pop(item.offer_id, None)
            self._read.pop(item.offer_id, None)  # read before: no longer what Ozon shows
        sent_at = self.clock()
        circle_before = self._circle_until  # the wait this request goes after, if any
        try:
            response = await self._post(IMPORT_PRICES, {"prices": [self._wire(i) for i in items]})
        except _Stop as stop:
            for item in items:
                answers.update(spread(item, stop.classification))
            said = stop.classification
            if not said.result_unknown and said.http_status is None:
                await self._unmark(items)  # never left: Ozon counted nothing
            if said.result_unknown:
                await self._lose(items, sent_at)  # it may still land: the next send waits
            for item in items:
                self._marks.pop(item.sku, None)  # it may have left: its mark counts
            return
        marks = {i.sku: m for i in items if (m := self._marks.pop(i.sku, None)) is not None}
        await self._answered(items, marks)
        now = self.clock()
        if response.status_code != 200:
            judged = refusal(
                response.status_code, response.content, response.headers.get("Retry-After")
            )
            if judged.error_class == CIRCLE:
                await self._circle(now)
            else:  # answered, not "Circle is open": the wait before it is over
                self._answered_past = max(self._answered_past, circle_before)
            if judged.error_class != CIRCLE and 500 <= response.status_code < 600:
                # A 5xx (Ozon's "Internal error", a gateway's timeout page) says nothing of
                # whether Ozon applied the import: a gateway may hand it on after it gave up,
                # a server may fail after taking it (an HTTP fact, not Ozon's word), and a
                # later send has no order before it (§1.5). As a lost answer: the product's
                # next send waits for Ozon to show it (``_late``); classified as before.
                judged.result_unknown = True
                await self._lose(items, sent_at, marks)
            if judged.verdict is Verdict.TERMINAL and len(items) > 1 and splits[0] >= 2:
                # The request refused whole (a 400 of no words this target reads): halves sent
                # apart find the item it refuses and send the others, within SPLITS; an item
                # refused alone, or past the bound, ends with the 400.
                splits[0] -= 2
                half = len(items) // 2
                await self._import(items[:half], answers, splits)
                await self._import(items[half:], answers, splits)
                return
            for item in items:
                answers.update(spread(item, judged))
            return
        try:
            body = response.json()
        except ValueError:
            body = None
        if circle_in(body):
            # "Circle is open" inside a 200 (its status is UNCONFIRMED, §8): the same wait as
            # whatever other status it comes with (refusal reads its words first).
            await self._circle(now)
            held = refusal(200, response.content, None)
            for item in items:
                answers.update(spread(item, held))
            return
        self._answered_past = max(self._answered_past, circle_before)
        results = body.get("result") if isinstance(body, dict) else None
        if not isinstance(results, list):
            unknown = Classification(
                Verdict.UNKNOWN, "Ozon: a 200 without a result per item", http_status=200
            )
            for item in items:
                answers.update(spread(item, unknown))
            return
        own_old: list[tuple[Item, Classification]] = []
        for item, result in zip(items, matched(items, results), strict=True):
            if result is None:
                # §1.4: one result per item; Ozon gave none for this one, so whether it took
                # the price is unknown: a person looks (never guessed, never sent blind again:
                # each send counts against the product's 10 an hour, §1.5).
                answers.update(
                    spread(
                        item,
                        Classification(
                            Verdict.UNKNOWN,
                            f"Ozon gave no answer for offer_id {item.offer_id!r} in its 200 "
                            "(its result holds none): whether Ozon took the price is unknown",
                            http_status=200,
                        ),
                    )
                )
                continue
            answer = item_answer(result)
            verdict = answer.verdict
            if answer.updated:
                self.hours.charge(item.sku, now)
                took = self._accepted.setdefault(item.offer_id, {})
                for field, amount in item.prices.items():
                    took[field] = (amount, item.versions.get(field, 0))
            elif answer.limited:
                until = self.hours.refused(item.sku, now)
                verdict = self._held(until - now, refused=True)
                verdict.http_status = 200
                verdict.receipt = refused_receipt(now)
            elif answer.rule_fields == {"old_price"} and "old_price" not in item.prices:
                # The old price Ozon compares is its own, set outside 1C (the seller's cabinet):
                # named, with the way out, once Ozon's prices are read (``_own_old_price``).
                own_old.append((item, verdict))
                continue
            elif answer.rule_fields:
                # A rule of two price types: only the dependent price new in the item takes
                # it, the price goes again without it (contract 14, issue 32).
                answers.update(spread_rule(item, self.channel, verdict, answer.rule_fields))
                continue
            answers.update(spread(item, verdict))
        if own_old:
            await self._own_old_price(own_old, answers)

    async def _own_old_price(
        self, refused: list[tuple[Item, Classification]], answers: dict[str, Classification]
    ) -> None:
        """Items refused by a rule of ``old_price`` that carried none (research §1.1, §1.4:
        ``old_price_less_than_price``, ``discount_*``): the old price is Ozon's own, set
        outside 1C (in the seller's cabinet), and no price from 1C alone passes it. Its words
        name that old price (one read of Ozon's prices for them all; unread, it is said
        unnamed) and the way out: send an old price from 1C, or clear it in the cabinet."""
        found = await self.offers([item.offer_id for item, _ in refused])
        mapped = [t for t, f in self.channel.price_types.items() if f == "old_price"]
        for item, verdict in refused:
            entry = found.get(item.offer_id) if isinstance(found, dict) else None
            old = _money(entry, "old_price") if entry is not None else None
            detail = own_old_price_words(verdict.detail, old, item.prices.get("price"), mapped)
            detail += pair_words(self.channel, set(item.fields_of.values()), None)
            answers.update(
                spread(
                    item,
                    Classification(
                        verdict.verdict,
                        detail,
                        http_status=verdict.http_status,
                        error_class=verdict.error_class,
                        reason=verdict.reason,
                        # Refused beside the old price Ozon holds: a new old price from 1C
                        # waits for a person's decision on it (``items``, ``PAIR_RULE``).
                        receipt=PAIR_RULE,
                    ),
                )
            )

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        key = self._key
        if not self.client_id or not key:
            raise _Stop(
                Classification(
                    Verdict.PAUSE,
                    "ozon_client_id or ozon_api_key_file is not set (or the file is empty)",
                    error_class=SETTING_MISSING,
                )
            )
        headers = {"Client-Id": self.client_id, "Api-Key": key}
        slot = self.rate.slot()  # Ozon's requests a second, counted from the answer (rate.py)
        try:
            response = await paced_request(
                self._http,
                self._pacer,
                "POST",
                path,
                ready=slot.take,
                json=body,
                headers=headers,
            )
        except httpx.TransportError as exc:
            failure = key_masked_failure(httpx_failure(exc), key)
            # Only the import applies anything; an import cut off is sent again (an absolute
            # write: the same prices land once more, counted against the hour by Ozon).
            raise _Stop(
                transport_verdict(
                    failure, step=path, result_unknown=failure.maybe_sent and path == IMPORT_PRICES
                )
            ) from None
        finally:
            slot.done()
        # Ozon's words, wherever they go (a detail, a log, a receipt), never hold the key.
        return key_masked(response, key)


class _Stop(Exception):
    def __init__(self, classification: Classification) -> None:
        super().__init__(classification.detail)
        self.classification = classification


def _money(entry: dict[str, Any], field: str) -> Decimal | None:
    """A read-back's money (§1.4: numbers in the reference's example, strings as well); None
    where Ozon holds no price of that type: absent, "" or zero. Ozon's "0" is its none: an
    old price "0" is no old price (§1.1: "0" clears it), and a product never priced reads
    price "0" (the simulator's too). No price 0 is one the service gave Ozon: the channel
    refuses a zero price and min_price (``Money``), so a zero read is never "Ozon shows
    price 0" (review words34), and a lost send of price X is not shown by it (``late.shows``)."""
    value = (entry.get("price") or {}).get(field)
    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return None if amount == 0 else amount


def _sets(item: Item) -> dict[str, Decimal]:
    """The prices a send of ``item`` sets that Ozon may still apply if its answer is lost:
    the fields its messages set (all it carries when none is new)."""
    return dict({f: item.prices[f] for f in item.new if f in item.prices} or item.prices)

"""Wildberries' Prices and Discounts API as a ``Target`` (contract 14, research §2).

How a leased batch travels: in upload tasks of at most ``MAX_GOODS`` (1,000) goods, one message
per good. How one ``send`` goes:

1. each payload read: the price type mapped through ``wb_price_types`` (only ``price`` exists:
   never ``discount``, which stays the seller's in WB's cabinet); whole roubles only (kopecks
   are ``invalid-for-channel`` unless ``rounding`` says how), the channel's currency, above 0;
2. each vendor code's ``nmID`` from the map kept per channel (``WbStore``); one missing there
   rebuilds the map from the catalogue (``/api/v2/list/goods/filter``, paged, within the
   budget) at most every ``catalogue_refresh`` seconds, and at once when WB refused an
   ``nmID`` or a task's line named another vendor code for it (``_stale_map``); still
   missing: ``unknown-sku``. A map older than ``catalogue_refresh`` is read again before any
   price goes out, even when it holds every vendor code (a code moved in WB's cabinet to
   another card; contract 14 read beyond its words, review wbcat finding 1);
3. a good with a task in flight (the store's row, written before any poll) is not uploaded
   again: the task is polled (``history/tasks``, and the buffer while it is pending) within
   the poll share of the budget; its outcome ends the delivery that carried it, and a newer
   price for that good waits (``AWAITING``) until it has one: one task per ``nmID`` in flight.
   A task WB has not shown for ``task_timeout``, or an upload whose answer was lost (a
   timeout after it may have reached WB: its row is stored before it goes, ``UNNAMED``), may
   still land (research §2.4: the time to apply is not documented; §2.5: two tasks of one
   nmID have no documented order): its good stays held, no price of it uploaded, until WB's
   catalogue read back (one read for a send's stuck goods) shows that price (or WB's price
   quarantine lists it: landed, withheld), or ``lost_hold`` more seconds have passed
   (``_stuck``; review 32 holes 1 and 2);
4. the others go in one ``POST /api/v2/upload/task``; the task's id (200, or 208: an earlier
   task, this price's only if its lines carry this price, ``_judge_task``) is stored with its
   goods at once; the deliveries are ``AWAITING`` (back to delayed,
   not charged, no lease) and a later attempt reads the outcome (step 3). A 208 naming a task
   that has ended is never judged by that task's old outcome: WB's catalogue is read back, and
   a good holding this price is delivered; one holding another (a later task set it, or the
   old task failed it: a sale lock lifted since) waits, uncharged, to be uploaded again once
   WB makes a new task (``_replayed``). "Already set" is delivered; for several goods the
   catalogue is read back, and the rest uploaded again (one by one if refused again). A price
   found in force this way (or left out of a task, or by a 208's task, or a lost task's)
   is delivered only once WB's price quarantine holds nothing else for its good; else it
   waits, uncharged, while the earlier price there stays withheld (``_behind_quarantine``).
   "All item Nos. are specified incorrectly, or … already set" (no such good, OR nothing
   changes) rebuilds the map and is delivered only when the good's price read back is the one
   sent, else unknown (``unknown-response``). A validation 400 ("Invalid item No.", "Invalid price
   value": the whole upload refused, no good named) halves the upload to find the bad goods
   (at most ``SPLITS`` more uploads); the others go.

Each good's line in a processed task (``history/goods/task``): updated -> DELIVERED; a good
a task with errors (status 5 or 6) lists no line for: its price read back, DELIVERED only
when WB holds it, else unknown; "already set" -> DELIVERED (once WB's price quarantine
holds no other price for the good, ``_behind_quarantine``); price quarantine -> WITHHELD
(until the ``nmID`` leaves ``/api/v2/quarantine/goods``, or a newer price is delivered; a
quarantine list it cannot read is a failed read, never "none held"); a sale lock -> TEMPORARY
(charged: it ends ``retry-limit`` with WB's words); an ``nmID`` refused -> the map rebuilt and
the good uploaded again under its new ``nmID``, else ``unknown-sku``; another error TERMINAL,
``channel-rule``, in WB's words. A 401 (a token refused or read-only) or 403 pauses delivery;
a 429 bars every request for ``X-Ratelimit-Retry`` seconds (``Budget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import math
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal, TypeVar

import httpx

from exchange.domain.pause import SETTING_MISSING
from exchange.domain.reasons import Reason
from exchange.domain.upload_tasks import TASK_TIMEOUT
from exchange.domain.verdicts import Classification, Verdict
from exchange.errors import ExchangeError, ReadBackFailed
from exchange.targets.base import (
    UNPACED,
    HeldPrice,
    OutgoingMessage,
    Pacer,
    Release,
    Shown,
)
from exchange.targets.marketplace import items
from exchange.targets.marketplace.articles import NO_ARTICLES, Articles
from exchange.targets.marketplace.hold import NO_SHARED_HOLD, SharedHold
from exchange.targets.marketplace.holders import NO_HOLDERS, OfferHolders, OneSkuAGood
from exchange.targets.marketplace.money import Money
from exchange.targets.wildberries import answers
from exchange.targets.wildberries.budget import LONGEST_WAIT, Budget, Later
from exchange.targets.wildberries.store import Task, WbStore
from exchange.targets.wildberries.token import claims
from exchange.targets.wire import (
    http_client,
    httpx_failure,
    key_masked,
    key_masked_failure,
    transport_verdict,
)

log = logging.getLogger(__name__)

# Seconds a request waits for the budget at most (None: as long as the budget says), set by
# ``send`` for the requests it makes (budget.py ``LONGEST_WAIT``).
_PATIENCE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "wb_patience", default=None
)

DEFAULT_URL = "https://discounts-prices-api.wildberries.ru"
MAX_GOODS = 1000  # research §2.1: "Максимум 1 000 товаров"
PAGE = 1000  # the list methods' most ``limit``
USER_AGENT = "exchange/0.1"
# Task statuses (research §2.4): history 3 done, 4 cancelled, 5 some errors, 6 all errors;
# buffer 1 pending. Item statuses: 2 updated, 3 error.
DONE, CANCELLED, SOME_ERRORS, ALL_ERRORS, PENDING = 3, 4, 5, 6, 1
ITEM_UPDATED, ITEM_ERROR = 2, 3

Rounding = Literal["none", "half-up", "down"]
_R = TypeVar("_R")
WHOLE_ROUBLES = Money(places=0)  # research §2.1: "Price should be a whole number", never 0


@dataclass(frozen=True, slots=True)
class _Price:
    """One item (contract 14: one per SKU; Wildberries has one field, ``price``)."""

    carried: tuple[OutgoingMessage, ...]
    vendor_code: str
    roubles: int
    sku: str = ""  # the 1C SKU (under ``sku_source = article`` several may share a code)

    @property
    def message(self) -> OutgoingMessage:
        return self.carried[0]


@dataclass(frozen=True, slots=True)
class _Good:
    price: _Price
    nm_id: int


@dataclass(frozen=True, slots=True)
class _InForce:
    """A price found in force on WB without this upload applying it ("already set", a good a
    task left out or skipped, a 208's task, a lost task whose price WB holds), beside its
    verdict: ``said`` (DELIVERED) is its answer only once WB's price quarantine is read and
    holds no other price for the good (``_behind_quarantine``, the one reader). ``nm_id`` and
    ``roubles``: the good and the price."""

    said: Classification
    nm_id: int
    roubles: int
    before: str | None = None  # the delivery's receipt as it came (``_quarantine_unread``)


# A send's answer for a message before ``_behind_quarantine``: a verdict, or a price found in
# force whose verdict waits for the quarantine's read.
_Said = Classification | _InForce


def _in_force(said: Classification, good: _Good) -> _InForce:
    return _InForce(
        Classification(
            Verdict.DELIVERED, said.detail, http_status=said.http_status, receipt=said.receipt
        ),
        good.nm_id,
        good.price.roubles,
        good.price.message.receipt,
    )


class _Answer(Exception):
    def __init__(self, classification: Classification) -> None:
        super().__init__(classification.detail)
        self.classification = classification
        # Goods answered before the whole answer came (``_upload``: another SKU's good).
        self.answers: dict[str, Classification] = {}


class _StoreFailed(_Answer):
    """The service's own database (``WbStore``) failed: the batch's goods are tried again,
    charged, never the send raised (a batch that raises stays claimed and fails forever)."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(
            Classification(
                Verdict.TEMPORARY,
                "the service's database could not keep the Wildberries tasks "
                f"({type(exc).__name__}): tried again",
            )
        )


def _held_by_another(g: _Good, wait: float) -> Classification:
    """A good another worker's upload holds (its task row written since this worker read the
    rows): this price is not uploaded now, it waits for that upload, uncharged."""
    return Classification(
        Verdict.AWAITING,
        f"not uploaded now: another worker's upload of nmID {g.nm_id} is in flight (one task "
        "per nmID); this price waits for its outcome, not charged",
        receipt=g.price.message.receipt,
        # Whole seconds, at least one: never due again at once.
        again_in=float(max(1, math.ceil(wait))),
    )


# What a poll of one task found: ``_Processed``, or one of these.
_PENDING, _LATER, _CANCELLED, _LOST = "pending", "later", "cancelled", "lost"
REPLAY_WAIT = 60.0  # seconds between uploads while WB's 208 names an ended task
# A poll put off (``_LATER``: the polls' share spent) is looked at again when the budget says a
# poll may go, but never later than this (review wbwords34 finding 3): polls answered 4xx
# (a pending task's 400, research §8) may each be charged as ten requests (§2.3), and while
# uploads are pressed the polls' share (one token per 12 s) then owes minutes; once the uploads
# end, the whole rate is the polls' again, and a price whose look was due minutes away stayed
# "waiting for the marketplace" that long after WB held it. The bound costs no request: a
# look the budget still bars is put off again without one (``take_poll``), so the budget, not
# this bound, keeps the polls within the account's limit.
LATER_AT_MOST = 30.0
REPLAY_RECEIPT = "wb-208:"  # the first 208 naming an ended task: wb-208:<task>:<epoch s>
# Reads of WB's price quarantine a price found in force gets when the list cannot be read
# (``_quarantine_unread``): the failed ones counted in the delivery's receipt,
# wb-qread:<reads>, each read after the last waiting 1, 4, 16, 64, then 256 s (at most
# ``quarantine_wait``).
QUARANTINE_READS = 6
QREAD_RECEIPT = "wb-qread:"
# WB answered "already set" for this price (or it was found in force), but the send ended
# before that was settled (a read after it held by the budget: a 4xx may cost ten requests,
# research §2.3): wb-set:<roubles> in the delivery's receipt. The next attempt reads the price
# back first (a request each) and uploads only when WB holds another price: uploaded again, it
# would be refused "already set" again, at ten requests, for ever (``_set_before``).
SET_RECEIPT = "wb-set:"
# Budget takes a request makes at most while 429s come as it waits for its turn (``_call``).
BAR_TRIES = 3
FEW = 5  # goods read back one by one (filterNmID); more: from the catalogue's pages
# Uploads one refused upload may add, halving itself to find the goods a validation 400 (which
# names none) refused (``_refused_whole``): a bad good among 1,000 is found in 20.
SPLITS = 20
# A task row's ``goods`` when a 208 named the task: what it carried is read from its lines.
UNVERIFIED = 0
# A task row's ``upload_id`` stored before the upload goes (WB's ids are positive): kept when
# the upload's answer is lost (it may have made a task WB never names to us), dropped when WB
# answers, or refuses, or it was never sent.
UNNAMED = 0
# An upload answered 5xx or 422 (``_may_have_made_task``) keeps its row unnamed as well, its
# ``upload_id`` minus that status (-502): the held good's words say what WB answered, not that
# the answer was lost.


# The words that begin the wait an upload answered 5xx or 422 leaves (``_may_apply``); a
# history row's event reads them (``exchange.words.event_said``).
MAY_HAVE_APPLIED = "it may have made a task all the same:"
# The words that begin the wait an upload whose answer was lost leaves (``_may_apply``): the
# next attempt waits to learn whether WB applied it, never uploads it again; a history row's
# event reads them (``exchange.words.event_said``: never "sent again").
ANSWER_LOST = "its answer was lost:"


def _unnamed(upload_id: int) -> bool:
    """Whether a task row names no WB task: stored before the upload (``UNNAMED``), or kept
    after an answer that does not say whether WB made one (minus its status)."""
    return upload_id <= UNNAMED


def _unnamed_upload(task: Task) -> str:
    """The upload of a row that names no task, as the held good's detail says it."""
    if task.upload_id < UNNAMED:
        return (
            f"the upload of {task.price} Wildberries answered HTTP {-task.upload_id} "
            "(it may have made a task all the same)"
        )
    return f"the upload of {task.price} whose answer was lost"


@dataclass(slots=True)
class _Going:
    """What an upload carries (``_upload``): the goods, and when their rows were stored (right
    before it went)."""

    goods: list[_Good]
    sent_at: datetime


class _Unsent(Exception):
    """A request ``_call``'s ``ready`` found nothing left to send for: not made."""


@dataclass(frozen=True, slots=True)
class _Processed:
    """A processed task: the lines of its goods WB lists (by nmID), whether it left some
    of the uploaded goods out (``overAllGoodsNumber`` below the goods uploaded: research §8,
    an unchanged or unknown good in a mixed task may be skipped rather than listed), and its
    status (3, 5 or 6: research §2.4)."""

    rows: dict[int, dict[str, Any]]
    short: bool
    status: int = DONE


# An ended task's outcome as a poll read it (``_keep``): cancelled, or processed: its status,
# WB's ``overAllGoodsNumber`` and its goods' lines by nmID.
_Ended = str | tuple[int, Any, dict[int, dict[str, Any]]]


class WildberriesTarget:
    name = "wildberries"
    # The worker sends the next batch while this one is out (``DeliveryLoop.drain``): every
    # request waits for the account's budget here, so two batches never go faster than WB
    # allows, and the uploads need not idle through the loop's turn between batches or a
    # batch of polls only (issue 32 item 6). One task per nmID holds all the same: the claim
    # leases one aggregate per SKU, and a good with a task in flight is polled, not uploaded.
    batches_at_once = 3

    def __init__(
        self,
        url: str,
        token: Callable[[], str | None],
        store: WbStore,
        *,
        price_types: dict[str, str | None] | None = None,
        rounding: Rounding = "none",
        currency: str = "RUB",
        sku_source: Literal["sku", "article"] = "sku",
        articles: Articles = NO_ARTICLES,
        holders: OfferHolders = NO_HOLDERS,
        catalogue_refresh: float = 900.0,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | None = None,
        budget: Budget | None = None,
        first_poll: float = 3.0,
        poll_every: float = 5.0,
        task_timeout: float = TASK_TIMEOUT,
        lost_hold: float | None = None,
        poll_at_once: bool = False,
        refused_wait: float = 300.0,
        quarantine_wait: float = 300.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_goods: int = MAX_GOODS,
        channel_said: str | None = None,
        account_hold: Callable[[str], SharedHold] | None = None,
    ) -> None:
        """``first_poll``: seconds from an upload to the first look at its task; ``poll_every``:
        between looks; ``task_timeout``: how long a task WB does not show yet counts as
        pending (research §8: what WB answers meanwhile is unconfirmed); ``lost_hold``: how
        much longer such a task (or an upload whose answer was lost) holds its good, unless
        WB's catalogue shows its price first, after which the good's price is uploaded again
        (default: ``task_timeout``); ``poll_at_once``: look once right after the upload (a
        test whose simulator processes at once); ``refused_wait``: seconds between health
        checks while WB refuses the same token (the channel's ``retry_max_delay``);
        ``quarantine_wait``: seconds between looks while a price in force waits behind another
        one WB's price quarantine holds for its good (``_behind_quarantine``); ``max_goods``:
        goods an upload at most (WB's 1,000; fewer for a bench whose limits are lowered).
        ``channel_said``: what its words call the channel (``Channel.said``: "channel wb
        (Wildberries)" under EXCHANGE_CHANNELS); without it, the marketplace's name.
        ``account_hold``: the hold the channel's workers share for the account of a token
        (``Budget.shared_with``; ``exchange.db.target_lock.DbHold``); none without."""
        self.url = url.rstrip("/")
        self._token_source = token
        self._token = self._read_token()
        self.store = store
        self.channel = items.Channel(
            "wildberries",
            dict(price_types or {"retail": "price"}),
            "wb_price_types",
            {"price": WHOLE_ROUBLES},
            currency,
            sku_source,
            rounding,
            called=channel_said or "Wildberries",
        )
        self.articles = articles
        # One SKU a good (``_one_sku_a_good``): the SKUs any worker gave each vendor code
        # (delivered, withheld, in flight, or a task's receipt), and this process's own claims.
        self.one_sku = OneSkuAGood(holders, ("wb-task:", REPLAY_RECEIPT), "Wildberries")
        self.catalogue_refresh = catalogue_refresh
        self.budget = budget or Budget()
        self._account_hold = account_hold
        self._hold: tuple[str, SharedHold] | None = None  # the current token's
        if account_hold is not None:
            self.budget.shared_with(self._shared_hold)
        self.first_poll, self.poll_every = first_poll, poll_every
        self.task_timeout, self.poll_at_once = task_timeout, poll_at_once
        self.lost_hold = task_timeout if lost_hold is None else lost_hold
        self.clock = clock
        self.max_goods = max(1, min(max_goods, MAX_GOODS))
        self._http = http_client(
            base_url=self.url,
            timeout=timeout,
            verify=verify,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
        )
        self._pacer: Pacer = UNPACED
        # WB refused an nmID, or a task's line named another vendor code for it: the next
        # lookup rebuilds the map.
        self._rebuild_now = False
        self.refused_wait = refused_wait
        self.quarantine_wait = quarantine_wait
        # The token WB refused (401/403) at a health check, when, and its answer.
        self._refused: tuple[str | None, datetime, Classification] | None = None
        self._rebuild_lock: asyncio.Lock | None = None
        self._poll_lock: asyncio.Lock | None = None
        self._poll_loop: asyncio.AbstractEventLoop | None = None
        self._rebuild_loop: asyncio.AbstractEventLoop | None = None
        self.requests_sent = 0
        # Withheld versions whose good left WB's quarantine at another price, by message id:
        # the price seen then (``withheld_shown``: the same at the next look ends them).
        self._elsewhere: dict[str, int] = {}
        # Ended tasks' outcomes by task id, and when each was read (``_keep``).
        self._ended: dict[int, tuple[datetime, _Ended]] = {}

    def pace_with(self, pacer: Pacer) -> None:
        self._pacer = pacer

    def share(self, workers: int) -> None:
        """The channel's live workers spend the seller account's budget together (§2.3):
        this target keeps its share (``Budget.share``)."""
        self.budget.share(workers)

    def _shared_hold(self) -> SharedHold:
        """The hold of the account the current token names (one a token: the account's
        limit is its seller's, and a token is what the worker knows of the seller)."""
        token = self._token
        if token is None or self._account_hold is None:
            return NO_SHARED_HOLD
        if self._hold is None or self._hold[0] != token:
            self._hold = (token, self._account_hold(token))
        return self._hold[1]

    def _read_token(self) -> str | None:
        token = self._token_source()
        return token.strip() if token and token.strip() else None

    # -- the seam --------------------------------------------------------------------------

    def requests(self, messages: Sequence[OutgoingMessage]) -> list[list[OutgoingMessage]]:
        """One item per SKU (``items.by_sku``), and never two messages of one aggregate in a
        request (``Target``): a second version goes in a later request (WB refuses an upload
        naming one nmID twice, "Duplicate item Nos.")."""
        out: list[list[OutgoingMessage]] = []
        pending = list(messages)
        while pending:
            seen: set[tuple[str, str]] = set()
            now: list[OutgoingMessage] = []
            later: list[OutgoingMessage] = []
            for message in pending:
                key = (message.kind, message.aggregate)
                (later if key in seen else now).append(message)
                seen.add(key)
            out += items.by_sku(now, self.max_goods)
            pending = later
        return out

    async def send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        # Within a send, a request waits for the budget LONGEST_WAIT at most (the worker's stop
        # waits for its sends); ``exchange verify`` and ``check`` wait as long as it says.
        patience = _PATIENCE.set(LONGEST_WAIT)
        try:
            return await self._send(messages)
        finally:
            _PATIENCE.reset(patience)

    async def _send(self, messages: Sequence[OutgoingMessage]) -> list[Classification]:
        built = await items.gather(messages, self.channel, articles=self.articles)
        answers_ = dict(built.answers)
        prices = await self._one_sku_a_good([_item(item) for item in built.items], answers_)
        if prices:
            try:
                spread = await self._deliver(prices)
            except _Answer as whole:
                spread = {p.message.message_id: whole.classification for p in prices}
                spread.update(whole.answers)
            for p in prices:  # the item's verdict is every carried delivery's (contract 14)
                for carried in p.carried:
                    answers_[carried.message_id] = spread[p.message.message_id]
        return [answers_[m.message_id] for m in messages]

    async def health(self) -> Classification:
        # The worker asks it between sends: a 429's bar held longer than a send waits is
        # answered at once (its stop waits for it too), as a 429 is.
        patience = _PATIENCE.set(LONGEST_WAIT)
        try:
            return await self._health()
        finally:
            _PATIENCE.reset(patience)

    async def _health(self) -> Classification:
        """A catalogue read of one good. While WB refuses the token (401/403) the worker asks
        every cycle; the same token is asked again only ``refused_wait`` after WB refused it
        (its answer said meanwhile): every request shares the Prices budget, and a 4xx may
        count as ten (research §2.3, UNCONFIRMED). A new token in the file is asked at once."""
        now = self.clock()
        if self._refused is not None:
            token, at, said = self._refused
            if token == self._token and now - at < timedelta(seconds=self.refused_wait):
                return said
        try:
            await self._call("GET", "/api/v2/list/goods/filter", "read", {"limit": "1"})
        except _Answer as whole:
            said = whole.classification
            refused = said.verdict is Verdict.PAUSE and said.http_status in (401, 403)
            self._refused = (self._token, now, said) if refused else None
            return said
        self._refused = None
        return Classification(Verdict.DELIVERED, "HTTP 200", http_status=200)

    def reload_credentials(self) -> bool:
        before, self._token = self._token, self._read_token()
        return self._token != before

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _one_sku_a_good(
        self, prices: list[_Price], answers_: dict[str, Classification]
    ) -> list[_Price]:
        """One 1C SKU a Wildberries good. Under ``sku_source = article`` the sizes of one 1C
        product (two offers) share an article, one vendor code, one ``nmID``: WB prices the
        good whole (research §2.1: ``nmID`` and one ``price``; §2.6 item 4: an ``nmID`` twice
        refuses the whole upload), and two SKUs there would overwrite each other's price. The
        marketplaces' rule (``marketplace.holders``, as Yandex Market's for two SKUs of one
        offer): the first SKU sent for a vendor code keeps it (the database's order: any
        worker's delivered, withheld, or in flight, two claimed at once ranked alike by both
        workers; else this process's first claim); another SKU naming it is
        ``invalid-for-channel``, in words naming both SKUs and the article."""
        if not prices:
            return prices
        held: dict[str, list[str]] = {}
        if self.channel.sku_source == "article":
            # Articles come trimmed (``exchange.db.articles``), as the database's offers.
            held = await self.one_sku.read((p.vendor_code for p in prices), by_article=True)
        kept: list[_Price] = []
        for p in prices:
            other = self.one_sku.keeper(p.vendor_code, p.sku, held)
            if other == p.sku:
                kept.append(p)
                continue
            said = _shared_article(p, other)
            for carried in p.carried:
                answers_[carried.message_id] = said
        return kept

    async def _db(self, call: Callable[..., _R], *args: Any) -> _R:
        """A call of the store in a thread; its failure is ``_StoreFailed`` (an answer for the
        batch's goods, never an exception out of ``send``)."""
        try:
            return await asyncio.to_thread(call, *args)
        except Exception as exc:  # the service's database
            log.warning("Wildberries: the task store failed (%s)", type(exc).__name__)
            raise _StoreFailed(exc) from None

    # -- reading the payload ---------------------------------------------------------------

    async def _read(self, messages: Sequence[OutgoingMessage]) -> list[_Price | Classification]:
        """Each message as its item (the articles read under ``sku_source = article``), or
        why it is not one: for ``withheld_shown`` and ``read_prices``. Each message is read
        as its own version: two versions of one SKU (v1 and v2 both withheld) are one item
        when sent, but each is asked about at its own price (contract 13: v2 live, v1
        superseded)."""
        built = await items.gather(messages, self.channel, articles=self.articles)
        read: dict[str, _Price | Classification] = dict(built.answers)
        for item in built.items:
            for carried in item.carried:
                alone = items.build([carried], self.channel, [], {item.sku: item.offer_id})
                read[carried.message_id] = (
                    _item(alone.items[0]) if alone.items else alone.answers[carried.message_id]
                )
        return [read[m.message_id] for m in messages]

    # -- one send --------------------------------------------------------------------------

    async def _deliver(self, prices: list[_Price]) -> dict[str, Classification]:
        out: dict[str, _Said] = {}
        nm, read_at, fresh = await self._nm_ids_read({p.vendor_code for p in prices})
        goods: list[_Good] = []
        for p in prices:
            if p.vendor_code in nm:
                goods.append(_Good(p, nm[p.vendor_code]))
            elif fresh or read_at is None:
                out[p.message.message_id] = _unknown_sku(p.vendor_code)
            else:
                out[p.message.message_id] = self._until_read_again(p.vendor_code, read_at)
        in_flight = await self._db(self.store.tasks, [g.nm_id for g in goods])
        by_task: dict[int, list[_Good]] = {}
        stuck: list[tuple[_Good, Task]] = []  # a task lost, or an upload's answer lost
        for g in goods:
            task = in_flight.get(g.nm_id)
            if task is not None and _unnamed(task.upload_id):
                stuck.append((g, task))
            elif task is not None:
                by_task.setdefault(task.upload_id, []).append(g)
        upload: list[_Good] = [g for g in goods if g.nm_id not in in_flight]
        refused: list[_Good] = []
        left_out: list[tuple[_Good, int, bool]] = []
        unpriced: list[tuple[_Good, int]] = []
        for upload_id, waiting in by_task.items():
            tasks = [in_flight[g.nm_id] for g in waiting]
            found = await self._poll(
                upload_id,
                min(t.uploaded_at for t in tasks),
                max(t.goods for t in tasks),
                urgent=any(in_flight[g.nm_id].price != g.price.roubles for g in waiting),
            )
            if found == _LOST:
                stuck += [(g, in_flight[g.nm_id]) for g in waiting]
                continue  # its row stays: the task may still land (``_stuck``)
            self._judge_task(
                upload_id, found, waiting, in_flight, out, upload, refused, left_out, unpriced
            )
            if found not in (_PENDING, _LATER):
                await self._db(self.store.drop_tasks, [t.nm_id for t in tasks], upload_id)
        # What the polls ended (their task rows dropped) stays theirs if a later request of
        # this send fails whole (a 429's bar held longer than a send waits: ``_call``), but
        # for a refused nmID (its map rebuilt now) and a price found in force (settled only by
        # the quarantine's read).
        again_ids = {g.price.message.message_id for g in refused}
        judged = {
            key: said
            for key, said in out.items()
            if key not in again_ids and isinstance(said, Classification)
        }
        try:
            said_set = [g for g in upload if _said_set(g.price)]
            if said_set:
                upload = [g for g in upload if not _said_set(g.price)]
                upload += await self._set_before(said_set, out)
            # A newer price going because the upload it waited for has landed: its history
            # says so (review 32p-wb: read without it, the hold looked skipped).
            first: dict[str, str] = {}
            if stuck:
                upload += await self._stuck(stuck, out, first)
            if left_out:
                refused += await self._left_out(left_out, out)
            if unpriced:
                upload += await self._carried_by(unpriced, out)
            if refused:
                upload += await self._again(refused, out)
            step = self.max_goods
            for chunk in [upload[i : i + step] for i in range(0, len(upload), step)]:
                out.update(await self._upload(chunk))
            for key, note in first.items():
                said = out.get(key)
                if isinstance(said, Classification) and said.verdict is Verdict.AWAITING:
                    out[key] = replace(said, detail=f"{said.detail}; {note}")
        except _Answer as whole:
            whole.answers.update({k: v for k, v in judged.items() if k not in whole.answers})
            raise
        return await self._behind_quarantine(out)

    async def _set_before(self, goods: list[_Good], out: dict[str, _Said]) -> list[_Good]:
        """Goods whose price WB said was set already when last sent (``SET_RECEIPT``): WB's
        catalogue read back first (a request a good when few: an upload refused "already set"
        may cost ten, research §2.3). Holding this price: in force (settled by the quarantine's
        read, ``_behind_quarantine``); holding another: returned, to be uploaded."""
        held = await self._held_prices({g.nm_id for g in goods})
        again: list[_Good] = []
        for g in goods:
            if held.get(g.nm_id) != g.price.roubles:
                again.append(g)
                continue
            out[g.price.message.message_id] = _in_force(
                Classification(
                    Verdict.DELIVERED,
                    f"Wildberries said {g.price.roubles} was set already for nmID {g.nm_id}, "
                    "and its catalogue holds it: the price is in force",
                    http_status=200,
                ),
                g,
            )
        return again

    async def _behind_quarantine(self, out: dict[str, _Said]) -> dict[str, Classification]:
        """Each message's verdict (``out``'s): the prices found in force without this upload
        applying them (``_InForce``) are delivered only when WB's price quarantine
        (``/api/v2/quarantine/goods``, one read for all of them, within the budget) holds
        nothing for their good. research §2.4: another price sent releases the quarantine;
        whether the price in force sent again ("already set") does is not said (the simulator's
        ``already_set_releases``). Still listed, the held price (an earlier version's: 1000 in
        force, 300 withheld, 1000 again) would go live over this one if the seller confirmed it,
        and the earlier version would have been superseded by a delivery that settled nothing
        (issue 32k finding 2). So this price waits, uncharged (``AWAITING``), a look every
        ``quarantine_wait`` seconds, and the earlier version stays withheld, until the
        quarantine lets the good go: taken out at this price in the cabinet, this price is
        delivered then; confirmed, the held price is live and this one is uploaded over it. A
        429 is waited out (the budget bars requests for WB's wait: a 4xx "already set" may have
        cost ten, research §2.3, §8) and the list read once more; a list it cannot read is a
        failed read, for these goods alone (``_quarantine_unread``): read again later,
        uncharged, a bounded number of times."""
        held: dict[int, int | None] = {}  # read only for a price in force
        if any(isinstance(said, _InForce) for said in out.values()):
            try:
                try:
                    held = await self._quarantine()
                except _Answer as failed:
                    if failed.classification.http_status != 429:
                        raise
                    held = await self._quarantine()
            except _Answer as failed:
                unread = failed.classification
                return {
                    key: self._quarantine_unread(said, unread)
                    if isinstance(said, _InForce)
                    else said
                    for key, said in out.items()
                }

        def settled(said: _Said) -> Classification:
            if isinstance(said, Classification):
                return said
            if said.nm_id not in held:
                return said.said
            return _behind(said, held[said.nm_id], self.quarantine_wait)

        return {key: settled(said) for key, said in out.items()}

    def _quarantine_unread(self, said: _InForce, failed: Classification) -> Classification:
        """A price in force (the upload's own answer known: "already set", or a task's) whose
        price quarantine could not be read (``failed``: an answer without ``quarantineGoods``,
        a 5xx, a timeout). An auxiliary read, as a task's poll (put off, uncharged) or Yandex
        Market's read-back (read again, uncharged, until its bound): the price waits,
        uncharged (``AWAITING``), and is looked at again, the failed reads counted in its
        receipt (``QREAD_RECEIPT``), never ended on one bad answer. After ``QUARANTINE_READS``
        failed reads (about six minutes) the read's own verdict ends it: an answer it cannot
        read ``unknown-response`` (contract 5: an unknown cause is never temporary), a 5xx or
        a timeout charged; in words saying the list was read that many times. A token refused
        pauses; a read the budget holds (``budget_held``) waits as it says."""
        if failed.verdict in (Verdict.PAUSE, Verdict.AWAITING):
            if failed.receipt is None and not (said.before or "").startswith(QREAD_RECEIPT):
                # In force when last seen: read back first next time, never uploaded again.
                return replace(failed, receipt=f"{SET_RECEIPT}{said.roubles}")
            return failed
        before = said.before or ""
        try:
            reads = (
                int(before.removeprefix(QREAD_RECEIPT)) if before.startswith(QREAD_RECEIPT) else 0
            )
        except ValueError:
            reads = 0
        reads += 1
        if reads < QUARANTINE_READS:
            wait = min(self.quarantine_wait, 4.0 ** (reads - 1))
            return Classification(
                Verdict.AWAITING,
                f"the quarantine list could not be read ({failed.detail}); read again",
                http_status=failed.http_status,
                receipt=f"{QREAD_RECEIPT}{reads}",
                # Whole seconds, at least one: never due again at once.
                again_in=float(max(1, math.ceil(wait))),
            )
        return replace(
            failed,
            detail=f"Wildberries holds {said.roubles} for nmID {said.nm_id} already, but its "
            f"price quarantine could not be read {reads} times ({failed.detail}): whether it "
            "holds an earlier price for the good is not known",
        )

    def _judge_task(
        self,
        upload_id: int,
        found: _Processed | str,
        waiting: list[_Good],
        in_flight: dict[int, Task],
        out: dict[str, _Said],
        upload: list[_Good],
        refused: list[_Good],
        left_out: list[tuple[_Good, int, bool]],
        unpriced: list[tuple[_Good, int]],
    ) -> None:
        """Each good waiting for task ``upload_id``: its delivery's outcome, or (a newer price
        of a good whose task ended) back to the uploads. A task a 208 named (``UNVERIFIED``)
        is this price's only if its line carries this price: a line of another price was
        another upload's (review 32e: v1's upload timed out at the client after WB made its
        task, and v2's was answered 208 naming it), so the task having ended, this price is
        uploaded again; a line without a price, or none, is judged by the catalogue read back
        (``_carried_by``)."""

        def not_mine(g: _Good) -> bool:
            return in_flight[g.nm_id].price != g.price.roubles

        for g in waiting:
            task = in_flight[g.nm_id]
            mine = task.price == g.price.roubles
            if found in (_PENDING, _LATER):
                # Put off for want of the polls' share: looked at again once it has a token,
                # or ``LATER_AT_MOST`` from now, whichever comes first.
                wait = (
                    self.poll_every
                    if found == _PENDING
                    else min(
                        LATER_AT_MOST,
                        self.budget.poll_wait(urgent=any(not_mine(w) for w in waiting)),
                    )
                )
                out[g.price.message.message_id] = self._awaiting(upload_id, wait, mine=mine)
            elif not mine:
                upload.append(g)  # the good's task ended: this newer price goes now
            elif found == _CANCELLED:
                out[g.price.message.message_id] = Classification(
                    Verdict.TEMPORARY,
                    f"Wildberries cancelled task {upload_id} (status 4): uploaded again",
                    http_status=200,
                )
            else:
                assert isinstance(found, _Processed)
                row = found.rows.get(g.nm_id)
                if task.goods == UNVERIFIED:
                    carried = _line_price(row)
                    if carried is None:
                        unpriced.append((g, upload_id))
                        continue
                    if carried != g.price.roubles:
                        upload.append(g)  # another upload's task, ended: this price goes now
                        continue
                if row is None and (found.short or found.status != DONE):
                    # Left out of the task: unchanged (already set), an nmID WB does not
                    # know (research §8), or not applied at all; or counted by a task with
                    # errors whose lines lack it (status 6: every good failed, §2.4, review
                    # 32c finding 3). The catalogue's line for this nmID says which
                    # (``_left_out``): never delivered unless it shows this price.
                    left_out.append((g, upload_id, found.short))
                    continue
                listed = _listed_as(row, g)
                if listed is not None:
                    self._stale_map(upload_id, g, listed)
                if row is None or row.get("status") == ITEM_UPDATED:
                    # A good updated (research §2.4: status 5 updated the others), or one a
                    # task done without errors (status 3, every good counted) lists no line
                    # for.
                    out[g.price.message.message_id] = Classification(
                        Verdict.DELIVERED,
                        f"Wildberries: task {upload_id} updated nmID {g.nm_id}"
                        if listed is None
                        else _landed_elsewhere(upload_id, g, listed),
                        http_status=200,
                        receipt=f"wb-task:{upload_id}",
                    )
                    if listed is not None:
                        # The price landed on a good that no longer bears this vendor code:
                        # the map read again (``_again``), and the price uploaded to the good
                        # bearing it now; none: unknown-sku; the same nmID: delivered here.
                        refused.append(g)
                    continue
                meaning, said = answers.item_error(row, upload_id)
                if meaning == "refused-nm":
                    refused.append(g)
                out[g.price.message.message_id] = (
                    _in_force(said, g) if meaning == "already-set" else said
                )

    async def _stuck(
        self,
        stuck: list[tuple[_Good, Task]],
        out: dict[str, _Said],
        first: dict[str, str] | None = None,
    ) -> list[_Good]:
        """Goods whose task WB has not shown for ``task_timeout``, or whose upload's answer was
        lost (``UNNAMED``): WB may still apply that task, after any later one of the good
        (research §2.4: the time to apply is not documented; §2.5: two tasks of one nmID have
        no documented order; review 32 holes 1 and 2). So no price of the good is uploaded
        until WB's catalogue read back (``_held_prices``: one read for all of them, a request
        a good when few, else the catalogue's pages) holds the task's price: it has landed,
        and cannot land again. Then this price, when it is the task's, is delivered; a newer
        one is returned, to be uploaded now. Meanwhile each waits, uncharged, a minute between
        reads; past ``task_timeout`` + ``lost_hold`` from the upload the task is taken for
        never applied: its row dropped, the task's own price charged (``TEMPORARY``) and
        uploaded again, a newer one uploaded. A sharp drop never shows in the catalogue (WB's
        price quarantine keeps the old price there, research §2.4): listed in the quarantine
        at the task's price (``_quarantined_lost``), the task has landed, withheld: this
        price, when it is the task's, is ``WITHHELD``; a newer one is returned, to be uploaded
        now (it releases the quarantine, as over any withheld price). ``first``: for a newer
        price going because the task has landed, by its message id, words saying so (added to
        its upload's answer). The task's own version, ended already (a newer one superseded
        it), gets a history row saying where WB showed it and what replaced it
        (``WbStore.landed``; review wblost34: read without it, it never reached WB)."""
        held = await self._held_prices({g.nm_id for g, _ in stuck})
        now = self.clock()
        quarantined = await self._quarantined_lost(stuck, held, now)
        again: list[_Good] = []
        ended: dict[int, list[int]] = {}
        notes: dict[str, str] = {}  # the lost versions' history, by their message id
        for g, task in stuck:
            message_id = g.price.message.message_id
            holds = held.get(g.nm_id)
            mine = task.price == g.price.roubles
            which = (
                _unnamed_upload(task)
                if _unnamed(task.upload_id)
                else f"task {task.upload_id} of {task.price}, not shown for "
                f"{self.task_timeout:g} s,"
            )
            receipt = None if _unnamed(task.upload_id) else f"wb-task:{task.upload_id}"
            until = task.uploaded_at + timedelta(seconds=self.task_timeout + self.lost_hold)
            landed = holds is not None and holds == task.price
            withheld = not landed and g.nm_id in quarantined
            if not landed and not withheld and now < until:
                shows = "does not list it" if holds is None else f"holds {holds}"
                left = (until - now).total_seconds()
                out[message_id] = Classification(
                    Verdict.AWAITING,
                    f"Wildberries may still apply {which} (nmID {g.nm_id}); its catalogue "
                    f"{shows}: the good waits until it shows {task.price}, at most until "
                    f"{until:%Y-%m-%d %H:%M:%S} UTC",
                    http_status=200,
                    receipt=receipt,
                    # Whole seconds, at least one: never due again at once.
                    again_in=float(max(1, math.ceil(min(REPLAY_WAIT, left)))),
                )
                continue
            ended.setdefault(task.upload_id, []).append(g.nm_id)
            if not mine:
                again.append(g)  # the lost task landed, or is taken for never applied
                if landed and first is not None:
                    first[message_id] = (
                        f"it went once the catalogue showed {holds} for nmID {g.nm_id}: "
                        f"{which} has landed"
                    )
                elif withheld and first is not None:
                    first[message_id] = (
                        f"it went once Wildberries' price quarantine listed {task.price} for "
                        f"nmID {g.nm_id}: {which} has landed there, and this price replaces it"
                    )
                if (landed or withheld) and task.message_id != message_id:
                    # The lost version's own history: where it landed, and what replaced it
                    # (review wblost34: read without it, it never reached WB).
                    notes[task.message_id] = (
                        f"Wildberries' catalogue showed {holds} for nmID {g.nm_id}: {which} "
                        f"had landed, buyers saw it; then a newer version went: superseded by "
                        f"{message_id}"
                        if landed
                        else f"Wildberries' price quarantine listed {task.price} for nmID "
                        f"{g.nm_id}: {which} had landed there, withheld (WB's cabinet may show "
                        f"it waiting for the seller's confirmation: do not confirm it); a newer "
                        f"version goes in its place: superseded by {message_id}"
                    )
            elif withheld:
                out[message_id] = Classification(
                    Verdict.WITHHELD,
                    f"Wildberries' price quarantine lists {task.price} for nmID {g.nm_id}: "
                    f"{which} has landed there. {answers.WHERE_TO_RELEASE}",
                    http_status=200,
                    receipt=receipt,
                )
            elif landed:
                out[message_id] = _in_force(
                    Classification(
                        Verdict.DELIVERED,
                        f"Wildberries' catalogue holds {holds} for nmID {g.nm_id}: {which} has "
                        "landed, the price is in force",
                        http_status=200,
                        receipt=receipt,
                    ),
                    g,
                )
            else:
                out[message_id] = Classification(
                    Verdict.TEMPORARY,
                    f"Wildberries has not applied {which} (nmID {g.nm_id}) by "
                    f"{until:%Y-%m-%d %H:%M:%S} UTC: uploaded again",
                    http_status=200,
                )
        for upload_id, nm_ids in ended.items():
            await self._db(self.store.drop_tasks, nm_ids, upload_id)
        if notes:
            # A note, best effort: the goods go on (``_db`` has logged a failure).
            with contextlib.suppress(_StoreFailed):
                await self._db(self.store.landed, notes)
        return again

    async def _quarantined_lost(
        self, stuck: list[tuple[_Good, Task]], held: dict[int, int], now: datetime
    ) -> set[int]:
        """The goods of ``stuck`` whose lost task has landed in WB's price quarantine
        (research §2.4: a price a third or less of the old one is held there, and the
        catalogue keeps the old price): ``/api/v2/quarantine/goods`` lists the good with the
        task's price (``newPrice``). Read once for them all, within the budget, only for goods
        whose catalogue does not show the task's price while their wait lasts; a list it cannot
        read tells nothing (the goods wait on, as for a catalogue read without the price)."""
        unseen = {
            g.nm_id: task.price
            for g, task in stuck
            if held.get(g.nm_id) != task.price
            and now < task.uploaded_at + timedelta(seconds=self.task_timeout + self.lost_hold)
        }
        if not unseen:
            return set()
        try:
            listed = await self._quarantine()
        except _Answer as failed:
            if failed.classification.verdict is Verdict.PAUSE:
                raise  # the token refused: every request would be
            log.info(
                "Wildberries: the price quarantine could not be read for a lost upload's good "
                "(%s); it waits on",
                failed.classification.detail,
            )
            return set()
        return {
            nm
            for nm, price in unseen.items()
            if listed.get(nm) is not None and listed.get(nm) == price
        }

    async def _left_out(
        self, goods: list[tuple[_Good, int, bool]], out: dict[str, _Said]
    ) -> list[_Good]:
        """The goods a processed task has no line for (with the task's id, and whether the
        task counted fewer goods than uploaded), judged by WB's catalogue read back
        (``_held_prices``: the good's own line, by its nmID). Holding THIS price: delivered
        (unchanged, research §8). Otherwise, left out of a task that counted fewer goods
        (short): not applied, charged (``about_item``, as a cancelled task is) and uploaded
        again, so that a good WB keeps leaving out ends ``retry-limit`` in these words; counted
        by a task with errors (status 5 or 6) that lists no line for it: why it was not applied
        is unknown (contract 5: an unknown cause is never temporary), the delivery ends
        ``unknown-response`` with WB's task named. Not listed in the catalogue: returned, for
        the map's rebuild (an nmID WB does not know; the rebuild finding it under the same
        nmID keeps the verdict said here)."""
        held = await self._held_prices({g.nm_id for g, _, _ in goods})
        gone: list[_Good] = []
        for g, upload_id, short in goods:
            message_id = g.price.message.message_id
            now = held.get(g.nm_id)
            if now == g.price.roubles:
                out[message_id] = _in_force(
                    Classification(
                        Verdict.DELIVERED,
                        f"Wildberries' task {upload_id} has no line for nmID {g.nm_id}; its "
                        f"catalogue holds {now} for it: the price is in force",
                        http_status=200,
                        receipt=f"wb-task:{upload_id}",
                    ),
                    g,
                )
                continue
            holds = "its catalogue does not list it" if now is None else f"WB holds {now} for it"
            if now is None:
                gone.append(g)  # the rebuild decides: unknown-sku, or uploaded under another
            if short:
                out[message_id] = Classification(
                    Verdict.TEMPORARY,
                    f"Wildberries left nmID {g.nm_id} out of task {upload_id}, and {holds}, "
                    f"not {g.price.roubles}: not applied, uploaded again",
                    http_status=200,
                    about_item=True,
                )
            else:
                out[message_id] = Classification(
                    Verdict.UNKNOWN,
                    f"Wildberries' task {upload_id} ended with errors but lists no line for "
                    f"nmID {g.nm_id}, and {holds}, not {g.price.roubles}: not applied, for a "
                    "reason WB did not give",
                    http_status=200,
                )
        return gone

    async def _carried_by(
        self, goods: list[tuple[_Good, int]], out: dict[str, _Said]
    ) -> list[_Good]:
        """Goods a 208 named an ended task for whose lines give no price for them: WB's
        catalogue read back (``_held_prices``). Holding this price: delivered. Otherwise the
        task was not this price's (or did not apply it): returned, to be uploaded again (a
        208 naming the ended task again waits, ``_replayed``)."""
        held = await self._held_prices({g.nm_id for g, _ in goods})
        again: list[_Good] = []
        for g, upload_id in goods:
            if held.get(g.nm_id) == g.price.roubles:
                out[g.price.message.message_id] = _in_force(
                    Classification(
                        Verdict.DELIVERED,
                        f"Wildberries answered 208 with task {upload_id}, whose lines give no "
                        f"price for nmID {g.nm_id}; its catalogue holds {g.price.roubles} for "
                        "it: the price is in force",
                        http_status=208,
                        receipt=f"wb-task:{upload_id}",
                    ),
                    g,
                )
            else:
                again.append(g)
        return again

    async def _again(self, refused: list[_Good], out: dict[str, _Said]) -> list[_Good]:
        """WB refused these ``nmID``s: the map rebuilt now; a vendor code found under another
        ``nmID`` is uploaded again under it, one not found is ``unknown-sku``, one found under
        the same ``nmID`` keeps WB's refusal."""
        self._rebuild_now = True
        nm = await self._nm_ids({g.price.vendor_code for g in refused})
        again: list[_Good] = []
        for g in refused:
            now_nm = nm.get(g.price.vendor_code)
            if now_nm is None:
                said = out.get(g.price.message.message_id)
                landed = (
                    said.detail
                    if isinstance(said, Classification) and said.verdict is Verdict.DELIVERED
                    else None
                )  # a price that landed on a good bearing another vendor code now
                out[g.price.message.message_id] = _unknown_sku(g.price.vendor_code, landed)
            elif now_nm != g.nm_id:
                out.pop(g.price.message.message_id, None)
                again.append(_Good(g.price, now_nm))
        return again

    def _stale_map(self, upload_id: int, good: _Good, listed: str) -> None:
        """A task's line names another vendor code for the good uploaded as ``good``'s
        (research §2.4: ``historyGoods`` carry ``vendorCode``): the card's vendor code changed
        in WB's cabinet after the map was read. The map is read again at the next lookup."""
        log.warning(
            "Wildberries: task %s updated nmID %s for vendor code %r, but WB names that good "
            "%r now: the vendorCode->nmID map was stale and is read again",
            upload_id,
            good.nm_id,
            good.price.vendor_code,
            listed,
        )
        self._rebuild_now = True

    def _until_read_again(self, vendor_code: str, read_at: datetime) -> Classification:
        """A vendor code the map (read ``read_at``) lacks while reading the catalogue again is
        not allowed yet (``catalogue_refresh``): the card may be newer than that read, so the
        price waits, uncharged, for the next read, and only then is ``unknown-sku``."""
        due = read_at + timedelta(seconds=self.catalogue_refresh)
        wait = (due - self.clock()).total_seconds()
        return Classification(
            Verdict.AWAITING,
            f"Wildberries' catalogue as read at {read_at:%Y-%m-%d %H:%M:%S} UTC has no good with "
            f"vendor code {vendor_code!r}: it is read again at {due:%H:%M:%S} UTC "
            "(wb_catalogue_refresh), and the price waits for that read",
            # Whole seconds, at least one: never due again at once.
            again_in=float(max(1, math.ceil(wait))),
        )

    def _awaiting(self, upload_id: int, wait: float, *, mine: bool = True) -> Classification:
        detail = (
            f"Wildberries took it in task {upload_id}: its outcome is read later"
            if mine
            else f"waits for Wildberries' task {upload_id} of the same good (one task per nmID)"
        )
        return Classification(
            Verdict.AWAITING,
            detail,
            http_status=200,
            receipt=f"wb-task:{upload_id}",
            # Whole seconds, at least one: never due again at once.
            again_in=float(max(1, math.ceil(wait))),
        )

    # -- the upload ------------------------------------------------------------------------

    async def _upload(
        self,
        goods: list[_Good],
        *,
        alone: bool = False,
        checked: bool = False,
        splits: list[int] | None = None,
        rebuilt: bool = False,
    ) -> dict[str, _Said]:
        """Upload the goods as one task. ``splits``: the requests a validation 400 may still
        add to find its bad goods (``_refused_whole``), shared by the halves; ``rebuilt``: the
        goods' nmIDs come from a rebuild after WB refused them (never rebuilt again)."""
        if not goods:
            return {}
        self._may_write()
        going = _Going(list(goods), self.clock())
        taken: dict[str, Classification] = {}

        async def store() -> dict[str, Any] | None:
            """The goods' rows, stored right before the upload goes (its budget taken and its
            turn come: review 32n finding 2, a batch still waiting for its turn is not "sent",
            and a crash then holds nothing): an answer lost after WB made the task (never named
            to us again) leaves the goods held until that price is seen (``_stuck``; review 32
            hole 2). The upload's body, or None: nothing left to send."""
            going.sent_at = self.clock()
            rows = [
                Task(
                    g.nm_id,
                    UNNAMED,
                    Decimal(g.price.roubles),
                    g.price.message.message_id,
                    going.sent_at,
                    len(going.goods),
                )
                for g in going.goods
            ]
            others: dict[int, str] = {}
            if self.channel.sku_source == "article":
                # One good at a time across workers (issue 32): a good another SKU of the
                # article was sent to meanwhile, by a worker that read the holders before this
                # one's claim was in, is not uploaded.
                others, busy = await self._db(
                    self.store.put_first,
                    rows,
                    {g.nm_id: (g.price.vendor_code, g.price.sku) for g in going.goods},
                    self.one_sku.prefixes,
                )
                for g in going.goods:
                    if g.nm_id in others:
                        self.one_sku.lost(g.price.vendor_code, others[g.nm_id])
                        taken[g.price.message.message_id] = _shared_article(
                            g.price, others[g.nm_id]
                        )
            else:
                busy = await self._db(self.store.claim_tasks, rows)
            # A good whose row another worker wrote since this one read the rows (its upload
            # of the good made or going; review wbwords34 finding 2: two workers writing one
            # good's row met PostgreSQL's unique constraint, charged as a failure): not
            # uploaded, it waits for that upload's task, uncharged, as a newer price waits.
            for g in going.goods:
                if g.nm_id in busy and g.nm_id not in others:
                    taken[g.price.message.message_id] = _held_by_another(g, self.poll_every)
            left = [g for g in going.goods if g.nm_id not in others and g.nm_id not in busy]
            if len(left) < len(going.goods):
                going.goods = left
                if not left:
                    return None
                # the rows name the goods the upload carries
                keep = {g.nm_id for g in left}
                await self._db(
                    self.store.put_tasks,
                    [replace(row, goods=len(left)) for row in rows if row.nm_id in keep],
                )
            return {"data": [{"nmID": g.nm_id, "price": g.price.roubles} for g in going.goods]}

        try:
            said = await self._upload_stored(going, store, alone, checked, splits, rebuilt)
            return {**taken, **said}  # ``taken`` filled by ``store``
        except _Answer as whole:
            whole.answers.update(taken)
            raise

    async def _upload_stored(
        self,
        going: _Going,
        store: Callable[[], Awaitable[dict[str, Any] | None]],
        alone: bool,
        checked: bool,
        splits: list[int] | None,
        rebuilt: bool,
    ) -> dict[str, _Said]:
        """``_upload``: ``store`` writes the goods' rows (``UNNAMED``) right before the request
        goes, and says what it carries (``going``: the goods, and when it went)."""
        try:
            response = await self._call(
                "POST", "/api/v2/upload/task", "upload", judged=False, ready=store
            )
        except _Unsent:
            return {}  # every good's article went to another SKU meanwhile
        except _Answer as failed:
            if not failed.classification.result_unknown:  # not sent, or refused whole
                await self._db(self.store.drop_tasks, [g.nm_id for g in going.goods], UNNAMED)
                raise
            # Its row stays: what the next attempt does (``_stuck``), never "sent again"
            # (seller review 35: the released row said «отправится снова»).
            lost = failed.classification
            failed.classification = replace(
                lost,
                detail=f"{lost.detail} (upload): {self._may_apply(going.sent_at, lost=True)}",
            )
            raise
        goods, sent_at = going.goods, going.sent_at
        nm_ids = [g.nm_id for g in goods]
        status = response.status_code
        if status not in (200, 208) and not _may_have_made_task(status):
            await self._db(self.store.drop_tasks, nm_ids, UNNAMED)
        elif status not in (200, 208):  # held as unnamed, its words saying what WB answered
            await self._db(
                self.store.put_tasks,
                [
                    Task(
                        g.nm_id,
                        -status,
                        Decimal(g.price.roubles),
                        g.price.message.message_id,
                        sent_at,
                        len(goods),
                    )
                    for g in goods
                ],
            )
        if status in (200, 208):
            upload_id = _task_id(response)
            if upload_id is None:
                raise _Answer(
                    Classification(
                        Verdict.UNKNOWN,
                        f"HTTP {status}: the upload's answer names no task id",
                        http_status=status,
                    )
                )
            now = self.clock()
            # A 208's task is another upload's (research §2.5: its dedup criterion is
            # UNCONFIRMED, perhaps the goods and not their prices): how many goods, and which
            # prices, it carried is unknown (``UNVERIFIED``) until its lines are read.
            size = len(goods) if status == 200 else UNVERIFIED
            tasks = [
                Task(
                    g.nm_id,
                    upload_id,
                    Decimal(g.price.roubles),
                    g.price.message.message_id,
                    now,
                    size,
                )
                for g in goods
            ]
            # Stored before any poll: a restart from here polls this task, never uploads again.
            await self._db(self.store.put_tasks, tasks)
            if status == 208:
                log.info("Wildberries: the upload is task %s already (208)", upload_id)
                replayed = await self._replayed(upload_id, tasks, goods)
                if replayed:
                    rest = [g for g in goods if g.price.message.message_id not in replayed]
                    if not rest:
                        return replayed
                    return {**replayed, **await self._after_upload(rest, upload_id)}
            return await self._after_upload(goods, upload_id)
        words = answers.error_text(response)
        if status == 400 and (answers.ALREADY_SET in words.lower() or answers.ALL_WRONG in words):
            try:
                try:
                    return await self._already(goods, words, alone, checked)
                except _Answer as refused:
                    if refused.classification.http_status != 429 or refused.answers:
                        raise
                    # The 400 may have cost ten requests (research §2.3): the read after it
                    # met a 429, whose bar the budget now keeps; read once more after it (a
                    # bar longer than a send waits: held, ``budget_held``).
                    return await self._already(goods, words, alone, checked)
            except _Answer as whole:
                # Not settled now (a read after it refused or held by the budget): the next
                # attempt reads back first (``SET_RECEIPT``), never uploads again at once
                # (refused "already set" again, at ten requests, for ever: review 32n).
                if whole.classification.http_status == 429:
                    # Uncharged, as a 429 is, and the receipt kept (a busy site's release
                    # keeps none): due when the budget's bar has passed.
                    whole.classification = answers.budget_held(self.budget.poll_wait())
                for g in goods:
                    key = g.price.message.message_id
                    if key not in whole.answers and whole.classification.receipt is None:
                        whole.answers[key] = replace(
                            whole.classification, receipt=f"{SET_RECEIPT}{g.price.roubles}"
                        )
                raise
        if status == 400:
            return await self._refused_whole(goods, response, splits, rebuilt)
        said = answers.whole(response, "upload")
        if _may_have_made_task(status):
            # What the next attempt does (``_stuck``), never "sent again later" (seller review
            # 34: a 503's row said «отправится позже», the wait «около 9 мин», up to an hour).
            said = replace(said, detail=f"{said.detail}: {self._may_apply(sent_at)}")
        raise _Answer(said)

    def _may_apply(self, sent_at: datetime, *, lost: bool = False) -> str:
        """What an upload answered 5xx or 422 (``_may_have_made_task``), or whose answer was
        ``lost``, leaves its goods to: a wait until WB shows whether it applied the upload, up
        to ``task_timeout`` + ``lost_hold`` from the upload (``_stuck``)."""
        hold = self.task_timeout + self.lost_hold
        until = sent_at + timedelta(seconds=hold)
        return (
            f"{ANSWER_LOST if lost else MAY_HAVE_APPLIED} the good waits until Wildberries "
            "shows whether it applied the "
            f"upload, up to {math.ceil(hold / 60)} min (at most until "
            f"{until:%Y-%m-%d %H:%M:%S} UTC)"
        )

    async def _already(
        self, goods: list[_Good], words: str, alone: bool, checked: bool
    ) -> dict[str, _Said]:
        """An upload refused "already set" (or "all item Nos. … incorrectly, or … already
        set")."""
        if len(goods) > 1 and not checked:
            return await self._already_for_several(goods, words)
        if len(goods) > 1:
            # Read back, and refused again: one by one (a request each).
            out: dict[str, _Said] = {}
            for g in goods:
                out.update(await self._upload([g], alone=True))
            return out
        return await self._already_or_refused(goods[0], words, alone)

    async def _refused_whole(
        self,
        goods: list[_Good],
        response: httpx.Response,
        splits: list[int] | None,
        rebuilt: bool,
    ) -> dict[str, _Said]:
        """A validation 400 refuses the whole upload for one bad good and names none (research
        §2.1: "Invalid item No.", "Invalid price value", …; review 32c finding 5: one card
        deleted since the map was read quarantined the 999 others). Halves uploaded apart find
        the bad goods and the others go, bounded by ``SPLITS`` requests shared by the halves
        (as the Yandex Market target's ``_Unnamed``). A good refused alone "Invalid item No."
        has the map rebuilt, as a task's line refusing its nmID does (``_again``): another
        nmID is uploaded under it, none is ``unknown-sku``, the same keeps WB's refusal. A good
        refused alone otherwise, or past the bound, ends with WB's words (``channel-rule``)."""
        splits = [SPLITS] if splits is None else splits
        if len(goods) > 1 and splits[0] >= 2:
            splits[0] -= 2
            half = len(goods) // 2
            out = await self._upload(goods[:half], splits=splits, rebuilt=rebuilt)
            out.update(await self._upload(goods[half:], splits=splits, rebuilt=rebuilt))
            return out
        words = answers.error_text(response)
        if len(goods) == 1 and answers.INVALID_NM in words.lower():
            g = goods[0]
            out = {
                g.price.message.message_id: Classification(
                    Verdict.TERMINAL,
                    f"HTTP 400 {words}: Wildberries refused nmID {g.nm_id} of vendor code "
                    f"{g.price.vendor_code!r}",
                    http_status=400,
                    reason=Reason.UNKNOWN_SKU,
                )
            }
            if rebuilt:
                return out
            again = await self._again([g], out)
            if again:
                return await self._upload(again, splits=splits, rebuilt=True)
            return out
        said = answers.whole(response, "upload")
        return {g.price.message.message_id: said for g in goods}

    async def _already_for_several(self, goods: list[_Good], words: str) -> dict[str, _Said]:
        """An upload of several goods refused whole as "already set" (research §2.1: which
        goods is not said; whether WB refuses a mix of changed and unchanged goods this way is
        UNCONFIRMED, §2.5, §8). WB's catalogue is read back (``_held_prices``: a request a good
        when few, else the catalogue's pages, 1,000 goods a request): a good holding this price
        is delivered; the rest are uploaded again together, and only if that is refused
        "already set" again, one by one (a 1,000-good task of prices all in force costs its
        catalogue's pages, not 1,000 requests)."""
        held = await self._held_prices({g.nm_id for g in goods})
        out: dict[str, _Said] = {}
        rest: list[_Good] = []
        for g in goods:
            if held.get(g.nm_id) == g.price.roubles:
                out[g.price.message.message_id] = _already(words, g, g.price.roubles)
            else:
                rest.append(g)
        if rest:
            out.update(await self._upload(rest, checked=True))
        return out

    async def _after_upload(self, goods: list[_Good], upload_id: int) -> dict[str, _Said]:
        """The goods WB took in task ``upload_id``: awaited (or, ``poll_at_once``, polled now)."""
        if self.poll_at_once:
            return {**await self._deliver_after_upload(goods)}
        return {
            g.price.message.message_id: self._awaiting(upload_id, self.first_poll) for g in goods
        }

    async def _replayed(
        self, upload_id: int, tasks: list[Task], goods: list[_Good]
    ) -> dict[str, _Said]:
        """A 208 names an earlier task of these goods (research §2.1, §2.5: an identical upload's,
        or with ``dedup_by = goods`` any price's; the
        criterion and window are UNCONFIRMED). Still pending, that task is this upload's own:
        it has not applied yet, so its outcome is this price's, and the usual poll reads it.
        Ended (processed or cancelled), its outcome was then, not now: another task may have
        set another price since (1600, then 1500, then 1600 again: WB names the first task and
        holds 1500). So WB's catalogue is read back (``_held_prices``): holding this price,
        the good is delivered; holding another (or the old task failed it: a sale lock lifted
        since), the good was not applied now: its task row is dropped and it waits to be
        uploaded again once WB makes a new task (``_replay_wait``). A good the catalogue does
        not list is left to the usual poll (the task's line: a refused nmID, left out)."""
        try:
            return await self._replayed_read(upload_id, goods)
        except _Answer:
            # Not judged now (a 429's bar longer than a send waits, a read that failed): the
            # rows go, so that this 208's task is never judged later by its lines, which carry
            # this price and the old outcome; the goods are uploaded again, WB naming the task
            # again, and read then.
            await self._db(self.store.drop_tasks, [g.nm_id for g in goods], upload_id)
            raise

    async def _replayed_read(self, upload_id: int, goods: list[_Good]) -> dict[str, _Said]:
        """``_replayed``, its task's status and lines and the catalogue read."""
        if not await self.budget.take_poll(wait=True, most=_PATIENCE.get()):
            raise _Answer(answers.budget_held(self.budget.poll_wait()))
        meta = await self._task_status("/api/v2/history/tasks", upload_id)
        status = meta.get("status") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or status not in (DONE, SOME_ERRORS, ALL_ERRORS, CANCELLED):
            return {}
        failed: dict[int, str] = {}  # nmID -> why the old task did not apply it
        if status == CANCELLED:
            failed = {g.nm_id: "it was cancelled (status 4)" for g in goods}
        elif status != DONE:
            rows = await self._goods(upload_id)
            for g in goods:
                row = rows.get(g.nm_id) if isinstance(rows, dict) else None
                if row is not None and row.get("status") == ITEM_ERROR:
                    failed[g.nm_id] = f"it failed the good: {answers.item_words(row)}"
        held = await self._held_prices({g.nm_id for g in goods})
        out: dict[str, _Said] = {}
        for g in goods:
            if g.nm_id not in held:
                continue  # not listed: the usual poll reads the task's line for it
            if held[g.nm_id] == g.price.roubles:
                out[g.price.message.message_id] = _in_force(
                    Classification(
                        Verdict.DELIVERED,
                        f"Wildberries answered 208 with task {upload_id}, an earlier task it "
                        f"named for these goods; its catalogue holds {g.price.roubles} for nmID "
                        f"{g.nm_id}: the price is in force",
                        http_status=208,
                        receipt=f"wb-task:{upload_id}",
                    ),
                    g,
                )
                continue
            why = failed.get(g.nm_id) or (
                f"it was processed then; WB holds {held[g.nm_id]} for nmID {g.nm_id} now"
            )
            out[g.price.message.message_id] = self._replay_wait(g, upload_id, why)
        ended = [g.nm_id for g in goods if g.price.message.message_id in out]
        await self._db(self.store.drop_tasks, ended, upload_id)
        return out

    def _replay_wait(self, g: _Good, upload_id: int, why: str) -> Classification:
        """A good a 208 named an ended task for, not applied now: it waits, uncharged
        (``AWAITING``, WB's own rule keeps a new task from being made), to be uploaded again
        after ``REPLAY_WAIT``. Bounded by the target's own clock, never WB's ``uploadDate``
        (its form and precision are not documented): the first such 208 for this task is kept
        in the delivery's receipt (``wb-208:<task>:<epoch s>``), and once WB has named the
        ended task for ``task_timeout`` the attempt is charged (``TEMPORARY``), so that it
        ends ``retry-limit`` with WB's words."""
        now = self.clock()
        since = _replay_since(g.price.message.receipt, upload_id) or now
        receipt = f"{REPLAY_RECEIPT}{upload_id}:{int(since.timestamp())}"
        waited = (now - since).total_seconds()
        if waited < self.task_timeout:
            return Classification(
                Verdict.AWAITING,
                f"Wildberries answered 208 with task {upload_id}, an earlier task it named for "
                f"these goods, which has ended ({why}): not applied now; uploaded again once WB "
                "makes a new task",
                http_status=208,
                receipt=receipt,
                again_in=REPLAY_WAIT,
            )
        return Classification(
            Verdict.TEMPORARY,
            f"Wildberries has answered 208 with task {upload_id}, an earlier task it named for "
            f"these goods, which has ended ({why}), for {waited:.0f} s instead of making a new "
            "task: the price is not applied",
            http_status=208,
            receipt=receipt,
            about_item=True,
        )

    async def _held_prices(self, nm_ids: set[int]) -> dict[int, int]:
        """The price WB holds now for each of ``nm_ids`` its catalogue lists: each asked by
        ``filterNmID`` when few (the good's own line picked from the answer), else (or when an
        answer lists other goods only) from the whole catalogue's pages."""
        found: dict[int, int] = {}
        rest = set(nm_ids)
        if len(nm_ids) <= FEW:
            for nm in sorted(nm_ids):
                response = await self._call(
                    "GET",
                    "/api/v2/list/goods/filter",
                    "read",
                    {"limit": "1", "filterNmID": str(nm)},
                )
                body = answers.body(response)
                data = body.get("data") if isinstance(body, dict) else None
                listed = data.get("listGoods") if isinstance(data, dict) else None
                if not isinstance(listed, list):
                    continue
                price = _price_of(listed, nm)
                if price is not None:
                    found[nm] = price
                if price is not None or not listed:
                    rest.discard(nm)  # found, or WB lists no such good
        if rest:
            found.update(await self._prices(rest))
        return found

    async def _deliver_after_upload(self, goods: list[_Good]) -> dict[str, Classification]:
        """``poll_at_once``: the goods just uploaded, their task polled once now."""
        return await self._deliver([g.price for g in goods])

    async def _already_or_refused(self, good: _Good, words: str, alone: bool) -> dict[str, _Said]:
        """One good refused as "already set" (delivered), or as "all item Nos. specified
        incorrectly, or already set" (research §2.1: no such good, OR nothing changes): the map
        rebuilt; another ``nmID`` there is uploaded under it; none: ``unknown-sku``; the same
        one: the good's price read back (``_held_prices``), delivered only when WB holds this
        price. Holding another (review 32c finding 4: a card in the trash, still listed), WB
        refused a change for a reason it did not give: unknown (contract 5), never delivered."""
        message_id = good.price.message.message_id
        if answers.ALREADY_SET in words.lower() and answers.ALL_WRONG not in words:
            return {message_id: _already(words, good)}
        out: dict[str, _Said] = {}
        again = await self._again([good], out)
        if again:
            return await self._upload(again, alone=alone)
        if message_id in out:
            return out
        now = (await self._held_prices({good.nm_id})).get(good.nm_id)
        if now == good.price.roubles:
            return {message_id: _already(words, good, now)}
        holds = "shows no price for it" if now is None else f"holds {now} for it"
        return {
            message_id: Classification(
                Verdict.UNKNOWN,
                f"HTTP 400 {words}: Wildberries' catalogue lists vendor code "
                f"{good.price.vendor_code!r} as nmID {good.nm_id} and {holds}, "
                f"not {good.price.roubles}: not applied, for a reason WB did not give",
                http_status=400,
            )
        }

    def _may_write(self) -> None:
        """The token's own claims (research §2.2) said before a write: none, read-only, or
        without the Prices category pause delivery without a request."""
        # Read again before each write: while writes are refused the worker tries one now and
        # then without asking for the credentials again, and the operator's new token file
        # must be what that write carries.
        try:
            self._token = self._read_token()
        except ExchangeError as exc:  # the file cannot be read: its name and why, no value
            raise _Answer(
                Classification(Verdict.PAUSE, str(exc), error_class=SETTING_MISSING)
            ) from None
        if self._token is None:
            raise _Answer(answers.token_missing())
        said = claims(self._token)
        if said is None:
            return  # not readable here: WB judges it
        if said.read_only:
            raise _Answer(
                Classification(
                    Verdict.PAUSE,
                    "the Wildberries token is read-only: its claims say so",
                    error_class=answers.READ_ONLY_TOKEN,
                )
            )
        if not said.prices:
            raise _Answer(
                Classification(
                    Verdict.PAUSE,
                    "the Wildberries token has no «Цены и скидки» (Prices and discounts) "
                    "category: its claims say so",
                    error_class=answers.TOKEN_REFUSED,
                )
            )

    # -- polling a task --------------------------------------------------------------------

    async def _poll(
        self, upload_id: int, uploaded_at: datetime, size: int, *, urgent: bool = False
    ) -> _Processed | str:
        """The task's outcome: its goods' lines (processed), or pending, later (no
        poll this time: the budget's poll share is spent, or WB asked to wait), cancelled, or
        lost (not shown for ``task_timeout``). The lines of every processed task are read,
        one without errors too: each names its good's ``vendorCode`` (research §2.4), and a
        card renamed in WB's cabinet since the map was read is found by its task
        (``_stale_map``: review wbstall finding 3), as well as which prices a task a 208 named
        carried. An ended task's outcome is kept (``_ended``): the other goods of the task
        (a newer price of each, waiting for it: one task per nmID) are judged by it without
        a poll each (review wbstall finding 1). ``urgent``: a newer price of the task's good
        waits for its outcome: the poll is that upload's own first request, and takes its
        token in the uploads' turn (``_poll_token``), never put off behind the uploads it
        would let go.

        One poll of this worker at a time (``_polling``): a poll of a pending task may be
        answered 400 and counted as ten requests (research §2.3, §8), and a second one sent
        before that answer came would meet a 429 (review wb4xx34); after it, the next poll
        takes its token from the bucket that answer charged (or finds its task ended)."""
        ended = self._ended.get(upload_id)
        if ended is not None:
            return _outcome(ended[1], size)
        async with self._polling():
            return await self._poll_alone(upload_id, uploaded_at, size, urgent=urgent)

    async def _poll_alone(
        self, upload_id: int, uploaded_at: datetime, size: int, *, urgent: bool
    ) -> _Processed | str:
        """``_poll``, its turn come."""
        ended = self._ended.get(upload_id)
        if ended is not None:
            return _outcome(ended[1], size)
        if not await self._poll_token(urgent):
            return _LATER
        meta = await self._task_status("/api/v2/history/tasks", upload_id)
        if isinstance(meta, str):
            return meta
        status = meta.get("status") if meta else None
        if meta is not None and status in (DONE, SOME_ERRORS, ALL_ERRORS):
            rows = await self._goods(upload_id)
            if isinstance(rows, str):
                return rows
            listed = meta.get("overAllGoodsNumber")
            return _outcome(self._keep(upload_id, (status, listed, rows)), size)
        if status == CANCELLED:
            return _outcome(self._keep(upload_id, _CANCELLED), size)
        # Not in the history yet (research §2.4, §8: a fresh task may show in the buffer).
        if await self._poll_token(urgent):
            buffered = await self._task_status("/api/v2/buffer/tasks", upload_id)
            if isinstance(buffered, dict) and buffered.get("status") == PENDING:
                return _PENDING
        if self.clock() - uploaded_at > timedelta(seconds=self.task_timeout):
            return _LOST
        return _PENDING

    async def _poll_token(self, urgent: bool) -> bool:
        """A token for a poll's request: within the polls' share (``take_poll``, put off at
        once when it has none; ``poll_at_once``, a test's simulator processing at once: the
        look right after the upload waits for it), or, ``urgent``, in the uploads' turn,
        waiting as an upload does (a poll a newer price waits for: the polls' share would put
        it off behind the very uploads it lets go, review wbstall finding 1). False: put off."""
        if not urgent:
            return await self.budget.take_poll(wait=self.poll_at_once, most=_PATIENCE.get())
        try:
            await self.budget.take("read", most=_PATIENCE.get())
        except Later:
            return False
        return True

    def _keep(self, upload_id: int, outcome: _Ended) -> _Ended:
        """An ended task's outcome (WB's history of a processed or cancelled task never
        changes), kept ``task_timeout`` + ``lost_hold`` seconds."""
        now = self.clock()
        keep = timedelta(seconds=self.task_timeout + self.lost_hold)
        for old in [k for k, (at, _) in self._ended.items() if now - at > keep]:
            del self._ended[old]
        self._ended[upload_id] = (now, outcome)
        return outcome

    async def _task_status(self, path: str, upload_id: int) -> dict[str, Any] | str | None:
        response = await self._call(
            "GET", path, "poll", {"uploadID": str(upload_id)}, judged=False, counted=False
        )
        if response.status_code == 200:
            found = answers.body(response)
            data = found.get("data") if isinstance(found, dict) else None
            return data if isinstance(data, dict) else None
        if response.status_code == 400:
            return None  # research §8: a task not processed yet may be 400 "Invalid request…"
        if response.status_code in (401, 403):
            raise _Answer(answers.whole(response, "task poll"))
        return _LATER

    async def _goods(self, upload_id: int) -> dict[int, dict[str, Any]] | str:
        rows: dict[int, dict[str, Any]] = {}
        offset = 0
        while True:
            # The task's status was read: finish it, unless a 429 bars the budget longer than
            # a send waits (put off: the poll is made again).
            if not await self.budget.take_poll(wait=True, most=_PATIENCE.get(), rest=True):
                return _LATER
            response = await self._call(
                "GET",
                "/api/v2/history/goods/task",
                "poll",
                {"uploadID": str(upload_id), "limit": str(PAGE), "offset": str(offset)},
                judged=False,
                counted=False,
            )
            if response.status_code in (401, 403):
                raise _Answer(answers.whole(response, "task poll"))
            if response.status_code != 200:
                return _LATER
            found = answers.body(response)
            data = found.get("data") if isinstance(found, dict) else None
            page = data.get("historyGoods") if isinstance(data, dict) else None
            if not isinstance(page, list):
                return _LATER
            for row in page:
                if isinstance(row, dict) and isinstance(row.get("nmID"), int):
                    rows[row["nmID"]] = row
            if len(page) < PAGE:
                return rows
            offset += PAGE

    # -- the catalogue ---------------------------------------------------------------------

    async def _nm_ids(self, vendor_codes: set[str]) -> dict[str, int]:
        return (await self._nm_ids_read(vendor_codes))[0]

    async def _nm_ids_read(
        self, vendor_codes: set[str]
    ) -> tuple[dict[str, int], datetime | None, bool]:
        """The nmIDs of those of ``vendor_codes`` the map holds, when the map was read from
        WB's catalogue, and whether that read is this call's (rebuilt now, or while this call
        waited for the rebuild lock): only such a read makes a missing vendor code
        ``unknown-sku`` (a card made on WB after an older read is found by the next one).

        A map older than ``catalogue_refresh`` is read again first, even when it holds every
        vendor code: a vendor code moved in WB's cabinet to another card (the old card renamed,
        a new one made under it) or taken off its card must not send a price to the card the
        old read named (review wbcat finding 1; research §2.1: ``nmID`` is WB's, the vendor
        code the seller's, §2.6 item 1: the map is a cache). So no price goes out on a map
        older than ``wb_catalogue_refresh``."""
        before = await self._db(self.store.refreshed_at)
        known = await self._db(self.store.nm_ids, sorted(vendor_codes))
        if len(known) == len(vendor_codes) and not self._rebuild_now and not self._due(before):
            return known, None, False
        # One rebuild at a time: the requests of one batch go at once, and each would page the
        # whole catalogue (and write the map over the others', which PostgreSQL refuses).
        async with self._rebuilding():
            at = await self._db(self.store.refreshed_at)
            fresh = at is not None and at != before  # another rebuilt it while this waited
            known = await self._db(self.store.nm_ids, sorted(vendor_codes))
            if not (self._due(at) or self._rebuild_now):
                # Read within ``catalogue_refresh`` (perhaps by the rebuild this one waited
                # for): a vendor code it lacks waits for the next read (``_until_read_again``).
                return known, at, fresh
            self._rebuild_now = False
            now = self.clock()
            catalogue = await self.catalogue()
            await self._db(self.store.replace_catalogue, catalogue, now)
            return {v: catalogue[v] for v in vendor_codes if v in catalogue}, now, True

    def _due(self, read_at: datetime | None) -> bool:
        """Whether the map read at ``read_at`` (None: never read) is to be read again."""
        return read_at is None or self.clock() - read_at >= timedelta(
            seconds=self.catalogue_refresh
        )

    def _polling(self) -> asyncio.Lock:
        """The polls' turn (``_poll``), made in the running loop."""
        loop = asyncio.get_running_loop()
        if self._poll_lock is None or self._poll_loop is not loop:
            self._poll_lock, self._poll_loop = asyncio.Lock(), loop
        return self._poll_lock

    def _rebuilding(self) -> asyncio.Lock:
        """The catalogue's rebuild lock, made in the running loop (a target outlives the event
        loop of ``exchange check`` or a test)."""
        loop = asyncio.get_running_loop()
        if self._rebuild_lock is None or self._rebuild_loop is not loop:
            self._rebuild_lock, self._rebuild_loop = asyncio.Lock(), loop
        return self._rebuild_lock

    async def catalogue(self) -> dict[str, int]:
        """Every vendor code's nmID, paging ``/api/v2/list/goods/filter`` within the budget."""
        found: dict[str, int] = {}
        async for page in self._catalogue_pages():
            if page is None:
                raise _Answer(
                    Classification(
                        Verdict.UNKNOWN,
                        "HTTP 200: the catalogue's answer has no listGoods",
                        http_status=200,
                    )
                )
            for good in page:
                if isinstance(good, dict):
                    code, nm = good.get("vendorCode"), good.get("nmID")
                    if isinstance(code, str) and isinstance(nm, int):
                        found[code] = nm
        return found

    async def _catalogue_pages(self) -> AsyncIterator[list[Any] | None]:
        """The catalogue's pages (``/api/v2/list/goods/filter``, ``PAGE`` goods each) within
        the budget, in order; ``None`` for a page whose answer has no ``listGoods`` (the
        reader decides), after which there are no more."""
        offset = 0
        while True:
            response = await self._call(
                "GET",
                "/api/v2/list/goods/filter",
                "read",
                {"limit": str(PAGE), "offset": str(offset)},
            )
            body = answers.body(response)
            data = body.get("data") if isinstance(body, dict) else None
            page = data.get("listGoods") if isinstance(data, dict) else None
            if not isinstance(page, list):
                yield None
                return
            yield page
            if len(page) < PAGE:
                return
            offset += PAGE

    # -- withheld (contract 13) ------------------------------------------------------------

    async def quarantined(self) -> set[int]:
        """The ``nmID``s in WB's price quarantine now (``_quarantine``)."""
        return set(await self._quarantine())

    async def _quarantine(self) -> dict[int, int | None]:
        """WB's price quarantine now (``/api/v2/quarantine/goods``, paged): each ``nmID`` and
        the price it holds (``newPrice``; None when the line gives none). An answer without
        the ``quarantineGoods`` list (an empty or odd 200) is a failed read, raised as unknown,
        never "nothing in quarantine" (review 32c finding 6: a price WB still withheld ended
        superseded)."""
        held: dict[int, int | None] = {}
        offset = 0
        while True:
            response = await self._call(
                "GET",
                "/api/v2/quarantine/goods",
                "read",
                {"limit": str(PAGE), "offset": str(offset)},
            )
            body = answers.body(response)
            data = body.get("data") if isinstance(body, dict) else None
            page = data.get("quarantineGoods") if isinstance(data, dict) else None
            if not isinstance(page, list):
                raise _Answer(
                    Classification(
                        Verdict.UNKNOWN,
                        f"HTTP {response.status_code}: the quarantine list's answer has no "
                        "quarantineGoods",
                        http_status=response.status_code,
                    )
                )
            for line in page:
                if isinstance(line, dict) and isinstance(line.get("nmID"), int):
                    held[line["nmID"]] = _line_price({"price": line.get("newPrice")})
            if len(page) < PAGE:
                return held
            offset += PAGE

    async def withheld_shown(self, messages: Sequence[OutgoingMessage]) -> list[Shown]:
        # The worker's recheck: a 429's bar held longer than a send waits is a look that
        # failed (unknown), made again at the next recheck; the stop never waits for it.
        patience = _PATIENCE.set(LONGEST_WAIT)
        try:
            return await self._withheld_shown(messages)
        finally:
            _PATIENCE.reset(patience)

    async def _withheld_shown(self, messages: Sequence[OutgoingMessage]) -> list[Shown]:
        """A withheld price is live once its ``nmID`` left the quarantine and the catalogue
        holds it (the seller confirmed it in the cabinet); still listed: withheld, unless the
        quarantine holds another price for the good (``REPLACED``: a newer upload replaced this
        one there, and the delivery ends superseded); left with
        another price there (the seller's own, or a newer one of ours): unknown the first time
        (the catalogue may lag the cabinet: research §2.4 gives no time to apply), and
        ``ELSEWHERE`` when the next look finds the same other price: the delivery ends
        cancelled, superseded on the channel (contract 13), never withheld forever."""
        try:
            held = await self._quarantine()
            read = await self._read(messages)
            codes = {p.vendor_code for p in read if isinstance(p, _Price)}
            nm = await self._db(self.store.nm_ids, sorted(codes))
            left = [p for p in read if isinstance(p, _Price) and nm.get(p.vendor_code) not in held]
            prices = await self._prices({nm[p.vendor_code] for p in left if p.vendor_code in nm})
        except _Answer:
            return [Shown.UNKNOWN for _ in messages]
        shown: list[Shown] = []
        for p in read:
            if not isinstance(p, _Price) or p.vendor_code not in nm:
                shown.append(Shown.UNKNOWN)
                continue
            key, where = p.message.message_id, nm[p.vendor_code]
            other = prices.get(where) if where not in held else None
            if where in held and held[where] not in (None, p.roubles):
                # Another price in its place there (a newer upload's: 300 withheld, then 280,
                # review 32n finding 4a): confirmed, that one goes live, never this one.
                shown.append(Shown.REPLACED)
            elif where in held:
                shown.append(Shown.WITHHELD)
            elif other == p.roubles:
                shown.append(Shown.LIVE)
            elif other is not None and self._elsewhere.get(key) == other:
                shown.append(Shown.ELSEWHERE)
            else:
                shown.append(Shown.UNKNOWN)
            if shown[-1] is Shown.UNKNOWN and other is not None:
                self._elsewhere[key] = other  # left at another price: said at the next look
            else:
                self._elsewhere.pop(key, None)
        return shown

    async def release_withheld(self, messages: Sequence[OutgoingMessage]) -> list[Release]:
        """WB's API has no way to release a quarantined price (research §2.4): the seller
        confirms it in the cabinet, or sends a newer price."""
        return [Release(False, answers.WHERE_TO_RELEASE) for _ in messages]

    async def _prices(self, nm_ids: set[int]) -> dict[int, int]:
        """The price in force of each of ``nm_ids``, read from the whole catalogue's pages (a
        page without goods ends the read with what was found)."""
        if not nm_ids:
            return {}
        found: dict[int, int] = {}
        async for page in self._catalogue_pages():
            if page is None:
                return found
            for good in page:
                nm = good.get("nmID") if isinstance(good, dict) else None
                price = _good_price(good) if nm in nm_ids else None
                if isinstance(nm, int) and price is not None:
                    found[nm] = price
        return found

    # -- reading prices back (exchange verify) ---------------------------------------------

    async def read_prices(self, messages: Sequence[OutgoingMessage]) -> list[HeldPrice]:
        read = list(zip(messages, await self._read(messages), strict=True))
        codes = {p.vendor_code for _, p in read if isinstance(p, _Price)}
        try:
            nm = await self._nm_ids(codes)
            prices = await self._prices(set(nm.values()))
        except _Answer as whole:
            raise ReadBackFailed(whole.classification.detail) from None
        held: list[HeldPrice] = []
        for message, p in read:
            if not isinstance(p, _Price):
                held.append(HeldPrice(message.message_id, "", "", None, None, unreadable=p.detail))
                continue
            where = nm.get(p.vendor_code)
            amount = prices.get(where) if where is not None else None
            held.append(
                HeldPrice(
                    message.message_id,
                    p.vendor_code,
                    "price",
                    Decimal(p.roubles),
                    Decimal(amount) if amount is not None else None,
                    found=where is not None,
                )
            )
        return held

    # -- the wire --------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        what: Literal["upload", "poll", "read"],
        params: dict[str, str] | None = None,
        *,
        body: dict[str, Any] | None = None,
        judged: bool = True,
        counted: bool = True,
        ready: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
    ) -> httpx.Response:
        """One request within the budget (``counted``: it takes a token here; a poll took its
        own) and the worker's pace; a 429 bars the budget for ``X-Ratelimit-Retry``.
        ``judged``: any answer but a 2xx raised as ``answers.whole`` reads it. ``ready``: called
        right before the request goes (its token taken, its turn come), the body it returns
        sent (None: nothing to send, ``_Unsent``)."""
        if self._token is None:
            raise _Answer(answers.token_missing())
        for tries in range(1, BAR_TRIES + 1):
            refusals = self.budget.refusals
            if counted:
                try:
                    await self.budget.take(what if what != "poll" else "read", most=_PATIENCE.get())
                except Later as later:
                    # A longer wait would hold the worker's stop (it waits for the sends in
                    # flight): what this request carried goes back uncharged, due when the
                    # budget lets it go (as the Yandex Market target's prices,
                    # yandex_market/pace.py).
                    raise _Answer(answers.budget_held(later.seconds)) from None
                refusals = self.budget.refusals
            sent_at = await self._pacer.turn()
            if not counted or tries == BAR_TRIES or self.budget.refusals == refusals:
                break
            # A 429 came while this one waited for its turn (review 32n finding 3): the token
            # it took is void, WB's bucket was empty; its bar holds this request too.
            self._pacer.done(sent_at, None, None)
        try:
            if ready is not None:
                body = await ready()
                if body is None:
                    raise _Unsent
        except BaseException:
            self._pacer.done(sent_at, None, None)
            raise
        token = self._token
        headers = {"Authorization": token}
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        self.requests_sent += 1
        try:
            response = await self._http.request(
                method, path, params=params, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            self._pacer.done(sent_at, None, None)
            raise _Answer(
                transport_verdict(key_masked_failure(httpx_failure(exc), token))
            ) from None
        except BaseException:
            self._pacer.done(sent_at, None, None)
            raise
        # WB's words, wherever they go (a detail, a task's errorText, a log, a receipt), never
        # hold the token.
        response = key_masked(response, token)
        retry = answers.retry_in(response) if response.status_code == 429 else None
        left = response.headers.get("X-Ratelimit-Remaining", "")
        if 400 <= response.status_code < 500 and response.status_code not in (401, 403, 429):
            # A token refused is answered before the limit is counted (it pauses delivery).
            self.budget.answered_4xx(int(left) if left.isdigit() else None, poll=what == "poll")
        if left.isdigit():
            self.budget.remaining(int(left))
        self._pacer.done(sent_at, response.status_code, retry)
        if response.status_code == 429:
            self.budget.refused(_seconds(retry))
        # A 4xx charged as ten, or a 429: the channel's other workers keep it too.
        await self.budget.tell_others()
        if response.status_code == 429:
            if what == "poll":
                return response
            raise _Answer(answers.whole(response, what))
        if judged and not 200 <= response.status_code < 300:
            raise _Answer(answers.whole(response, what))
        return response


def _outcome(ended: _Ended, size: int) -> _Processed | str:
    """A kept outcome (``_keep``) for the goods of a task whose upload carried ``size`` goods:
    short when WB counted fewer."""
    if isinstance(ended, str):
        return ended
    status, listed, rows = ended
    return _Processed(rows, isinstance(listed, int) and listed < size, status)


def _may_have_made_task(status: int) -> bool:
    """An upload answered ``status`` (neither 200 nor 208) may still have made a task: a 5xx
    (a gateway's 500, 502 or 504 after WB's backend took the request) or 422 "Unexpected
    result" (research §2.1: WB asks to take it to its support; what it did is not said). Its
    stored ``UNNAMED`` row stays, holding the good as for an answer lost (``_stuck``). Only an
    answer that says no task was made drops it: 400 with its errorText (§2.1), 401/403
    (§2.2), 429 (§2.3: the request is refused, ``X-Ratelimit-Retry``), 409, 413 and the
    other 4xx."""
    return status >= 500 or status == 422


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except ValueError:
        return 1.0


def _said_set(p: _Price) -> bool:
    """Whether WB said this price was set already when it was last sent (``SET_RECEIPT``)."""
    return p.message.receipt == f"{SET_RECEIPT}{p.roubles}"


def _replay_since(receipt: str | None, upload_id: int) -> datetime | None:
    """When the first 208 naming task ``upload_id`` was met, from the delivery's receipt
    (``_replay_wait``); None when the receipt is of another task or none."""
    prefix = f"{REPLAY_RECEIPT}{upload_id}:"
    if not receipt or not receipt.startswith(prefix):
        return None
    try:
        return datetime.fromtimestamp(int(receipt.removeprefix(prefix)), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _price_of(listed: list[Any], nm_id: int) -> int | None:
    """The price of good ``nm_id`` in a catalogue page (its first size's: goods without
    per-size prices hold one), or None when the page does not list it."""
    for good in listed:
        if isinstance(good, dict) and good.get("nmID") == nm_id:
            return _good_price(good)
    return None


def _line_price(row: dict[str, Any] | None) -> int | None:
    """The price a task's line (``history/goods/task``) says the task carried for its good,
    or None when it gives none."""
    price = row.get("price") if row is not None else None
    if isinstance(price, bool) or not isinstance(price, int | float):
        return None
    return int(price) if price == int(price) else None


def _good_price(good: Any) -> int | None:
    sizes = good.get("sizes") if isinstance(good, dict) else None
    if isinstance(sizes, list) and sizes and isinstance(sizes[0], dict):
        price = sizes[0].get("price")
        return price if isinstance(price, int) else None
    return None


def _task_id(response: httpx.Response) -> int | None:
    found = answers.body(response)
    data = found.get("data") if isinstance(found, dict) else None
    ident = data.get("id") if isinstance(data, dict) else None
    return ident if isinstance(ident, int) else None


def _item(item: items.Item) -> _Price:
    return _Price(tuple(item.carried), item.offer_id, int(item.prices["price"]), item.sku)


def _shared_article(p: _Price, other: str) -> Classification:
    return items.invalid(
        f"SKUs {other!r} and {p.sku!r} share the article (Артикул) {p.vendor_code!r}, "
        "one Wildberries good (one nmID, one price): SKU "
        f"{other!r} was sent to it first, and {p.sku!r} would overwrite its price; "
        "give each SKU its own article in 1C"
    )


def _unknown_sku(vendor_code: str, landed: str | None = None) -> Classification:
    """``landed``: the words of a price that landed on a good bearing another vendor code now
    (``_landed_elsewhere``), said first."""
    missing = f"Wildberries' catalogue has no good with vendor code {vendor_code!r}"
    return Classification(
        Verdict.TERMINAL,
        missing if landed is None else f"{landed}; {missing} now",
        http_status=200,
        reason=Reason.UNKNOWN_SKU,
    )


def _listed_as(row: dict[str, Any] | None, good: _Good) -> str | None:
    """The vendor code a task's line names for ``good``'s nmID when it is not the one
    uploaded (research §2.4: ``vendorCode`` in ``historyGoods``); None: the same, or not said."""
    listed = row.get("vendorCode") if row is not None else None
    if isinstance(listed, str) and listed and listed != good.price.vendor_code:
        return listed
    return None


def _landed_elsewhere(upload_id: int, good: _Good, listed: str) -> str:
    return (
        f"Wildberries: task {upload_id} updated nmID {good.nm_id}, which Wildberries names "
        f"vendor code {listed!r} now, not {good.price.vendor_code!r}: the vendor code map "
        "was stale and is read again"
    )


def _behind(found: _InForce, held: int | None, wait: float) -> Classification:
    """A price in force waiting behind ``held``, the price WB's quarantine holds for its good
    (None: a line without ``newPrice``), a look every ``wait`` seconds."""
    return Classification(
        Verdict.AWAITING,
        answers.behind_words(found.roubles, found.nm_id, held),
        http_status=found.said.http_status,
        # Whole seconds, at least one: never due again at once.
        again_in=float(max(1, math.ceil(wait))),
    )


def _already(words: str, good: _Good, held: int | None = None) -> _InForce:
    """WB's "already set": the price is in force, settled once its quarantine is read
    (``_behind_quarantine``)."""
    read = f" (its catalogue holds {held})" if held is not None else ""
    return _in_force(
        Classification(
            Verdict.DELIVERED,
            f"HTTP 400 {words}: the price is in force already{read}",
            http_status=400,
        ),
        good,
    )

"""A simulator of Wildberries' Prices and Discounts API (host
``discounts-prices-api.wildberries.ru``), written from ``../shared/research/marketplaces.md``
section 2 (cited below as "research §2.x") and its lists of what a faithful simulator reproduces
(§7, "Wildberries simulator") and of what is UNCONFIRMED (§8), never from the service's target:

    GET  /api/v2/list/goods/filter?limit=&offset=[&filterNmID=]   the catalogue: nmID per vendorCode
    POST /api/v2/upload/task                {"data": [{"nmID", "price", "discount"}]}: a task
    GET  /api/v2/history/tasks?uploadID=    a processed task: status 3/4/5/6
    GET  /api/v2/history/goods/task?uploadID=&limit=&offset=      its items: status 2/3, errorText
    GET  /api/v2/buffer/tasks?uploadID=     a task not processed yet: status 1
    GET  /api/v2/buffer/goods/task?uploadID=&limit=&offset=
    GET  /api/v2/quarantine/goods?limit=&offset=                  goods held in price quarantine

What it does, and where the research says so (the conformance table,
docs/simulators/wildberries.md, lists each with its test):

- The token in ``Authorization`` (raw, research §2.2) is a JWT the simulator signs (HS256 with its
  own secret: WB's signature cannot be checked here); its claims as WB's (§2.2): ``acc`` 1 Base,
  2 Test, 3 Personal, 4 Service; ``s`` a bitmask, bit 3 Prices and discounts, bit 30 read-only;
  ``exp``. A missing, malformed, forged or expired token, one without the Prices category, a
  Test token outside the sandbox, or a revoked one: 401 with WB's problem body (§2.2); a
  read-only token on the upload: 401 "read-only token scope not allowed for this route" (§2.2,
  observed); a deleted user: 403 "Access denied" (§2.1, §2.2).
- One token bucket per account for every method of the category (§2.3): 10 requests per 6 s,
  burst 5 (a Base token: 4 an hour, burst 1); 429 with ``X-Ratelimit-Retry``,
  ``X-Ratelimit-Limit``, ``X-Ratelimit-Reset`` and WB's problem body, ``X-Ratelimit-Remaining`` on
  every other answer. No ``Retry-After`` (§2.3).
- The upload's whole-request 400s with WB's texts (§2.1), at most 1,000 goods, whole roubles;
  ``price`` before the discount, ``discount`` in per cent, either may be left out (§2.1).
- The task is processed later (§2.4): until then the buffer shows it with status 1 and the
  history does not know it; then ``history/tasks`` has status 3 (no errors), 5 (some), 6 (all), 4
  (cancelled: ``cancel``); per-item status 2 (updated) or 3 with ``errorText``: the sale lock
  (``lock_for_sale``) and the price quarantine (§2.4).
- The price quarantine (§2.4): a new discounted price at most a third of the current one is not
  applied; the good is listed in ``quarantine/goods`` with the old and new price until a newer
  price is uploaded (judged again, against the price in force) or the seller releases it in the
  cabinet (``release_in_cabinet``); an upload of the price in force ("already set") releases
  it only under the switch ``already_set_releases`` (§2.4 does not say).
- The seller's cards change in the cabinet (§2.1: ``nmID`` is WB's, the vendor code the
  seller's; §2.6 item 1): ``add_good`` makes a card, ``vendor_code_in_cabinet`` gives a card
  another vendor code; the catalogue and the lines of tasks processed after it (``vendorCode``,
  §2.4) say the new one.
- 208 ``alreadyExists`` for an upload identical to one made within ``dedup_window`` (or, with
  ``dedup_by = "goods"``, of the same nmIDs at any price) (§2.5); "already set" is a 400 (§2.5).
- Faults WB documents: 409 while the account switches currency (§2.1), 422 "Unexpected result"
  (§2.1, §2.6 item 9).

The switches (``Switches``): each point research §8 leaves UNCONFIRMED, played either way.

The clock (``SimClock``, exchange/dev/simclock.py) runs ``time_scale`` times faster than the
wall clock (0: it moves only when ``advance`` is called); processing delays, the token bucket,
dates and expiry all read it. Header seconds (``X-Ratelimit-*``) are wall-clock seconds
(``SimClock.wall``), so that a client obeying them keeps to the scaled limit.

Not modelled: per-size prices (``/upload/task/size``), WB Club discounts, 402 (business
catalogue services only), the sandbox's own limit of one request a second.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
import itertools
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal, TypeGuard
from urllib.parse import parse_qs, urlsplit

from exchange.dev.httpsim import Handler, LoopbackServer, time_scale
from exchange.dev.simclock import SimClock

PRODUCTION_URL = "https://discounts-prices-api.wildberries.ru"  # research §2.1
MAX_GOODS = 1000  # research §2.1: "Максимум 1 000 товаров"
MAX_LIMIT = 1000  # research §2.4: limit ≤ 1000 on the paged reads

# Token claims, research §2.2 (WB-GEN): acc and the bits of s.
ACC_BASE, ACC_TEST, ACC_PERSONAL, ACC_SERVICE = 1, 2, 3, 4
PRICES_BIT = 1 << 3
READ_ONLY_BIT = 1 << 30

# Whole-request errorTexts, research §2.1 (WB-OAS25/26 examples).
TOO_MANY = "Upload limit exceeded: You can upload a maximum of 1 000 items"
DUPLICATE = "Duplicate item Nos."
ALREADY_SET = "The specified prices and discounts are already set"
ALL_WRONG = (
    "All item Nos. are specified incorrectly, or the specified prices and discounts are already set"
)
INVALID_FORMAT = "Invalid data format"
WHOLE_NUMBER = "Price should be a whole number"
INVALID_PRICE = "Invalid price value"
INVALID_DISCOUNT = "Invalid discount value"
INVALID_NM = "Invalid item No."
NOTHING_GIVEN = "Price and discount not specified"
EMPTY = "Empty data"
TASK_EXISTS = "This task already exists"  # research §2.1, the 208
INVALID_PARAMETERS = "Invalid request parameters"  # research §2.4 (a possible pending answer)
UNEXPECTED = "Unexpected result"  # research §2.1: 422
SWITCHING_CURRENCY = "Error while switching currency"  # research §2.1: 409
# Per-item errorTexts, research §2.4 (WB-OAS25 GoodHistory examples).
SALE_LOCK = "You can't change the item price. Item was added to the Sale due to high inventory"
QUARANTINED = (
    "The new price is several times lower than the current price. "
    "Item has been moved to Price Quarantine"
)

# Task statuses, research §2.4: history 3/4/5/6, buffer 1; item statuses 2/3.
PENDING, PROCESSED, CANCELLED, SOME_ERRORS, ALL_ERRORS = 1, 3, 4, 5, 6
ITEM_UPDATED, ITEM_ERROR = 2, 3


@dataclass(frozen=True)
class Limits:
    """A token bucket as research §2.3 tabulates it: ``requests`` per ``period`` seconds (one
    token every period/requests), at most ``burst`` at once."""

    period: float = 6.0
    requests: int = 10
    burst: int = 5

    @property
    def interval(self) -> float:
        return self.period / self.requests


EPSILON = 1e-9  # a token refilled by sums of float seconds (0.5 + 0.1) is a token

BASE_TOKEN_LIMITS = Limits(period=3600.0, requests=4, burst=1)  # research §2.3, Base token


class Bucket:
    """The account's bucket in simulated seconds since the start; a charge may take it below
    zero (a 4xx counted as ten requests, switch ``four_xx_weight``), and it refills from
    there."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.tokens = float(limits.burst)
        self.at: float | None = None
        self.barred_until = 0.0  # the moment the last 429's X-Ratelimit-Retry announced

    def barred(self, now: float) -> bool:
        """research §2.3: a retry before the announced X-Ratelimit-Retry gets 429 again,
        whatever the bucket holds by then (the header's seconds are rounded up)."""
        return now < self.barred_until - EPSILON

    def _refill(self, now: float) -> None:
        if self.at is not None:
            gained = (now - self.at) / self.limits.interval
            self.tokens = min(float(self.limits.burst), self.tokens + gained)
        self.at = now

    def take(self, now: float) -> bool:
        self._refill(now)
        if self.tokens < 1.0 - EPSILON:
            return False
        self.tokens -= 1.0
        return True

    def charge(self, now: float, tokens: float) -> None:
        self._refill(now)
        self.tokens -= tokens

    def retry_in(self, now: float) -> float:
        self._refill(now)
        return max(0.0, (1.0 - self.tokens) * self.limits.interval)

    def reset_in(self, now: float) -> float:
        self._refill(now)
        return max(0.0, (self.limits.burst - self.tokens) * self.limits.interval)

    def remaining(self, now: float) -> int:
        self._refill(now)
        return max(0, math.floor(self.tokens))


@dataclass
class Switches:
    """What research §8 leaves UNCONFIRMED for Wildberries, each playable both ways."""

    # How history/tasks (and history/goods/task, and the buffer for a task it does not hold)
    # answers an uploadID it does not know yet: "null" = 200 {"data": null}, "400" = 400
    # "Invalid request parameters" (research §2.4, §8: both readings named there).
    pending_answer: Literal["null", "400"] = "null"
    # Whether a fresh upload shows in the buffer with status 1 while pending (research §2.4:
    # observed (secondary); the docs say the buffer is for promo-calendar discounts).
    pending_in_buffer: bool = True
    # 208 for an upload identical (same goods, prices, discounts) to one made less than this
    # many seconds before; 0: never (research §2.5, §8: criterion and window UNCONFIRMED).
    dedup_window: float = 600.0
    # What makes two uploads "the same" for that 208: "body" (the same goods, prices and
    # discounts) or "goods" (the same nmIDs, whatever their prices: an upload of another price
    # for a good whose task is within the window is answered 208 naming that task) (research
    # §2.5: "Такая загрузка уже есть", its dedup criterion UNCONFIRMED).
    dedup_by: Literal["body", "goods"] = "body"
    # An unchanged good in a task that changes others: "skip" (left out of the task's goods),
    # "item-error" (status 3, "already set"), or "whole-400" (the whole upload refused "already
    # set", as when nothing changes) (research §2.5, §8: UNCONFIRMED).
    unchanged_in_mixed: Literal["skip", "item-error", "whole-400"] = "skip"
    # An unknown nmID in a task with known ones: "item-error" (status 3, "Invalid item No."),
    # "skip", or "whole-400" (the whole upload refused "Invalid item No.", a whole-request 400
    # of research §2.1's table, naming no good) (research §2.1 names only the all-unknown
    # case).
    unknown_in_mixed: Literal["skip", "item-error", "whole-400"] = "item-error"
    # How many requests a 4xx answer counts as (research §2.3: ten for the Marketplace
    # category; for Prices UNCONFIRMED, §8).
    four_xx_weight: int = 1
    # The 409 body (research §2.1, §8: UNCONFIRMED): "envelope" = WB's {"data": null, "error":
    # true, "errorText"}, "problem" = the gateway's problem body.
    conflict_body: Literal["envelope", "problem"] = "envelope"
    # Simulated seconds from upload to processing (research §2.4, §8: processing time
    # UNCONFIRMED).
    processing_delay: float = 2.0
    # Whether an upload naming a quarantined good at the price in force ("already set": a 400
    # for the whole upload, or an unchanged good of a mixed task, skipped or an item error)
    # releases the good from the quarantine. research §2.4 says "sending another
    # price/discount via API" releases it; whether the price in force again counts as another
    # is not said (§2.5 names only the 400 for it): False = the quarantine keeps the held
    # price (a seller confirming it later puts it live over the price in force), True = the
    # quarantine lets it go, the price in force stays.
    already_set_releases: bool = False


@dataclass
class Faults:
    deleted_user: bool = False  # 403 Access denied on every request (research §2.2)
    unexpected_result: bool = False  # the upload answers 422 (research §2.1)
    switching_currency: bool = False  # the upload answers 409 (research §2.1)
    # Goods (nmIDs) a processed task leaves out of its lines WITHOUT applying them. Not a
    # behaviour the research names (§2.4 lists every good's line; §8 leaves only unchanged
    # goods in a mixed task open): a fault, so that a target never takes a good's absence
    # from the lines for "in force" without reading the catalogue back (issue 32).
    left_out: set[int] = field(default_factory=set)
    # The catalogue's list answers every good whatever ``filterNmID`` names (§2.1 names the
    # parameter, not how strictly it filters): a reader must pick the good's own line.
    filter_ignored: bool = False
    # Goods (nmIDs) a processed task counts (its status and ``overAllGoodsNumber``) but whose
    # lines ``history/goods/task`` does not list: a partial answer (research §2.4 documents
    # every good's line; a status 6 task whose lines lack a good says it failed, review 32c
    # finding 3): a target must read the catalogue back, never take the silence for updated.
    lines_unlisted: set[int] = field(default_factory=set)
    # Cards (nmIDs) in the seller's trash: the upload knows them no more (research §2.1: "All
    # item Nos. are specified incorrectly" for "no such items (e.g. deleted)") while the list
    # still shows them at their last price (the research does not say how soon a deleted card
    # leaves it): "all item Nos. … or already set" for a price that changes (review 32c
    # finding 4).
    trashed: set[int] = field(default_factory=set)
    # The quarantine list answers 200 with an empty body (not in the research: an odd answer;
    # review 32c finding 6): a reader must take it for a failed read, never "none held".
    quarantine_unreadable: bool = False
    # The same, for the next this many reads of the list only, then its documented answer
    # again (research §2.4 documents the list as ``quarantineGoods``; a bad answer now and then
    # is not in the research, nor among the open points of §8: a fault, so that a target reads
    # the list again rather than ending a price in force on one bad answer).
    quarantine_unreadable_next: int = 0
    # Tasks that apply late: an upload carrying one of these (nmID, price) pairs is processed
    # this many simulated seconds after it (not ``processing_delay``), and meanwhile neither
    # the history nor the buffer shows it; tasks uploaded after it are processed in their own
    # time, before it. research §2.4: the time to apply is not documented and what WB shows of
    # a task not processed yet is UNCONFIRMED (§8); §2.5: the processing order of two tasks of
    # one nmID is not documented. A target that stops following such a task (or never learnt
    # its id: the upload's answer lost) must not call a newer price in force before it lands.
    late: dict[tuple[int, int], float] = field(default_factory=dict)


@dataclass
class Good:
    nm_id: int
    vendor_code: str
    price: int
    discount: int = 0
    currency: str = "RUB"
    sale_locked: bool = False
    editable_size_price: bool = False  # size-priced goods: no quarantine (research §2.4)

    def final(self) -> Decimal:
        """What buyers pay: price × (1 − discount/100) (research §2.1)."""
        return Decimal(self.price) * (100 - self.discount) / 100


@dataclass
class Task:
    upload_id: int
    goods: list[tuple[int, int | None, int | None]]  # (nmID, price, discount) as uploaded
    key: tuple[tuple[int, int | None, int | None], ...]
    uploaded_at: float
    due_at: float
    status: int = PENDING
    activated_at: float | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    hidden: bool = False  # fault ``late``: the buffer does not show it while pending

    def metadata(self) -> dict[str, Any]:
        done = self.status != PENDING
        return {
            "uploadID": self.upload_id,
            "status": self.status,
            "uploadDate": _iso(self.uploaded_at),
            "activationDate": _iso(self.activated_at or self.due_at),
            "overAllGoodsNumber": len(self.results) if done else len(self.goods),
            "successGoodsNumber": sum(r["status"] == ITEM_UPDATED for r in self.results),
        }


class Answer:
    def __init__(
        self,
        status: int,
        body: Any,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status, self.body, self.content_type = status, body, content_type
        self.headers = headers or {}
        self.raw: bytes | None = None  # sent as it is instead of the JSON of ``body``


class WbSimulator(LoopbackServer):
    """One seller account: its goods, its tokens, its bucket, its tasks and its quarantine.
    Tests and the demo drive it through the attributes and methods below; everything a client
    sees goes through ``serve``."""

    def __init__(
        self,
        *,
        time_scale: float = 1.0,
        switches: Switches | None = None,
        limits: Limits | None = None,
        secret: bytes | None = None,
        sandbox: bool = False,
        seller_id: int = 1000001,
    ) -> None:
        super().__init__()
        self.handler = _WbHandler
        self.clock = SimClock(time_scale)
        self.switches = switches or Switches()
        self.faults = Faults()
        self.limits = limits or Limits()
        self.sandbox = sandbox
        self.seller_id = seller_id
        self._secret = secret or uuid.uuid4().bytes
        self.revoked: set[str] = set()  # token ids (claim ``id``) withdrawn in the cabinet
        self.goods: dict[int, Good] = {}
        self.tasks: dict[int, Task] = {}
        self.quarantine: dict[int, dict[str, Any]] = {}
        self.applied: dict[int, list[int]] = collections.defaultdict(list)  # nmID -> prices
        self.requests: collections.Counter[str] = collections.Counter()  # by route
        self._buckets: dict[int, Bucket] = {}
        self._next_nm = itertools.count(100_000_001)
        self._next_task = itertools.count(7_000_001)
        # Upload order; processed as their times come (``process_due``).
        self._pending: collections.deque[Task] = collections.deque()
        self._by_key: dict[tuple[tuple[int, int | None, int | None], ...], Task] = {}

    # -- the account, as the seller's cabinet sets it ------------------------------------

    def add_good(
        self, vendor_code: str, price: int = 1000, discount: int = 0, nm_id: int | None = None
    ) -> Good:
        with self.lock:
            nm = nm_id if nm_id is not None else next(self._next_nm)
            good = Good(nm, vendor_code, price, discount)
            self.goods[good.nm_id] = good
            return good

    def by_vendor_code(self, vendor_code: str) -> Good | None:
        with self.lock:
            return next((g for g in self.goods.values() if g.vendor_code == vendor_code), None)

    def vendor_code_in_cabinet(self, nm_id: int, vendor_code: str) -> None:
        """The seller changes the card's vendor code in the cabinet (research §2.1: ``nmID``
        is WB's article, the vendor code the seller's; §2.6 item 1: the vendorCode -> nmID
        mapping is the client's cache): the catalogue lists the card under the new code from
        now on, and a task processed from now on names it in its lines (``vendorCode``,
        §2.4). A new card for the old code: ``add_good``."""
        with self.lock:
            self.goods[nm_id].vendor_code = vendor_code

    def lock_for_sale(self, nm_id: int, locked: bool = True) -> None:
        """The good is put into a sale for its high inventory (research §2.4)."""
        with self.lock:
            self.goods[nm_id].sale_locked = locked

    def release_in_cabinet(self, nm_id: int) -> None:
        """The seller confirms the quarantined price in the cabinet (research §2.4): it takes
        effect and the good leaves the quarantine."""
        with self.lock:
            held = self.quarantine.pop(nm_id)
            good = self.goods[nm_id]
            good.price, good.discount = held["newPrice"], held["newDiscount"]
            self.applied[nm_id].append(good.price)

    def price_in_cabinet(self, nm_id: int, price: int) -> None:
        """The seller sets another price in the cabinet (research §2.4: "sending another
        price/discount via API or in the seller cabinet" releases the quarantine): it takes
        effect and the good leaves the quarantine."""
        with self.lock:
            self.quarantine.pop(nm_id, None)
            self.goods[nm_id].price = price
            self.applied[nm_id].append(price)

    def spent_elsewhere(self, requests: float, acc: int = ACC_PERSONAL) -> None:
        """Another program of the seller (or another token of the account) spends ``requests``
        of the account's bucket now: research §2.3, one bucket per seller account for every
        method of the category, a token bucket (it may be spent below empty, as a 4xx counted
        as ten requests spends it, §2.3); a request meanwhile gets 429 with an
        ``X-Ratelimit-Retry`` of the seconds until the bucket holds a token again."""
        with self.lock:
            self._bucket(acc).charge(self.clock.elapsed(), requests)

    def cancel(self, upload_id: int) -> None:
        """The task is cancelled before it is processed: status 4 (research §2.4)."""
        with self.lock:
            task = self.tasks[upload_id]
            if task.status == PENDING:
                task.status, task.activated_at = CANCELLED, self.clock.now()

    def token(
        self,
        *,
        acc: int = ACC_PERSONAL,
        scopes: int = PRICES_BIT,
        read_only: bool = False,
        expires_in: float = 180 * 86400,
    ) -> str:
        """A token the seller makes in the cabinet (research §2.2: claims acc, s, exp; tokens
        live 180 days)."""
        claims = {
            "acc": acc,
            "ent": 1,
            "exp": int(self.clock.now() + expires_in),
            "id": str(uuid.uuid4()),
            "oid": self.seller_id,
            "s": scopes | (READ_ONLY_BIT if read_only else 0),
            "sid": str(uuid.uuid4()),
            "t": acc == ACC_TEST,
            "uid": 1,
        }
        head = _b64({"alg": "HS256", "typ": "JWT"})
        body = _b64(claims)
        signature = hmac.new(self._secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"

    def revoke(self, token: str) -> None:
        claims = _claims(token)
        with self.lock:
            self.revoked.add(str(claims["id"]))

    # -- bookkeeping for tests -------------------------------------------------------------

    def process_due(self) -> None:
        """Process every task whose time has come, in the order their times came (upload
        order, but for a task fault ``late`` holds back)."""
        with self.lock:
            now = self.clock.now()
            due = sorted(
                (t for t in self._pending if t.due_at <= now),
                key=lambda t: (t.due_at, t.upload_id),
            )
            for task in due:
                self._pending.remove(task)
                if task.status == PENDING:
                    self._process(task, task.due_at)

    # -- the API ------------------------------------------------------------------------

    def serve(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Answer:
        parts = urlsplit(target)
        path, query = parts.path.rstrip("/"), parse_qs(parts.query)
        route = ROUTES.get((method, path))
        with self.lock:
            self.process_due()
            if route is None:
                return _problem(404, "not found", f"no route for {method} {path}")
            acc = self._authenticate(headers.get("authorization"), write=method == "POST")
            if isinstance(acc, Answer):
                return acc
            tick = self.clock.elapsed()
            bucket = self._bucket(acc)
            if bucket.barred(tick) or not bucket.take(tick):
                return self._too_many(bucket, tick)
            self.requests[path] += 1
            method_of_route: Callable[..., Answer] = getattr(self, route)
            answer = method_of_route(query, raw, self.clock.now())
            if 400 <= answer.status < 500 and self.switches.four_xx_weight > 1:
                bucket.charge(tick, self.switches.four_xx_weight - 1)
            answer.headers["X-Ratelimit-Remaining"] = str(bucket.remaining(tick))
            return answer

    def _bucket(self, acc: int) -> Bucket:
        """One bucket per account for the whole category (research §2.3); a Base token's has
        the Base row's limits."""
        limits = BASE_TOKEN_LIMITS if acc == ACC_BASE else self.limits
        bucket = self._buckets.get(acc)
        if bucket is None or bucket.limits != limits:
            bucket = self._buckets[acc] = Bucket(limits)
        return bucket

    def _too_many(self, bucket: Bucket, now: float) -> Answer:
        """research §2.3: 429 with X-Ratelimit-Retry/-Limit/-Reset and the problem body; the
        wait announced is the wait enforced (``Bucket.barred``): a retry before it is refused
        again and announced a wait of its own."""
        answer = _problem(
            429, "too many requests", f"limited by {uuid.uuid4()}", origin="s2s-api-auth-catalog"
        )
        if bucket.barred(now):  # an early retry: told the rest of the same wait
            retry_seconds = self._announced(bucket.barred_until - now)[1]
        else:
            retry, retry_seconds = self._announced(bucket.retry_in(now))
            bucket.barred_until = now + retry
        answer.headers.update(
            {
                "X-Ratelimit-Retry": retry_seconds,
                "X-Ratelimit-Limit": str(bucket.limits.burst),
                "X-Ratelimit-Reset": self._announced(bucket.reset_in(now))[1],
            }
        )
        return answer

    def _announced(self, simulated: float) -> tuple[float, str]:
        """Header seconds as the client's wall clock counts them: whole seconds at the real
        pace and on a still clock (WB's form, rounded up), milliseconds rounded up when the
        clock runs faster or slower; with the simulated seconds they last (at least
        ``simulated``)."""
        wall = self.clock.wall(simulated)
        if self.clock.pace == 1:
            shown = float(math.ceil(wall - EPSILON))
            return shown, str(int(shown))
        shown = math.ceil(wall * 1000 - EPSILON) / 1000
        return shown * self.clock.pace, f"{shown:g}"

    def _authenticate(self, header: str | None, *, write: bool) -> Answer | int:
        """The account's token type (acc) when the token is accepted, else the answer
        (research §2.2)."""
        if self.faults.deleted_user:
            return _problem(403, "forbidden", "Access denied", origin="s2s-api-auth-catalog")
        if not header:
            return _unauthorized("empty Authorization header")
        try:
            claims = self._verified(header.strip())
        except ValueError as exc:
            return _unauthorized(f"token problem; {exc}")
        if claims.get("exp", 0) <= self.clock.now():
            return _unauthorized("token problem; token is expired")
        if str(claims.get("id")) in self.revoked:
            return _unauthorized("token problem; token is withdrawn")
        acc = claims.get("acc")
        if acc == ACC_TEST and not self.sandbox:
            return _unauthorized("token problem; test token is for the sandbox only")
        scopes = claims.get("s", 0)
        if not isinstance(scopes, int) or not scopes & PRICES_BIT:
            return _unauthorized("token scope not allowed for this route")
        if write and scopes & READ_ONLY_BIT:
            # research §2.2, observed (secondary) for this very route
            return _unauthorized(
                "read-only token scope not allowed for this route", origin="s2s-api-auth-dp"
            )
        return int(acc) if isinstance(acc, int) else ACC_PERSONAL

    def _verified(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise ValueError("token is malformed: token contains an invalid number of segments")
        try:
            signature = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        except ValueError as exc:
            raise ValueError(
                f"token is malformed: could not base64 decode signature: {exc}"
            ) from exc
        expected = hmac.new(
            self._secret, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256
        ).digest()
        if not hmac.compare_digest(signature, expected):
            raise ValueError("token signature is invalid: signature is invalid")
        return _claims(token)

    # -- routes ---------------------------------------------------------------------------

    def _list_goods(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        """The catalogue, paged (research §2.1: the list methods give vendorCode and
        currencyIsoCode4217 per nmID)."""
        page = _page(query)
        if page is None:
            return _envelope_error(400, INVALID_PARAMETERS)
        limit, offset = page
        goods = sorted(self.goods.values(), key=lambda g: g.nm_id)
        wanted = query.get("filterNmID")
        if wanted and not self.faults.filter_ignored:
            goods = [g for g in goods if str(g.nm_id) == wanted[0]]
        listed = [
            {
                "nmID": g.nm_id,
                "vendorCode": g.vendor_code,
                "sizes": [
                    {
                        "sizeID": g.nm_id * 10,
                        "price": g.price,
                        "discountedPrice": _number(g.final()),
                        "clubDiscountedPrice": _number(g.final()),
                        "techSizeName": "0",
                    }
                ],
                "currencyIsoCode4217": g.currency,
                "discount": g.discount,
                "clubDiscount": 0,
                "editableSizePrice": g.editable_size_price,
            }
            for g in goods[offset : offset + limit]
        ]
        return _envelope({"listGoods": listed})

    def _upload(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        """POST /api/v2/upload/task (research §2.1, §2.5)."""
        if self.faults.switching_currency:
            if self.switches.conflict_body == "problem":
                return _problem(409, "conflict", SWITCHING_CURRENCY)
            return _envelope_error(409, SWITCHING_CURRENCY)
        if self.faults.unexpected_result:
            return _envelope_error(422, UNEXPECTED)
        parsed = _goods(raw)
        if isinstance(parsed, str):
            return _envelope_error(400, parsed)
        key = tuple(sorted(parsed))
        window = self.switches.dedup_window
        if window > 0:
            task = self._by_key.get(key)
            if self.switches.dedup_by == "goods":
                task = self._by_nm_ids(key)
            if task is not None and now - task.uploaded_at < window:
                return Answer(
                    208,
                    {
                        "data": {"id": task.upload_id, "alreadyExists": True},
                        "error": False,
                        "errorText": TASK_EXISTS,
                    },
                )
        known = [g for g in parsed if self._known(g[0])]
        changed = [g for g in known if self._changes(g)]
        if self.switches.unknown_in_mixed == "whole-400" and known and len(known) < len(parsed):
            return _envelope_error(400, INVALID_NM)
        if not changed:
            self._already_set([g[0] for g in known])
            return _envelope_error(400, ALREADY_SET if len(known) == len(parsed) else ALL_WRONG)
        if self.switches.unchanged_in_mixed == "whole-400" and len(changed) < len(known):
            self._already_set([g[0] for g in known if g not in changed])
            return _envelope_error(400, ALREADY_SET)
        late = [
            self.faults.late[(g[0], g[1])]
            for g in parsed
            if g[1] is not None and (g[0], g[1]) in self.faults.late
        ]
        task = Task(
            next(self._next_task),
            parsed,
            key,
            uploaded_at=now,
            due_at=now + (max(late) if late else self.switches.processing_delay),
            hidden=bool(late),
        )
        self.tasks[task.upload_id] = task
        self._by_key[key] = task
        self._pending.append(task)
        self.process_due()
        return _envelope({"id": task.upload_id, "alreadyExists": False})

    def _by_nm_ids(self, key: tuple[tuple[int, int | None, int | None], ...]) -> Task | None:
        """``dedup_by = "goods"``: the latest task of the same nmIDs (prices aside)."""
        goods = sorted(g[0] for g in key)
        same = [t for t in self.tasks.values() if sorted(g[0] for g in t.key) == goods]
        return max(same, key=lambda t: t.upload_id) if same else None

    def _known(self, nm_id: int) -> bool:
        """A good the upload knows: in the catalogue and not in the trash (fault ``trashed``)."""
        return nm_id in self.goods and nm_id not in self.faults.trashed

    def _already_set(self, nm_ids: list[int]) -> None:
        """Goods an upload named at the price in force: released from the quarantine when
        the switch ``already_set_releases`` says so (research §2.4, UNCONFIRMED)."""
        if self.switches.already_set_releases:
            for nm_id in nm_ids:
                self.quarantine.pop(nm_id, None)

    def _changes(self, item: tuple[int, int | None, int | None]) -> bool:
        good = self.goods[item[0]]
        price, discount = item[1], item[2]
        return (price is not None and price != good.price) or (
            discount is not None and discount != good.discount
        )

    def _process(self, task: Task, now: float) -> None:
        """research §2.4: each good updated (2) or not (3, errorText); the task's status 3, 5
        or 6 from them."""
        results: list[dict[str, Any]] = []
        for nm_id, price, discount in task.goods:
            good = self.goods.get(nm_id) if self._known(nm_id) else None
            if nm_id in self.faults.left_out:
                continue  # fault: not listed, not applied
            if good is None:
                if self.switches.unknown_in_mixed != "skip":  # item-error (whole-400 made none)
                    results.append(_item(nm_id, "", price, discount, "RUB", INVALID_NM))
                continue
            new_price = good.price if price is None else price
            new_discount = good.discount if discount is None else discount
            row = _item(nm_id, good.vendor_code, new_price, new_discount, good.currency, None)
            if not self._changes((nm_id, price, discount)):
                self._already_set([nm_id])
                if self.switches.unchanged_in_mixed == "item-error":
                    results.append({**row, "status": ITEM_ERROR, "errorText": ALREADY_SET})
                continue
            if good.sale_locked:
                results.append({**row, "status": ITEM_ERROR, "errorText": SALE_LOCK})
                continue
            new_final = Decimal(new_price) * (100 - new_discount) / 100
            old_final = good.final()
            # research §2.4: "минимум в 3 раза меньше" — a third or less goes to quarantine
            # (a newer price for a quarantined good is judged against the price in force).
            if not good.editable_size_price and new_final * 3 <= old_final:
                self.quarantine[nm_id] = {
                    "nmID": nm_id,
                    "sizeID": None,
                    "techSizeName": "",
                    "currencyIsoCode4217": good.currency,
                    "newPrice": new_price,
                    "oldPrice": good.price,
                    "newDiscount": new_discount,
                    "oldDiscount": good.discount,
                    "priceDiff": _number(new_final - old_final),
                }
                results.append({**row, "status": ITEM_ERROR, "errorText": QUARANTINED})
                continue
            self.quarantine.pop(nm_id, None)  # a newer price releases it (research §2.4)
            good.price, good.discount = new_price, new_discount
            self.applied[nm_id].append(new_price)
            results.append(row)
        task.results = results
        task.activated_at = now
        errors = sum(r["status"] == ITEM_ERROR for r in results)
        task.status = (
            PROCESSED if errors == 0 else ALL_ERRORS if errors == len(results) else SOME_ERRORS
        )

    def _not_yet(self) -> Answer:
        """An uploadID the method does not hold (switch ``pending_answer``, research §8)."""
        if self.switches.pending_answer == "400":
            return _envelope_error(400, INVALID_PARAMETERS)
        return _envelope(None)

    def _task(self, query: dict[str, list[str]], *, buffered: bool) -> Task | Answer:
        try:
            upload_id = int(query["uploadID"][0])
        except (KeyError, ValueError):
            return _envelope_error(400, INVALID_PARAMETERS)
        task = self.tasks.get(upload_id)
        if task is None:
            return self._not_yet()
        pending = task.status == PENDING
        shown = self.switches.pending_in_buffer and not task.hidden
        if buffered != pending or (buffered and not shown):
            return self._not_yet()
        return task

    def _history_task(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        found = self._task(query, buffered=False)
        return found if isinstance(found, Answer) else _envelope(found.metadata())

    def _buffer_task(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        found = self._task(query, buffered=True)
        return found if isinstance(found, Answer) else _envelope(found.metadata())

    def _history_goods(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        return self._task_goods(query, False, "historyGoods", self._listed_rows)

    def _listed_rows(self, task: Task) -> list[dict[str, Any]]:
        """A processed task's lines, less those fault ``lines_unlisted`` hides."""
        return [r for r in task.results if r["nmID"] not in self.faults.lines_unlisted]

    def _buffer_goods(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        return self._task_goods(query, True, "bufferGoods", self._buffered_rows)

    def _task_goods(
        self,
        query: dict[str, list[str]],
        buffered: bool,
        key: str,
        rows: Callable[[Task], list[dict[str, Any]]],
    ) -> Answer:
        """A task's goods, paged (research §2.4): the page's parameters first, then the task
        (history or buffer, ``_task``)."""
        page = _page(query)
        if page is None:
            return _envelope_error(400, INVALID_PARAMETERS)
        found = self._task(query, buffered=buffered)
        if isinstance(found, Answer):
            return found
        limit, offset = page
        return _envelope({"uploadID": found.upload_id, key: rows(found)[offset : offset + limit]})

    def _buffered_rows(self, task: Task) -> list[dict[str, Any]]:
        """A pending task's goods as uploaded, each with status 1 (what is not given: the
        good's own)."""
        rows = []
        for nm_id, price, discount in task.goods:
            good = self.goods.get(nm_id)
            rows.append(
                {
                    **_item(
                        nm_id,
                        good.vendor_code if good else "",
                        price if price is not None else (good.price if good else None),
                        discount if discount is not None else (good.discount if good else 0),
                        good.currency if good else "RUB",
                        None,
                    ),
                    "status": PENDING,
                }
            )
        return rows

    def _quarantine(self, query: dict[str, list[str]], raw: bytes, now: float) -> Answer:
        """GET /api/v2/quarantine/goods (research §2.4)."""
        page = _page(query)
        if page is None:
            return _envelope_error(400, INVALID_PARAMETERS)
        once = self.faults.quarantine_unreadable_next > 0
        if once:
            self.faults.quarantine_unreadable_next -= 1
        if self.faults.quarantine_unreadable or once:
            answer = Answer(200, None)
            answer.raw = b""
            return answer
        limit, offset = page
        held = [self.quarantine[nm] for nm in sorted(self.quarantine)]
        return _envelope({"quarantineGoods": held[offset : offset + limit]})


ROUTES = {
    ("GET", "/api/v2/list/goods/filter"): "_list_goods",
    ("POST", "/api/v2/upload/task"): "_upload",
    ("GET", "/api/v2/history/tasks"): "_history_task",
    ("GET", "/api/v2/history/goods/task"): "_history_goods",
    ("GET", "/api/v2/buffer/tasks"): "_buffer_task",
    ("GET", "/api/v2/buffer/goods/task"): "_buffer_goods",
    ("GET", "/api/v2/quarantine/goods"): "_quarantine",
}


def _goods(raw: bytes) -> list[tuple[int, int | None, int | None]] | str:
    """The upload's goods, or the errorText of research §2.1 that refuses the whole request
    (checked in this order: the simulator's choice)."""
    try:
        body = json.loads(raw, parse_float=Decimal)
    except ValueError:
        return INVALID_FORMAT
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return INVALID_FORMAT
    if not data:
        return EMPTY
    if len(data) > MAX_GOODS:
        return TOO_MANY
    goods: list[tuple[int, int | None, int | None]] = []
    for entry in data:
        if not isinstance(entry, dict):
            return INVALID_FORMAT
        nm_id = entry.get("nmID")
        if not _is_int(nm_id) or nm_id <= 0:
            return INVALID_NM
        given_price, given_discount = entry.get("price"), entry.get("discount")
        if given_price is None and given_discount is None:
            return NOTHING_GIVEN
        price: int | None = None
        if given_price is not None:
            if isinstance(given_price, Decimal):
                return WHOLE_NUMBER
            if not _is_int(given_price):
                return INVALID_FORMAT
            if given_price <= 0:
                return INVALID_PRICE
            price = given_price
        discount: int | None = None
        if given_discount is not None:
            if not _is_int(given_discount) or not 0 <= given_discount <= 99:
                return INVALID_DISCOUNT
            discount = given_discount
        goods.append((nm_id, price, discount))
    if len({g[0] for g in goods}) != len(goods):
        return DUPLICATE
    return goods


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _page(query: dict[str, list[str]]) -> tuple[int, int] | None:
    """``limit`` (required, 1..1000) and ``offset`` (≥ 0) (research §2.4)."""
    try:
        limit = int(query["limit"][0])
        offset = int(query.get("offset", ["0"])[0])
    except (KeyError, ValueError):
        return None
    if not 1 <= limit <= MAX_LIMIT or offset < 0:
        return None
    return limit, offset


def _item(
    nm_id: int,
    vendor_code: str,
    price: int | None,
    discount: int | None,
    currency: str,
    error: str | None,
) -> dict[str, Any]:
    """A good of a task as research §2.4 lists it (GoodHistory)."""
    return {
        "nmID": nm_id,
        "vendorCode": vendor_code,
        "sizeID": 0,
        "techSizeName": "",
        "price": price,
        "currencyIsoCode4217": currency,
        "discount": discount,
        "clubDiscount": 0,
        "status": ITEM_ERROR if error else ITEM_UPDATED,
        "errorText": error or "",
    }


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64(value: dict[str, Any]) -> str:
    text = json.dumps(value, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(text).decode().rstrip("=")


def _claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError) as exc:
        raise ValueError("token is malformed: could not decode the payload") from exc
    if not isinstance(claims, dict):
        raise ValueError("token is malformed: the payload is not an object")
    return claims


def _envelope(data: Any) -> Answer:
    return Answer(200, {"data": data, "error": False, "errorText": ""})


def _envelope_error(status: int, text: str) -> Answer:
    """WB's own error form (research §2.1): ``{"data": null, "error": true, "errorText"}``."""
    return Answer(status, {"data": None, "error": True, "errorText": text})


def _problem(
    status: int, title: str, detail: str, *, origin: str = "s2s-api-auth-catalog"
) -> Answer:
    """The gateway's problem body (research §2.2, §2.3: title, detail, code, requestId,
    origin, status, statusText, timestamp)."""
    return Answer(
        status,
        {
            "title": title,
            "detail": detail,
            "code": uuid.uuid4().hex[:24],
            "requestId": uuid.uuid4().hex,
            "origin": origin,
            "status": status,
            "statusText": HTTPStatus(status).phrase,
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "application/problem+json",
    )


def _unauthorized(detail: str, *, origin: str = "s2s-api-auth-catalog") -> Answer:
    return _problem(401, "unauthorized", detail, origin=origin)


class _WbHandler(Handler):
    @property
    def sim(self) -> WbSimulator:
        return self.server.sim  # type: ignore[attr-defined, no-any-return]

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        raw = self.body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = self.sim.serve(method, self.path, headers, raw)
        body = answer.raw
        if body is None:
            body = json.dumps(answer.body, ensure_ascii=False).encode()
        self.answer(answer.status, body, answer.content_type, answer.headers)


# -- in the foreground ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """``python -m exchange.dev.wbsim --port N``: a Wildberries seller account in the
    foreground, with ``--goods N`` goods whose vendor codes are SKU-0001… (or the vendor codes
    of ``--catalogue FILE``); the token it makes is written to ``--token-file`` (never
    printed) and the channel settings that point the service at it are printed."""
    import os
    import shutil
    import tempfile

    from exchange.dev.catalogue import CatalogueError, read_catalogue
    from exchange.dev.httpsim import arguments

    parser = arguments(
        "python -m exchange.dev.wbsim",
        "Serve a simulated Wildberries Prices and Discounts API until Ctrl-C.",
    )
    parser.add_argument("--goods", type=int, default=100, help="goods SKU-0001… (default 100)")
    parser.add_argument("--catalogue", metavar="FILE", help="vendor codes, one a line")
    parser.add_argument("--price", type=int, default=1000, help="every good's starting price")
    parser.add_argument("--token-file", metavar="FILE", help="where to write the token")
    parser.add_argument("--time-scale", type=time_scale, default=1.0, help="the clock's speed")
    parser.add_argument("--period", type=float, default=6.0, help="the limit's period, s")
    parser.add_argument("--requests", type=int, default=10, help="requests per period")
    parser.add_argument("--burst", type=int, default=5, help="the bucket's burst")
    parser.add_argument("--processing-delay", type=float, default=2.0, help="upload to result")
    parser.add_argument("--pending-answer", choices=("null", "400"), default="null")
    parser.add_argument("--no-buffer", action="store_true", help="pending tasks not in buffer")
    parser.add_argument("--dedup-window", type=float, default=600.0, help="208 window, s")
    parser.add_argument(
        "--dedup-by", choices=["body", "goods"], default="body", help="what a 208 matches"
    )
    parser.add_argument(
        "--unchanged-in-mixed", choices=("skip", "item-error", "whole-400"), default="skip"
    )
    parser.add_argument(
        "--unknown-in-mixed", choices=("skip", "item-error", "whole-400"), default="item-error"
    )
    parser.add_argument("--four-xx-weight", type=int, default=1, help="a 4xx counts as N")
    parser.add_argument(
        "--already-set-releases",
        action="store_true",
        help="an upload of the price in force releases the good's quarantine",
    )
    args = parser.parse_args(argv)
    switches = Switches(
        pending_answer=args.pending_answer,
        pending_in_buffer=not args.no_buffer,
        dedup_window=args.dedup_window,
        dedup_by=args.dedup_by,
        unchanged_in_mixed=args.unchanged_in_mixed,
        unknown_in_mixed=args.unknown_in_mixed,
        four_xx_weight=args.four_xx_weight,
        processing_delay=args.processing_delay,
        already_set_releases=args.already_set_releases,
    )
    limits = Limits(period=args.period, requests=args.requests, burst=args.burst)
    sim = WbSimulator(time_scale=args.time_scale, switches=switches, limits=limits)
    if args.catalogue:
        try:
            codes = read_catalogue(Path(args.catalogue)).skus
        except CatalogueError as exc:
            parser.exit(2, f"error: {exc}\n")
    else:
        codes = [f"SKU-{n:04d}" for n in range(1, args.goods + 1)]
    for code in codes:
        sim.add_good(code, args.price)
    made = None if args.token_file else Path(tempfile.mkdtemp(prefix="wbsim-"))
    token_file = made / "wb-token" if made else Path(args.token_file)
    try:
        token_file.write_text(sim.token() + "\n", encoding="utf-8")
        os.chmod(token_file, 0o600)
    except OSError as exc:  # a directory that does not exist, no permission: one line
        parser.exit(2, f"error: the token file {token_file}: {exc.strerror or exc}\n")
    print(f"the account holds {len(codes)} goods; the token is in {token_file}", flush=True)
    sim.host, sim.port = args.host, args.port
    try:
        _serve(sim, token_file)
    finally:  # a token the simulator made for itself leaves with it, as ozonsim's key does
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def _serve(sim: WbSimulator, token_file: Path) -> None:
    from exchange.dev.httpsim import run_in_foreground, setting_line, switches_line

    run_in_foreground(
        sim,
        "Wildberries",
        lambda s: [
            setting_line(
                "EXCHANGE_CHANNELS",
                json.dumps(
                    {
                        "wb": {
                            "target": "wildberries",
                            "wb_api_url": s.url,
                            "wb_token_file": str(token_file),
                            "wb_price_types": {"retail": "price"},
                            "currency": "RUB",
                        }
                    }
                ),
            ),
            switches_line(sim.switches),
        ],
    )


if __name__ == "__main__":
    main()

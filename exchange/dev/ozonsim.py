"""A simulator of Ozon's Seller API for prices, written from the research
(../shared/research/marketplaces.md section 1, "what a faithful simulator reproduces" in section 7
and the UNCONFIRMED list of section 8), never from the service's ``ozon`` target:

    POST /v1/product/import/prices    {"prices": [{"offer_id", "price", "old_price", ...}]}
    POST /v5/product/info/prices      the prices read back ({"filter", "cursor", "limit"})
    POST /v1/roles                    the key's roles and methods, and when it expires

Each behaviour names its research section beside it ("§1.3" is research section 1.3); the
conformance table is docs/simulators/ozon.md and tests/dev/test_ozonsim.py has a test per row.

Where the research says UNCONFIRMED, the simulator plays it both ways: ``switches``
(``OzonSwitches``, each a choice of two, the first the default; ``--switch NAME=VALUE`` on the
command line). Limits (``OzonLimits``): 50 requests a second per Client-Id over every method
(real seconds), 10 price updates a product an hour (on the simulator's clock), "Circle is open"
for a few minutes after a burst of refused requests. The clock (``SimClock``, the three
marketplace simulators', exchange/dev/simclock.py) runs ``time_scale`` times faster than the
wall clock, and a test can ``advance`` it, so that the hour of the per-product limit and the
minutes of "Circle is open" and of a delayed storefront pass in seconds; the per-second rate
limit stays in real seconds (lower ``rps`` instead).

Where the research gives no word at all the simulator chooses, and says so ("choice"); where it
follows how Ozon's answers look as a whole (rpcStatus bodies ``{"code", "message", "details"}``
whose codes are gRPC's: 3 invalid argument, 5 not found, 7 permission denied, 8 resource
exhausted, 14 unavailable, 16 unauthenticated), that is an inference, marked so.

The catalogue: every ``offer_id`` exists but ``NOSUCH*`` (``auto``), each with a product id
of its own; ``hold`` a catalogue for only those. Faults (``OzonFaults``, mutable while it
runs): the key's state and roles, ``delay``, ``internal_errors``, ``drop_after``,
``slow_after``, ``late_status`` (a 5xx at once, the import applied later).

Bookkeeping: ``history(offer_id)`` every price the product took (``histories()`` of every
product at once), ``updates(offer_id)`` every update it took with its money fields,
``set_price`` the price it held before a run (the demo's), ``charged(offer_id)`` the
clock times of the updates counted against its hourly limit, ``requests`` by path,
``outcomes`` of items by code (``updated``, ``unchanged``, or the error's code).
"""

from __future__ import annotations

import collections
import contextlib
import hmac
import json
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

from exchange.dev.catalogue import Catalogue
from exchange.dev.httpsim import Handler, LoopbackServer, time_scale
from exchange.dev.simclock import SimClock

PRODUCTION_URL = "https://api-seller.ozon.ru"  # §1.1: the only documented environment (§1.7)
IMPORT_PRICES = "/v1/product/import/prices"  # §1.1
INFO_PRICES = "/v5/product/info/prices"  # §1.4 read-back
ROLES = "/v1/roles"  # §1.2: the key's roles and expires_at
BATCH_LIMIT = 1000  # §1.1: prices <= 1000 items; §1.4: the read-back's limit 1..1000
CURRENCIES = ("RUB", "BYN", "KZT", "EUR", "USD", "CNY")  # §1.1 currency_code
FLAGS = ("auto_action_enabled", "auto_add_to_ozon_actions_list_enabled", "price_strategy_enabled")
FLAG_VALUES = ("UNKNOWN", "ENABLED", "DISABLED")  # §1.1: UNKNOWN leaves it as it is (§1.5)
MONEY_FIELDS = ("price", "old_price", "min_price", "net_price")  # §1.1: strings

# §1.2, the official texts for all methods [OZ-ERR]
INVALID_KEY = "Invalid Api-Key, please check the key and try again"
DEACTIVATED_KEY = "Api-key is deactivated, use another one or generate a new one"
MISSING_ROLE = "Api-Key is missing a required role for a method"
IP_RESTRICTED = "Api-Key is restricted to specific IP addresses"
NOT_ALLOWED = "method is not allowed"
OFFER_NOT_SIGNED = "Offer not signed"  # §1.2: 403 when the seller's offer is outdated
BAD_CLIENT_ID = "Client-Id header value should be positive integer"  # §1.2 observed
INT64_MAX = 2**63 - 1
RATE_LIMITED = "You have reached request rate limit per second"  # §1.3
CIRCLE_OPEN = "Circle is open"  # §1.3
INTERNAL_ERROR = "Internal error"  # OZ-ERR "all methods" (research §1.2 lists the table)

# §1.4: the per-item limit's text in the official table, and as integrators saw it live
ITEM_LIMIT = "error limiting: acquire limit per item: items limit: limit exceeded"
ITEM_LIMIT_WRAPPED = (
    "price-batch-set for seller api: rpc error: code = ResourceExhausted desc = " + ITEM_LIMIT
)

# §1.4 and §1.1: per-item codes of /v1/product/import/prices, with the meaning the official
# table gives (Russian, OZ-ERR in OZ-MIR 00-overview)
ITEM_ERRORS: dict[str, str] = {
    "NOT_FOUND_ERROR": "Товара с таким идентификатором нет в личном кабинете.",
    "invalid_category_price": "Попытка установить слишком высокую или слишком низкую цену.",
    "discount_for_low_price_is_too_small": (
        "Если цена после скидки 400 рублей или ниже, разница между ценами до и после скидки "
        "должна быть больше 20 рублей."
    ),
    "discount_for_average_price_is_too_small": (
        "Если цена после скидки от 400 до 10 000 рублей включительно, разница между ценами до "
        "и после скидки должна быть больше 5%."
    ),
    "discount_for_top_price_is_too_small": (
        "Если цена после скидки выше 10 000 рублей, разница между ценами до и после скидки "
        "должна быть больше 500 рублей."
    ),
    "discount_too_big": "Разница между ценами до и после скидки должна быть меньше 90%.",
    "price_negative": "Попытка установить отрицательную цену.",
    "old_price_less_than_price": "Цена до скидки должна быть выше текущей цены.",
    "min_auto_price_too_small": "Минимальная цена должна быть не меньше 50% от вашей цены.",
    "min_auto_price_too_big": (
        "Значение цены после автоприменения скидок и акций должно быть меньше вашей цены."
    ),
    "price_less_than_min_auto_price": "Ваша цена должна быть выше минимальной.",
    "action_price_enabled_min_price_missing": (
        "Включено автоприменение в акции, но не задана минимальная цена."
    ),
    # choice: the research says a currency other than the account's is an error, not its code
    "currency_code_mismatch": "Валюта цены не совпадает с валютой расчётов аккаунта.",
}

# The rpcStatus code of each HTTP status the simulator answers with (inference: gRPC's codes
# as a grpc-gateway maps them; §1.2's 404 code 5 and 400 code 3, §1.3's 429 code 8 fit it).
RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 429: 8, 500: 13, 503: 14}
# An unknown method: §1.2's text "method is not allowed" (its status and code: not said). The
# status stays 404 (what a path no route serves answers); the code is gRPC's UNIMPLEMENTED, what
# a gRPC server answers for a method it does not have, never 5: 404 code 5 is a bad key, which
# pauses a channel's delivery (contract 14), and a wrong path is not a bad key.
UNIMPLEMENTED = 12


# -- the UNCONFIRMED points of §8 (and §7), each played both ways -------------------------------


@dataclass
class OzonSwitches:
    """Each field: its default first, the other way second (``SWITCHES`` lists both)."""

    # §1.2/§8 the HTTP status of a key without the method's role: 403 (code 7) or 401 (code 16)
    missing_role_status: Literal["403", "401"] = "403"
    # §1.3/§8 the HTTP status of "Circle is open": 503 (code 14), 429 (code 8), or 200 (code
    # 14: the rpcStatus inside a 200, no ``result``)
    circle_status: Literal["503", "429", "200"] = "503"
    # §1.3/§8 rate-limit headers on a 429: none, or ``ratelimit-remaining: 0``, ``retry-after: 1``
    rate_headers: Literal["none", "observed"] = "none"
    # §1.5/§8 whether an unchanged price counts toward the 10 an hour (the research: assume so)
    unchanged: Literal["counts", "free"] = "counts"
    # §7.2 whether an item refused by a price rule counts toward the 10 an hour
    refused: Literal["free", "counts"] = "free"
    # §7.2 the hour of the 10: rolling (the last 3,600 s) or fixed (each clock hour)
    window: Literal["rolling", "fixed"] = "rolling"
    # §1.4/§8 the storefront: the price live at once, or ``OzonLimits.apply_delay`` later
    storefront: Literal["at-once", "delayed"] = "at-once"
    # §1.4/§8 a not-found item's product_id: 0, or the product_id the request gave
    not_found: Literal["zero", "echo"] = "zero"
    # §1.4 the old-price gap at exactly the threshold: refused (the error table's "больше") or
    # taken (the schema's "минимальная разница")
    gap_boundary: Literal["refused", "taken"] = "refused"
    # §7.4 more than 1,000 items: 400 (code 3), or taken whole
    oversize: Literal["refuse", "accept"] = "refuse"
    # §1.1 min_price at or above price: which of the two codes of the table Ozon answers
    min_above_price: Literal["price_less_than_min_auto_price", "min_auto_price_too_big"] = (
        "price_less_than_min_auto_price"
    )
    # §1.1 a currency_code other than the account's: an item error, or a 400 for the request
    currency: Literal["item", "request"] = "item"
    # §1.1 "до двух знаков после точки": more decimals are a 400, or rounded half up
    decimals: Literal["reject", "round"] = "reject"
    # §1.1 money "strings": a JSON number refused (400), or taken as the string would be
    numbers: Literal["reject", "accept"] = "reject"
    # §1.4 the read-back's money: numbers (the reference's example), or strings
    readback: Literal["numbers", "strings"] = "numbers"
    # §1.4/§7.2 the per-item limit's message: as integrators saw it live, or the table's text
    limit_message: Literal["wrapped", "plain"] = "wrapped"
    # §1.2 a key's life: 6 months (the docs) or 3 (a third-party note for keys from 2026-09-03)
    key_months: Literal["6", "3"] = "6"


SWITCHES: dict[str, tuple[str, ...]] = {
    name: get_args(hint) for name, hint in get_type_hints(OzonSwitches).items()
}


def set_switch(switches: OzonSwitches, name: str, value: str) -> None:
    """``NAME=VALUE`` of ``--switch``: ValueError with one line when either is not known."""
    if name not in SWITCHES:
        raise ValueError(f"no switch {name!r} (switches: {', '.join(SWITCHES)})")
    if value not in SWITCHES[name]:
        raise ValueError(f"switch {name} is one of {', '.join(SWITCHES[name])}, not {value!r}")
    setattr(switches, name, value)


@dataclass
class OzonLimits:
    batch_limit: int = BATCH_LIMIT  # §1.1: items a request (lowered for a bench)
    rps: float | None = 50.0  # §1.3: requests a (real) second per Client-Id, every method
    method_rps: float | None = None  # §1.3 "per-method limits apply on top": none documented
    item_limit: int = 10  # §1.3: price updates of one product an hour
    item_window: float = 3600.0  # §1.3: the hour, in clock seconds
    circle_after: int | None = 100  # §1.3/§7.3: refused requests in one second open the circle
    circle_seconds: float = 180.0  # §1.3: "a few minutes", clock seconds
    apply_delay: float = 60.0  # §8: storefront lag (switch storefront=delayed), clock seconds


@dataclass
class OzonFaults:
    # §1.2: "ok", "invalid" (unknown or revoked), "deactivated", "ip-restricted",
    # "offer-not-signed"
    key: str = "ok"
    roles: str = "write"  # §1.2: "write" (prices), "read" (read-back only), "none"
    delay: float = 0.0  # real seconds before each answer
    internal_errors: int = 0  # the next N requests answer 500 "Internal error" (OZ-ERR)
    drop_after: bool = False  # apply the request, then cut the connection (no answer)
    # apply an import, then answer this many real seconds later (past a client's timeout: the
    # answer never comes in time, the prices landed all the same); other methods answer at once
    slow_after: float = 0.0
    # offer_ids whose result is left out of a 200's ``result`` (applied or refused as ever):
    # an answer short of one result per item (§1.4 says one per item; a fault, not Ozon's word)
    unanswered: set[str] = field(default_factory=set)
    # a proxy in front answers every request with its own HTML page of this status (a wrong
    # ozon_api_url, a gateway down): not Ozon's rpcStatus
    proxy_page: int | None = None
    # a gateway in front answers an import at once with this 5xx (500: Ozon's rpcStatus code 13
    # "Internal error", OZ-ERR; any other: the gateway's HTML page) and hands the request on to
    # Ozon ``late_after`` real seconds later, where it is applied as ever. A general HTTP fact,
    # not Ozon's word: a gateway that timed out, or a server that failed after taking the
    # request, says nothing of whether it was applied; and the import has no idempotency key
    # nor an order between two racing updates (§1.5), so a later send may land before it.
    late_status: int | None = None
    late_after: float = 0.0


class RequestRate:
    """At most ``per_second`` requests a second (real time), counted as whole requests in a
    sliding span: 50 a second is 50 in any second, 2.5 is 2 in any 0.8 s, 0.5 is 1 in any 2 s;
    a refused one takes nothing."""

    def __init__(self) -> None:
        self._taken: collections.deque[float] = collections.deque()

    def refuses(self, per_second: float | None, now: float) -> bool:
        if per_second is None:
            return False
        most = max(1, math.floor(per_second))
        while self._taken and self._taken[0] <= now - most / per_second:
            self._taken.popleft()
        if len(self._taken) >= most:
            return True
        self._taken.append(now)
        return False


class Refusals:
    """A method's refused requests in the last second (real time): a burst of them blocks that
    method, "Circle is open" (§1.3: "the system temporarily blocks the method")."""

    def __init__(self) -> None:
        self._at: collections.deque[float] = collections.deque()

    def count(self, now: float) -> int:
        """This refusal counted; how many the last second holds."""
        self._at.append(now)
        while self._at[0] <= now - 1.0:
            self._at.popleft()
        return len(self._at)


# -- the products --------------------------------------------------------------------------


@dataclass
class Product:
    product_id: int
    offer_id: str
    price: Decimal = Decimal(0)
    old_price: Decimal = Decimal(0)
    min_price: Decimal = Decimal(0)
    net_price: Decimal = Decimal(0)
    currency_code: str = "RUB"
    flags: dict[str, str] = field(default_factory=lambda: dict.fromkeys(FLAGS, "DISABLED"))
    # what the last accepted update set (what a new one is compared with), and the updates
    # accepted but not yet on the storefront: (clock time live, values)
    accepted: dict[str, Any] = field(default_factory=dict)
    pending: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    charged: list[float] = field(default_factory=list)  # clock times counted against the hour
    bounds: tuple[Decimal, Decimal] | None = None  # the category's price range (§1.4)

    def live(self) -> dict[str, Any]:
        return {
            "price": self.price,
            "old_price": self.old_price,
            "min_price": self.min_price,
            "net_price": self.net_price,
            "currency_code": self.currency_code,
            **self.flags,
        }


class Malformed(Exception):
    """The request is not one Ozon takes: 400 code 3 with this message (§1.4 "Неверный
    параметр"; the wording follows OZ-ERR's "Request validation error: …")."""


def price_rule_errors(
    values: dict[str, Any], switches: OzonSwitches, bounds: tuple[Decimal, Decimal] | None
) -> list[str]:
    """The price rules of §1.1 and §1.4 for the values a product would hold: the codes of
    ``ITEM_ERRORS`` it breaks (empty: none)."""
    price, old, low = values["price"], values["old_price"], values["min_price"]
    if min(price, old, low, values["net_price"]) < 0:
        return ["price_negative"]  # §1.4
    errors: list[str] = []
    if old > 0:  # §1.1: old_price "0" is none
        gap = old - price
        taken = switches.gap_boundary == "taken"

        def enough(gap_needed: Decimal) -> bool:
            return bool(gap >= gap_needed if taken else gap > gap_needed)

        if old < price:
            errors.append("old_price_less_than_price")  # §1.1 (OZ-ERR)
        elif gap * 10 >= old * 9:
            errors.append("discount_too_big")  # §1.4: the gap must be under 90 %
        elif price <= 400 and not enough(Decimal(20)):
            errors.append("discount_for_low_price_is_too_small")  # §1.4, tiers of the table
        elif 400 < price <= 10000 and not enough(old * Decimal("0.05")):
            errors.append("discount_for_average_price_is_too_small")
        elif price > 10000 and not enough(Decimal(500)):
            errors.append("discount_for_top_price_is_too_small")
    if low > 0:  # §1.1/§1.6.4: min_price below price and at least half of it
        if low >= price:
            errors.append(switches.min_above_price)
        elif low * 2 < price:
            errors.append("min_auto_price_too_small")
    if values["auto_action_enabled"] == "ENABLED" and low <= 0:
        errors.append("action_price_enabled_min_price_missing")  # §1.1
    if bounds is not None and not bounds[0] <= price <= bounds[1]:
        errors.append("invalid_category_price")  # §1.4
    return errors


def _money(name: str, given: Any, switches: OzonSwitches) -> Decimal | None:
    """A money field of §1.1: a string with a point and at most two decimals; "" and absent
    are not given (proto3). Raises Malformed."""
    if given is None or given == "":
        return None
    raw = str(given)
    if not isinstance(given, str) and (
        switches.numbers == "reject"
        or isinstance(given, bool)
        or not isinstance(given, int | Decimal)
    ):
        raise Malformed(f"invalid value for string field {name}: {raw}")
    if not re.fullmatch(r"-?\d+(\.\d+)?", raw):
        raise Malformed(f"invalid value for field {name}: {raw!r}")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise Malformed(f"invalid value for field {name}: {raw!r}") from None
    if -value.as_tuple().exponent > 2:  # type: ignore[operator]
        if switches.decimals == "reject":
            raise Malformed(f"invalid value for field {name}: at most two decimals, {raw!r}")
        value = value.quantize(Decimal("0.01"), ROUND_HALF_UP)
    return value


@dataclass
class Item:
    """One element of ``prices`` as read (§1.1)."""

    offer_id: str
    product_id: int
    given: dict[str, Any]  # the fields it sets: money as Decimal, currency, flags


def read_items(body: Any, switches: OzonSwitches, most: int = BATCH_LIMIT) -> list[Item]:
    """The request of §1.1 read (``most`` items at most); Malformed for what is a 400."""
    if not isinstance(body, dict) or not isinstance(body.get("prices"), list):
        raise Malformed("Request validation error: prices is required")
    prices = body["prices"]
    if len(prices) > most and switches.oversize == "refuse":  # §1.1, §7.4
        raise Malformed(
            "Request validation error: invalid ImportProductsPricesRequest.Prices: value must "
            f"contain no more than {most} item(s)"
        )
    items = []
    for index, raw in enumerate(prices):
        where = f"ImportProductsPricesRequest.Prices[{index}]"
        if not isinstance(raw, dict):
            raise Malformed(f"Request validation error: invalid {where}: not an object")
        offer_id = raw.get("offer_id") or ""
        product_id = raw.get("product_id") or 0
        if isinstance(product_id, str) and product_id.isdigit():
            product_id = int(product_id)  # int64 in JSON is a string as often as a number
        if not isinstance(offer_id, str) or not isinstance(product_id, int):
            raise Malformed(f"Request validation error: invalid {where}: offer_id, product_id")
        given: dict[str, Any] = {}
        try:
            for name in MONEY_FIELDS:
                value = _money(name, raw.get(name), switches)
                if value is not None:
                    given[name] = value
        except Malformed as exc:
            raise Malformed(f"Request validation error: invalid {where}: {exc}") from None
        currency = raw.get("currency_code") or "RUB"  # §1.1: default RUB
        if currency not in CURRENCIES:
            raise Malformed(f"Request validation error: invalid {where}: currency_code")
        given["currency_code"] = currency
        for flag in FLAGS:
            state = raw.get(flag) or "UNKNOWN"
            if state not in FLAG_VALUES:
                raise Malformed(f"Request validation error: invalid {where}: {flag}")
            if state != "UNKNOWN":  # §1.5: UNKNOWN leaves the flag as it is
                given[flag] = state
        items.append(Item(offer_id, product_id, given))
    return items


class OzonSimulator(LoopbackServer):
    def __init__(
        self,
        client_id: str = "836741",
        api_key: str = "ozon-test-key",
        *,
        currency: str = "RUB",
        time_scale: float = 1.0,
        auto: bool = True,
        oauth_token: str | None = None,
    ) -> None:
        """``currency``: the account's settlement currency (§1.1). ``oauth_token``: a Bearer
        token an application may use instead of the key (§1.2)."""
        super().__init__()
        self.handler = _OzonHandler
        self.client_id, self.api_key, self.oauth_token = client_id, api_key, oauth_token
        self.currency = currency
        self.clock = SimClock(time_scale)
        # The per-second rate's real clock; a test that needs a request refused for certain
        # (not only when the machine is quick enough) stops it.
        self.monotonic: Callable[[], float] = time.monotonic
        self.switches = OzonSwitches()
        self.limits = OzonLimits()
        self.faults = OzonFaults()
        self.auto = auto
        self.products: dict[str, Product] = {}
        self._by_id: dict[int, Product] = {}
        self._next_id = 1_000_000
        self._history: dict[str, list[str]] = collections.defaultdict(list)
        self._updates: dict[str, list[dict[str, Decimal]]] = collections.defaultdict(list)
        self.requests: collections.Counter[str] = collections.Counter()
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.largest_batch = 0
        self._rates: dict[str, RequestRate] = collections.defaultdict(RequestRate)
        self._method_rate = RequestRate()
        self._refusals: dict[str, Refusals] = collections.defaultdict(Refusals)  # by method
        self._circle_until: dict[str, float] = {}  # by method
        self.key_created = self.clock.now()
        self._state = threading.RLock()

    # -- the catalogue ---------------------------------------------------------------------

    def add(self, offer_id: str) -> Product:
        with self._state:
            self._next_id += 1
            product = Product(self._next_id, offer_id, currency_code=self.currency)
            self.products[offer_id] = product
            self._by_id[product.product_id] = product
            return product

    def hold(self, catalogue: Catalogue) -> None:
        """These articles and no others."""
        with self._state:
            self.auto = False
            for offer_id in catalogue.skus:
                if offer_id not in self.products:
                    self.add(offer_id)

    def product(self, offer_id: str) -> Product | None:
        with self._state:
            if offer_id in self.products:
                return self.products[offer_id]
            if self.auto and offer_id and not offer_id.startswith("NOSUCH"):
                return self.add(offer_id)
            return None

    def set_category_bounds(self, offer_id: str, low: Decimal, high: Decimal) -> None:
        """The category's price range for this product (§1.4 ``invalid_category_price``)."""
        product = self.product(offer_id)
        assert product is not None
        with self._state:
            product.bounds = (low, high)

    def promote(self, offer_id: str, price: Decimal) -> None:
        """Ozon's own promotion or pricing strategy changes the price (§1.6.5, §7.7): the
        read-back then differs from what the seller last sent."""
        product = self.product(offer_id)
        assert product is not None
        with self._state:
            self._settle(product)
            product.price = price
            product.accepted.pop("price", None)  # what a new update is compared with now
            self._history[offer_id].append(_text(price))

    def open_circle(self, seconds: float | None = None, path: str = IMPORT_PRICES) -> None:
        """The method at ``path`` answers "Circle is open" for ``seconds`` of clock (§1.3);
        the other methods answer as before."""
        with self._state:
            self._circle_until[path] = self.clock.now() + (
                self.limits.circle_seconds if seconds is None else seconds
            )

    def circle_open(self, path: str) -> bool:
        with self._state:
            return self.clock.now() < self._circle_until.get(path, -math.inf)

    def history(self, offer_id: str) -> list[str]:
        with self._state:
            product = self.products.get(offer_id)
            if product is not None:
                self._settle(product)
            return list(self._history[offer_id])

    def histories(self) -> dict[str, list[str]]:
        """``history`` of every product at once."""
        with self._state:
            for product in self.products.values():
                self._settle(product)
            return {k: list(v) for k, v in self._history.items()}

    def updates(self, offer_id: str) -> list[dict[str, Decimal]]:
        """Every update the product took on the storefront, in order: the money fields it
        gave (``price``, ``old_price``, ...), an unchanged one included when it changed any."""
        with self._state:
            product = self.products.get(offer_id)
            if product is not None:
                self._settle(product)
            return [dict(u) for u in self._updates[offer_id]]

    def set_price(self, offer_id: str, price: Decimal) -> None:
        """The price the product holds before a run (set in the cabinet earlier): on the
        storefront, what a new update is compared with, not in ``history``."""
        product = self.product(offer_id)
        assert product is not None
        with self._state:
            product.price = price

    def price(self, offer_id: str) -> Decimal | None:
        """The price on the storefront now (None: no such product)."""
        with self._state:
            product = self.products.get(offer_id)
            if product is None:
                return None
            self._settle(product)
            return product.price

    def charged(self, offer_id: str) -> list[float]:
        with self._state:
            product = self.products.get(offer_id)
            return list(product.charged) if product is not None else []

    # -- the rules -------------------------------------------------------------------------

    def _settle(self, product: Product) -> None:
        """The accepted updates whose time has come are on the storefront (§1.4, §8)."""
        now = self.clock.now()
        while product.pending and product.pending[0][0] <= now:
            _, values = product.pending.pop(0)
            before = product.price
            for name, value in values.items():
                if name in FLAGS:
                    product.flags[name] = value
                else:
                    setattr(product, name, value)
            history = self._history[product.offer_id]
            if "price" in values and (values["price"] != before or not history):
                history.append(_text(product.price))
            self._updates[product.offer_id].append(
                {name: values[name] for name in MONEY_FIELDS if name in values}
            )

    def _hour_refuses(self, product: Product, now: float) -> bool:
        """§1.3: at most ``item_limit`` updates a product in the window (rolling or fixed)."""
        window = self.limits.item_window
        if self.switches.window == "rolling":
            product.charged = [t for t in product.charged if t > now - window]
        else:
            hour = math.floor(now / window)
            product.charged = [t for t in product.charged if math.floor(t / window) == hour]
        return len(product.charged) >= self.limits.item_limit

    def _resolve(self, item: Item) -> Product | None:
        """§1.1: offer_id wins over product_id when both are given."""
        if item.offer_id:
            return self.product(item.offer_id)
        return self._by_id.get(item.product_id)

    def import_prices(self, items: list[Item]) -> list[dict[str, Any]]:
        """§1.4: one result per item, in order, inside the 200."""
        results = []
        with self._state:
            now = self.clock.now()
            for item in items:
                result, outcome = self._import_one(item, now)
                self.outcomes[outcome] += 1
                results.append(result)
        return results

    def _import_one(self, item: Item, now: float) -> tuple[dict[str, Any], str]:
        """The item's result and its outcome (``updated``, ``unchanged`` or the error's code)."""
        product = self._resolve(item)
        if product is None:  # §1.4 NOT_FOUND_ERROR; its product_id is switch not_found (§8)
            shown = item.product_id if self.switches.not_found == "echo" else 0
            return _result(shown, item.offer_id, "NOT_FOUND_ERROR"), "NOT_FOUND_ERROR"
        if self._hour_refuses(product, now):  # §1.3, §1.4: an item error, never charged
            message = ITEM_LIMIT_WRAPPED if self.switches.limit_message == "wrapped" else ITEM_LIMIT
            error = {"code": ITEM_LIMIT, "message": message}
            return {
                "product_id": product.product_id,
                "offer_id": product.offer_id,
                "updated": False,
                "errors": [error],
            }, ITEM_LIMIT
        self._settle(product)
        latest = {**product.live(), **product.accepted}
        values = {**latest, **item.given}
        if values["currency_code"] != self.currency:  # §1.1: the account's currency only
            if self.switches.refused == "counts":
                product.charged.append(now)
            code = "currency_code_mismatch"
            return _result(product.product_id, product.offer_id, code), code
        errors = price_rule_errors(values, self.switches, product.bounds)
        if errors:  # §1.4: terminal item errors; switch refused (§7.2) whether they count
            if self.switches.refused == "counts":
                product.charged.append(now)
            return _result(product.product_id, product.offer_id, *errors), errors[0]
        unchanged = all(latest[name] == value for name, value in item.given.items())
        if not unchanged or self.switches.unchanged == "counts":  # §1.5
            product.charged.append(now)
        if not unchanged:
            product.accepted.update(item.given)
            delay = self.limits.apply_delay if self.switches.storefront == "delayed" else 0.0
            product.pending.append((now + delay, dict(item.given)))
            self._settle(product)
        result = {
            "product_id": product.product_id,
            "offer_id": product.offer_id,
            "updated": True,
            "errors": [],
        }
        return result, "unchanged" if unchanged else "updated"

    def read_prices(self, body: Any) -> dict[str, Any]:
        """§1.4 read-back, ``POST /v5/product/info/prices`` (the shape of OZ-MIR 06's example)."""
        if not isinstance(body, dict) or not isinstance(body.get("filter"), dict):
            raise Malformed("Request validation error: filter is required")
        limit = body.get("limit")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= BATCH_LIMIT:
            raise Malformed("Request validation error: limit must be in 1..1000")
        wanted = body["filter"]
        offers = [str(o) for o in wanted.get("offer_id") or []]
        ids = {int(i) for i in wanted.get("product_id") or [] if str(i).isdigit()}
        cursor = str(body.get("cursor") or "")
        with self._state:
            if offers or ids:
                found = [p for p in (self.product(o) for o in offers) if p is not None]
                found += [self._by_id[i] for i in ids if i in self._by_id]
            else:
                found = list(self.products.values())
            chosen = sorted({p.product_id: p for p in found}.values(), key=lambda p: p.product_id)
            after = int(cursor) if cursor.isdigit() else 0
            page = [p for p in chosen if p.product_id > after][:limit]
            for product in page:
                self._settle(product)
            items = [self._read_one(p) for p in page]
            more = page and page[-1].product_id != chosen[-1].product_id
        return {
            "items": items,
            "cursor": str(page[-1].product_id) if more else "",
            "total": len(chosen),
        }

    def _read_one(self, product: Product) -> dict[str, Any]:
        money: Callable[[Decimal], Any] = _number if self.switches.readback == "numbers" else _text
        return {
            "product_id": product.product_id,
            "offer_id": product.offer_id,
            "price": {
                "price": money(product.price),
                "old_price": money(product.old_price),
                "min_price": money(product.min_price),
                "net_price": money(product.net_price),
                "currency_code": product.currency_code,
                "auto_action_enabled": product.flags["auto_action_enabled"] == "ENABLED",
                "auto_add_to_ozon_actions_list_enabled": (
                    product.flags["auto_add_to_ozon_actions_list_enabled"] == "ENABLED"
                ),
            },
        }

    def roles(self) -> dict[str, Any]:
        """§1.2 ``POST /v1/roles``: the key's roles with their methods and ``expires_at``."""
        months = int(self.switches.key_months)
        expires = datetime.fromtimestamp(self.key_created, UTC) + timedelta(days=30 * months)
        methods = {
            "write": [IMPORT_PRICES, INFO_PRICES, ROLES],
            "read": [INFO_PRICES, ROLES],
            "none": [ROLES],
        }[self.faults.roles]
        # choice: the role's name (the reference's example names "Admin"); methods decide
        name = {"write": "Admin", "read": "Read only", "none": "Key info"}[self.faults.roles]
        return {
            "expires_at": expires.isoformat().replace("+00:00", "Z"),
            "roles": [{"name": name, "methods": methods}],
        }

    # -- the gate every request passes ----------------------------------------------------

    def gate(self, path: str, headers: Any) -> tuple[int, str, dict[str, str]] | None:
        """The answer before the method runs (None: it runs): Client-Id (§1.2), the rate
        (§1.3), the key (§1.2), "Circle is open" (§1.3), the key's role (§1.2)."""
        bearer = headers.get("Authorization") or ""
        oauth = (
            self.oauth_token is not None
            and bearer.startswith("Bearer ")
            and hmac.compare_digest(bearer[7:], self.oauth_token)
        )
        client = headers.get("Client-Id") or ""
        if not oauth and not (
            client.isascii() and client.isdigit() and 0 < int(client[:20]) <= INT64_MAX
        ):
            return 400, BAD_CLIENT_ID, {}  # §1.2: Client-Id is read as a positive int64
        with self._state:
            if self.faults.internal_errors > 0:
                self.faults.internal_errors -= 1
                return 500, INTERNAL_ERROR, {}
            real = self.monotonic()
            rate = self._rates["oauth" if oauth else client]
            if rate.refuses(self.limits.rps, real) or (
                path == IMPORT_PRICES and self._method_rate.refuses(self.limits.method_rps, real)
            ):
                after = self.limits.circle_after
                if after is not None and self._refusals[path].count(real) >= after:
                    self.open_circle(path=path)
                extra = (
                    {"ratelimit-remaining": "0", "retry-after": "1"}
                    if self.switches.rate_headers == "observed"
                    else {}
                )
                return 429, RATE_LIMITED, extra
        key = headers.get("Api-Key") or ""
        known = oauth or (
            hmac.compare_digest(client, self.client_id)
            and hmac.compare_digest(key.encode(), self.api_key.encode())
        )
        if self.faults.key == "invalid" or not known:
            return 404, INVALID_KEY, {}
        if self.faults.key == "deactivated":  # inference: as an unknown key
            return 404, DEACTIVATED_KEY, {}
        if self.faults.key == "ip-restricted":  # inference: as a missing role
            return int(self.switches.missing_role_status), IP_RESTRICTED, {}
        if self.faults.key == "offer-not-signed":
            return 403, OFFER_NOT_SIGNED, {}
        if self.circle_open(path):
            return int(self.switches.circle_status), CIRCLE_OPEN, {}
        if path not in self.roles()["roles"][0]["methods"]:
            return int(self.switches.missing_role_status), MISSING_ROLE, {}
        return None


def _result(product_id: int, offer_id: str, *codes: str) -> dict[str, Any]:
    return {
        "product_id": product_id,
        "offer_id": offer_id,
        "updated": False,
        "errors": [{"code": c, "message": ITEM_ERRORS[c]} for c in codes],
    }


def _text(value: Decimal) -> str:
    return f"{value:.2f}"


def _number(value: Decimal) -> int | float:
    """A JSON number as the reference's example prints it (2999.99, 2000)."""
    return int(value) if value == value.to_integral_value() else float(value)


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def rpc_status(status: int, message: str, code: int | None = None) -> bytes:
    """§1.2: the generic error body (rpcStatus); its code the status's unless given."""
    code = RPC_CODES.get(status, 2) if code is None else code
    return _json({"code": code, "message": message, "details": []})


class _OzonHandler(Handler):
    server_version = "nginx"

    @property
    def sim(self) -> OzonSimulator:
        return self.server.sim  # type: ignore[attr-defined, no-any-return]

    def fail(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        # "Circle is open" in a 200 (switch circle_status=200) keeps its 503's code, 14
        code = RPC_CODES[503] if status == 200 else None
        self.answer(status, rpc_status(status, message, code), "application/json", headers)

    def unknown_method(self) -> None:
        """§1.2 "method is not allowed", 404 code 12 (``UNIMPLEMENTED``)."""
        self.answer(404, rpc_status(404, NOT_ALLOWED, UNIMPLEMENTED), "application/json")

    def do_GET(self) -> None:
        self.body()
        self.unknown_method()

    def answer_now_apply_later(self, raw: bytes, status: int, after: float) -> None:
        """``OzonFaults.late_status``: the 5xx now, the import applied ``after`` real seconds
        later (passing the gate then, as a request arriving then would), its answer lost."""
        sim = self.sim
        headers = self.headers

        def apply() -> None:
            if sim.gate(IMPORT_PRICES, headers) is not None:
                return
            try:
                body = json.loads(raw or b"{}", parse_float=Decimal)
                sim.import_prices(read_items(body, sim.switches, sim.limits.batch_limit))
            except (ValueError, Malformed):
                return

        timer = threading.Timer(after, apply)
        timer.daemon = True
        timer.start()
        if status == 500:
            self.fail(500, INTERNAL_ERROR)
            return
        page = f"<html><head><title>{status}</title></head><body><center><h1>{status}</h1>"
        self.answer(
            status,
            (page + "</center><hr><center>nginx</center></body></html>").encode(),
            "text/html",
        )

    def do_POST(self) -> None:
        raw = self.body()
        sim = self.sim
        path = self.path.split("?", 1)[0]
        with sim._state:
            sim.requests[path] += 1
        if sim.faults.delay:
            time.sleep(sim.faults.delay)
        if sim.faults.proxy_page is not None:
            status = sim.faults.proxy_page
            page = f"<html><head><title>{status}</title></head><body><center><h1>{status}</h1>"
            self.answer(
                status,
                (page + "</center><hr><center>nginx</center></body></html>").encode(),
                "text/html",
            )
            return
        if path not in (IMPORT_PRICES, INFO_PRICES, ROLES):
            self.unknown_method()
            return
        if path == IMPORT_PRICES and sim.faults.late_status is not None:
            self.answer_now_apply_later(raw, sim.faults.late_status, sim.faults.late_after)
            return
        refused = sim.gate(path, self.headers)
        if refused is not None:
            self.fail(*refused)
            return
        try:
            body = json.loads(raw or b"{}", parse_float=Decimal)
            if path == IMPORT_PRICES:
                items = read_items(body, sim.switches, sim.limits.batch_limit)
                if sim.switches.currency == "request" and any(
                    i.given["currency_code"] != sim.currency for i in items
                ):
                    raise Malformed("Request validation error: currency_code must be the account's")
                with sim._state:
                    sim.largest_batch = max(sim.largest_batch, len(items))
                results = sim.import_prices(items)
                gone = sim.faults.unanswered
                answer: dict[str, Any] = {
                    "result": [r for r in results if r.get("offer_id") not in gone]
                }
            elif path == INFO_PRICES:
                answer = sim.read_prices(body)
            else:
                answer = sim.roles()
        except ValueError:
            self.fail(400, "invalid character in the request body: not JSON")
            return
        except Malformed as exc:
            self.fail(400, str(exc))
            return
        if sim.faults.drop_after:
            self.drop()
            return
        if sim.faults.slow_after and path == IMPORT_PRICES:
            time.sleep(sim.faults.slow_after)
        self.answer(200, _json(answer), "application/json")


# -- in the foreground ---------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """``python -m exchange.dev.ozonsim --port N``: Ozon's price API in the foreground, for
    ``exchange check`` and ``exchange run`` (every article exists but ``NOSUCH-*``). The
    Client-Id: OZONSIM_CLIENT_ID when set; the key: read from ``--key-file`` (or
    OZONSIM_API_KEY_FILE) when that file exists, else a demo key written to it (to a file
    of its own without one, removed at the end)."""
    from exchange.dev.catalogue import CatalogueError, read_catalogue
    from exchange.dev.httpsim import arguments, credential, run_in_foreground, setting_line

    parser = arguments(
        "python -m exchange.dev.ozonsim", "Serve a simulated Ozon Seller API until Ctrl-C."
    )
    parser.add_argument("--key-file", metavar="FILE", help="the Api-Key's file")
    parser.add_argument("--currency", default="RUB", choices=CURRENCIES)
    parser.add_argument(
        "--time-scale", type=time_scale, default=1.0, help="the clock runs this many times faster"
    )
    parser.add_argument("--rps", type=float, default=50.0, help="requests a second per Client-Id")
    parser.add_argument("--item-limit", type=int, default=10, help="updates a product an hour")
    parser.add_argument(
        "--batch-limit", type=int, default=BATCH_LIMIT, help="items a request at most"
    )
    parser.add_argument(
        "--switch",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"an unconfirmed point played the other way: {', '.join(SWITCHES)}",
    )
    parser.add_argument("--catalogue", metavar="FILE", help="the account's articles, one a line")
    args = parser.parse_args(argv)
    client_id, client_set = credential("OZONSIM_CLIENT_ID", "836741")
    sim = OzonSimulator(client_id, currency=args.currency, time_scale=args.time_scale)
    sim.limits.rps = args.rps
    sim.limits.item_limit = args.item_limit
    sim.limits.batch_limit = args.batch_limit
    for given in args.switch:
        name, _, value = given.partition("=")
        try:
            set_switch(sim.switches, name.strip(), value.strip())
        except ValueError as exc:
            parser.exit(2, f"error: {exc}\n")
    if args.catalogue:
        try:
            sim.hold(read_catalogue(Path(args.catalogue)))
        except CatalogueError as exc:
            parser.exit(2, f"error: {exc}\n")
    sim.host, sim.port = args.host, args.port
    # The key last, once nothing can stop the start: a file of its own is removed at the end.
    key_path = Path(args.key_file or os.environ.get("OZONSIM_API_KEY_FILE") or "")
    made: Path | None = None
    try:
        if str(key_path) != "." and key_path.is_file():
            sim.api_key, key_set = key_path.read_text(encoding="utf-8").strip(), True
        else:
            sim.api_key, key_set = "ozon-demo-api-key", False
            if str(key_path) == ".":
                handle, name = tempfile.mkstemp(prefix="ozon-api-key-", suffix=".txt")
                os.close(handle)
                key_path = made = Path(name)
            key_path.write_text(sim.api_key + "\n", encoding="utf-8")
    except OSError as exc:  # a directory that does not exist, no permission: one line
        parser.exit(2, f"error: the key file {key_path}: {exc.strerror or exc}\n")

    def settings(s: LoopbackServer) -> list[str]:
        channel = {
            "target": "ozon",
            "ozon_api_url": s.url,
            "ozon_client_id": client_id,
            "ozon_api_key_file": str(key_path.resolve()),
            "ozon_price_types": {"retail": "price"},
            "currency": args.currency,
        }
        lines = [setting_line("EXCHANGE_CHANNELS", json.dumps({"ozon": channel}))]
        if client_set:
            lines.append("# ozon_client_id: the value you gave (OZONSIM_CLIENT_ID)")
        if key_set:
            lines.append(f"# the key: the one in {key_path} (not shown)")
        switched = [f"{f.name}={getattr(sim.switches, f.name)}" for f in fields(OzonSwitches)]
        lines.append(
            f"# clock x{args.time_scale:g}, {args.rps:g} requests/s, {args.batch_limit} items a "
            f"request, {args.item_limit} updates a product an hour; " + ", ".join(switched)
        )
        return lines

    try:
        run_in_foreground(sim, "Ozon", settings)
    finally:
        if made is not None:
            with contextlib.suppress(OSError):
                made.unlink()


if __name__ == "__main__":
    main()

"""A simulator of Yandex Market's Partner API for prices, business (cabinet) level, written from
``../shared/research/marketplaces.md`` section 3 (and its simulator list, section 7, and its open
points, section 8), never from the service's target. Each behaviour names its research section;
docs/simulators/yandex-market.md is the conformance table, tests/dev/test_ymsim.py checks it.

    POST /v2/businesses/{businessId}/offer-prices/updates     set prices (§3.1), 200 = accepted
    POST /v2/businesses/{businessId}/offer-prices             read them back (§3.4)
    POST /v2/businesses/{businessId}/price-quarantine         the offers Yandex withholds (§3.4)
    POST /v2/businesses/{businessId}/price-quarantine/confirm release them (§3.4)

What it does, in the order a request meets it:

1. auth (§3.2): ``Api-Key: <key>`` (or the legacy ``Authorization: Bearer|OAuth <token>``);
   missing or wrong key: 401 ``UNAUTHORIZED`` "Api-Key token is invalid" (the documented body);
   a wrong OAuth token: 403 "OAuth token is invalid"; a key whose scope is read-only
   (``pricing:read-only``) reads but may not write: 403 "Token does not have any of the scopes
   to access the API method"; another business's id: 403 (the simulator's words).
2. ``in_migration`` (§3.4, §7.3): 423 ``LOCKED`` "Business is in migration"; ``outage``
   500 or 503 (§3.3, last bullet).
3. parallel requests (§3.3): more than ``parallel`` at once per business (every method:
   updates, read-backs, quarantine lists, confirms, counted together): 420 "Hit rate limit
   of 'N' parallel requests for businessId B", with the method's resource headers.
4. the body: over 512 KB is 400 "The request is too big" (§3.1); not JSON is 400.
5. the per-minute resource of the method, counted in offers (§3.3: one a method, the
   updates', the read-back's, the quarantine list's and the confirm's): the request costs its
   number of offers (``offers`` or ``offerIds``, 1 without them); when that is more than
   what is left of the window: 420 "Hit rate limit of 'N' requests per '1 minute' for
   resource 'R' for businessId B" and nothing charged. Every
   answer past auth carries ``X-RateLimit-Resource-Limit``, ``-Remaining`` and ``-Until`` (an
   RFC 822 date, whole seconds, the end of the window); no ``Retry-After``.
6. validation (§3.1, §3.4): 400 with ``errors[]`` naming each bad offer (by ``offerId`` or by
   index, as the documented messages do); a 400 is charged like a 200 (§3.3: 4xx decrement).
7. 200 ``{"status":"OK"}``: accepted, not applied. Each offer is applied ``apply_delay``
   (simulated) seconds later (§3.4 "до нескольких минут"), with replace semantics (§3.1, §3.6):
   no ``discountBase`` clears the discount, no ``minimumForBestseller`` clears it.
8. at apply, Yandex's own price quarantine (§3.4, §7.6): a change by more than
   ``quarantine_change`` of the last valid price (``PRICE_CHANGE``) or a price under the
   offer's market minimum (``market_min``, ``LOW_PRICE``) is withheld: the last valid price
   stays, the offer is listed in ``price-quarantine`` until confirmed or until a price that
   passes arrives.

The clock (``SimClock``, exchange/dev/simclock.py) is read in its wall-clock view: it scales
durations, never dates. With ``scale`` 60 a simulated minute (the budget's window,
``apply_delay``) lasts one real second (``wall``), and every date the simulator writes
(``X-RateLimit-Resource-Until``, ``updatedAt``) is the real UTC moment (``wall_now``), so a
client on the real clock obeys it as it is. A still clock (``scale`` 0) moves only when a test
advances it.

Where the research says UNCONFIRMED (§3.3–§3.5, §8), ``YmSwitches`` plays it either way.
"""

from __future__ import annotations

import collections
import email.utils
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
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from exchange.dev.httpsim import Handler, LoopbackServer, time_scale
from exchange.dev.simclock import SimClock

MAX_UPDATE = 500  # §3.1 UpdateBusinessPricesRequest: 1..500 offers
MAX_READ = 200  # §3.4 GetDefaultPricesRequest: ≤ 200 offerIds
MAX_CONFIRM = 200  # §3.4 ConfirmPricesRequest: 1..200 unique offerIds
MAX_BODY = 512 * 1024  # §3.1 request body ≤ 512 KB
MAX_OFFER_ID = 255  # §3.1 ShopSku: 1..255 characters
MAX_DIGITS = 7  # §3.1 value: ≤ 7 decimal places
MAX_BESTSELLER = Decimal(100_000_000)  # §3.1 minimumForBestseller: 0 < x ≤ 100 000 000
DISCOUNT_MIN, DISCOUNT_MAX = 5, 99  # §3.1 discountBase: discount 5..99 %
OFFERS_PER_MINUTE = 10_000  # §3.3 x-resource-limit-config amount 10000, minutes, 1
PARALLEL = 4  # §3.3 "не более четырёх одновременных запросов" (current YM-LIM)
WINDOW = 60.0  # §3.3 period: minutes, period-duration: 1 (simulated seconds)
QUARANTINE_PAGE = 500  # §3.4 price-quarantine pages (the limit's "не более 500")
CURRENCY = "RUR"  # §3.1 CurrencyType; the cabinet's currency
UPDATE_RESOURCE = "updateBusinessPrices"
READ_RESOURCE = "getDefaultPrices"
QUARANTINE_RESOURCE = "getBusinessQuarantineOffers"
CONFIRM_RESOURCE = "confirmBusinessPrices"
# §3.3 "Resource limit per method": each method's own resource (its operationId, YM-OAS)
RESOURCES = {
    "offer-prices/updates": UPDATE_RESOURCE,
    "offer-prices": READ_RESOURCE,
    "price-quarantine": QUARANTINE_RESOURCE,
    "price-quarantine/confirm": CONFIRM_RESOURCE,
}
WRITE_SCOPES = frozenset({"pricing", "all-methods"})  # §3.2 x-auth-scopes of the updates
READ_SCOPES = WRITE_SCOPES | {"pricing:read-only", "all-methods:read-only"}

JsonObject = dict[str, Any]


def rfc822(moment: float, rounding: str = "up") -> str:
    """§3.3: ``X-RateLimit-Resource-Until`` as an RFC 822 date (``Thu, 10 Jul 2018 00:42:42
    GMT``), whole seconds, rounded up (the resource is usable only after it) or down (the
    switch ``until_rounding``: the research does not say which Yandex writes)."""
    whole = math.ceil(moment) if rounding == "up" else math.ceil(moment) - 1
    return email.utils.formatdate(whole, usegmt=True)


def iso(moment: float) -> str:
    """``updatedAt`` (§3.4, date-time)."""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


# -- what the research leaves open -----------------------------------------------------------------


@dataclass
class YmSwitches:
    """The research's UNCONFIRMED points (and its silences), each playable both ways."""

    # §3.4, §8 "atomicity of a 400 batch": True, a 400 applies nothing; False, the valid
    # offers of the request are accepted and the 400 names the bad ones.
    atomic_400: bool = True
    # §3.4, §8 "behaviour for unknown offerId": "accept" (200, never applied, absent from the
    # read-back) or "reject" (400 OFFER_NOT_FOUND naming it; the simulator's words).
    unknown_offer: str = "accept"
    # §3.5 "sending the same price twice ... expect 200; UNCONFIRMED": "touch" (200, applied
    # again, updatedAt moves), "ignore" (200, nothing changes), "refuse" (400 naming it).
    repeat_price: str = "touch"
    # §3.4 "до нескольких минут": simulated seconds between the 200 and the read-back showing it.
    apply_delay: float = 60.0
    # §3.4, §8 quarantine thresholds: a change by more than this share of the last valid price
    # is PRICE_CHANGE (None: no such quarantine).
    quarantine_change: Decimal | None = Decimal("0.5")
    # Research silent: what ``offer-prices`` shows for a withheld offer: "last-valid" (the price
    # buyers see) or "new" (the price sent, as the catalogue holds it).
    readback_quarantined: str = "last-valid"
    # §3.3 parallel cap: 4 (current YM-LIM) or 2 (the 2025-09 copy).
    parallel: int = PARALLEL
    # Research silent: a request costing more than what the window has left: "refuse" (420,
    # nothing charged) or "overdraft" (taken while anything is left; the window ends at 0).
    overdraft: str = "refuse"
    # §3.4 "discount-% out of range (two forms, by index and by offerId)": which form.
    discount_error_by: str = "offerId"
    # §3.1 "discount must be 5..99 %" (YM-OAS DiscountBase: "от 5 до 99%") and YM-ERR's
    # "Discount percentage must be between 'min' and 'max'": whether a discount of exactly 5 %
    # or 99 % is taken the research does not say (as Ozon's gap at its threshold, §1.4):
    # "inclusive" takes it, "exclusive" refuses it with the out-of-range message.
    discount_bounds: str = "inclusive"
    # §8 "whether unversioned paths (without /v2) still work": True answers them too.
    unversioned_paths: bool = False
    # §3.4 "the published examples show "status":"OK" inside 4xx bodies": what an error body's
    # ``status`` says, "ERROR" or "OK".
    error_status: str = "ERROR"
    # Research silent (§3.4 names only "≤ 200 offerIds per call"): a read-back without
    # ``offerIds``: "page" (a page of the whole catalogue, ``limit``/``page_token``) or
    # "refuse" (400, as a fake written from the research answered it in review 32).
    read_without_ids: str = "page"
    # §3.3 "RFC 822 date", whole seconds: whether ``X-RateLimit-Resource-Until`` names the
    # window's end rounded "up" (usable from the moment named) or "down": the whole second
    # before it (``formatdate`` truncates; the worst a whole-second date can be off), so a
    # request at the moment named is still refused.
    until_rounding: str = "up"
    # Research silent (§3.4: "validation errors name the offending offerId/index inside a
    # 400"): whether a 400 names "all" the bad offers of the request, the "first" only, or
    # "none" ("Internal validation failed", naming no offer: a fake written from the research
    # answered so in review 32b).
    errors_named: str = "all"
    # §3.5 "Races: no ordering guarantee documented": the order an offer's accepted updates
    # that are due together are applied in: "accepted" (the order Yandex took them) or
    # "newest-first" (a later update lands before an earlier one: the earlier wins).
    apply_order: str = "accepted"


CHOICES: dict[str, tuple[str, ...]] = {
    "unknown_offer": ("accept", "reject"),
    "repeat_price": ("touch", "ignore", "refuse"),
    "readback_quarantined": ("last-valid", "new"),
    "overdraft": ("refuse", "overdraft"),
    "discount_error_by": ("offerId", "index"),
    "discount_bounds": ("inclusive", "exclusive"),
    "error_status": ("ERROR", "OK"),
    "read_without_ids": ("page", "refuse"),
    "until_rounding": ("up", "down"),
    "errors_named": ("all", "first", "none"),
    "apply_order": ("accepted", "newest-first"),
}


def set_switch(switches: YmSwitches, name: str, text: str) -> None:
    """``name=text`` from the command line, typed as the field is: ValueError with one line
    naming the switch and what it takes when either is not known (as ozonsim's)."""
    known = {f.name: f for f in fields(switches)}
    if name not in known:
        raise ValueError(f"no switch {name!r} (switches: {', '.join(known)})")
    current = getattr(switches, name)
    value: Any
    if name in CHOICES:
        allowed = CHOICES[name]
    elif isinstance(current, bool):
        allowed = ("true", "false")
    else:
        allowed = ()
    if allowed and text not in allowed:
        raise ValueError(f"switch {name} is one of {', '.join(allowed)}, not {text!r}")
    try:
        if name in CHOICES:
            value = text
        elif isinstance(current, bool):
            value = text == "true"
        elif isinstance(current, int):
            value = int(text)
        elif isinstance(current, float):
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(text)
        else:  # quarantine_change
            value = None if text in ("none", "off") else Decimal(text)
            if value is not None and not value.is_finite():
                raise ValueError(text)
    except (ValueError, ArithmeticError):
        kind = {
            "int": "a whole number",
            "float": "a number",
        }.get(type(current).__name__, "a share such as 0.5, or none")
        raise ValueError(f"switch {name} is {kind}, not {text!r}") from None
    setattr(switches, name, value)


@dataclass
class YmFaults:
    in_migration: bool = False  # §3.4, §7.3: 423 "Business is in migration"
    outage: int | None = None  # §3.3: 500 or 503 for every request
    hold: float = 0.0  # real seconds each request stays in flight (to meet the parallel cap)


# -- the model -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """One offer's price as Yandex keeps it (§3.1 body, §3.4 OfferDefaultPriceDTO)."""

    value: Decimal
    discount_base: Decimal | None = None
    minimum_for_bestseller: Decimal | None = None
    currency: str = CURRENCY

    def json(self) -> JsonObject:
        out: JsonObject = {"value": self.value, "currencyId": self.currency}
        if self.discount_base is not None:
            out["discountBase"] = self.discount_base
        if self.minimum_for_bestseller is not None:
            out["minimumForBestseller"] = self.minimum_for_bestseller
        return out


@dataclass(frozen=True)
class Verdict:
    """§3.4 PriceQuarantineVerdict: its type and named parameters."""

    type: str
    params: tuple[tuple[str, Decimal], ...]

    def json(self) -> JsonObject:
        return {
            "type": self.type,
            "params": [{"name": n, "value": str(v)} for n, v in self.params],
        }


@dataclass
class Quarantined:
    current: Price
    last_valid: Price | None
    verdicts: tuple[Verdict, ...]
    since: float  # when it was withheld


@dataclass
class Offer:
    offer_id: str
    live: Price | None = None
    updated_at: float | None = None
    quarantine: Quarantined | None = None


@dataclass
class Pending:
    """An accepted price waiting to be applied (§3.4: asynchronous)."""

    due: float
    seq: int
    offer_id: str
    price: Price
    confirmed: bool = False  # a release from quarantine: no quarantine check


def trim_offer_id(raw: str) -> str:
    """§3.1 ShopSku: leading and trailing whitespace trimmed (``" SKU123 "`` ≡ ``"SKU123"``)."""
    return raw.strip()


def decimal_places(value: Decimal) -> int:
    exponent = value.normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def quarantine_verdicts(
    new: Price, last_valid: Price | None, market_min: Decimal | None, change: Decimal | None
) -> tuple[Verdict, ...]:
    """§3.4: a price "меняется слишком резко" (PRICE_CHANGE, CURRENT_PRICE and
    LAST_VALID_PRICE) or "слишком сильно отличается от рыночной" (LOW_PRICE, CURRENT_PRICE and
    MIN_PRICE). The first price an offer gets has nothing to change from."""
    verdicts: list[Verdict] = []
    if (
        change is not None
        and last_valid is not None
        and abs(new.value - last_valid.value) > change * last_valid.value
    ):
        verdicts.append(
            Verdict(
                "PRICE_CHANGE",
                (("CURRENT_PRICE", new.value), ("LAST_VALID_PRICE", last_valid.value)),
            )
        )
    if market_min is not None and new.value < market_min:
        verdicts.append(
            Verdict("LOW_PRICE", (("CURRENT_PRICE", new.value), ("MIN_PRICE", market_min)))
        )
    return tuple(verdicts)


class ApiError(Exception):
    """An answer other than 200: status, ``errors[]`` and extra headers (§3.4 ApiErrorResponse)."""

    def __init__(
        self, status: int, errors: list[tuple[str, str]], headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(errors[0][1] if errors else str(status))
        self.status, self.errors, self.headers = status, errors, headers or {}


def bad_request(message: str, code: str = "BAD_REQUEST") -> ApiError:
    return ApiError(400, [(code, message)])


@dataclass
class Checked:
    """One request's offers after validation: the valid ones (trimmed) and the errors."""

    prices: list[tuple[str, Price]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    return Decimal(value)


def check_offers(offers: list[Any], currency: str, by: str, *, exclusive: bool = False) -> Checked:
    """§3.1 and §3.4 (YM-ERR #prices): each offer's rules, the documented messages where the
    research quotes them (the rest are the simulator's words, said so in the table).
    ``exclusive``: a discount of exactly 5 % or 99 % is refused (``discount_bounds``)."""
    out = Checked()
    seen: set[str] = set()
    for index, offer in enumerate(offers):
        if not isinstance(offer, dict):
            out.errors.append(("BAD_REQUEST", f"Offer at index '{index}' is not an object"))
            continue
        raw = offer.get("offerId")
        if not isinstance(raw, str) or not trim_offer_id(raw):
            out.errors.append(("BAD_REQUEST", "Missing offerId"))
            continue
        offer_id = trim_offer_id(raw)
        if offer_id in seen:
            out.errors.append(
                ("DUPLICATE_OFFER", f"Duplicate offer in request: offerId = '{offer_id}'")
            )
            continue
        seen.add(offer_id)
        if len(offer_id) > MAX_OFFER_ID:
            out.errors.append(
                ("BAD_REQUEST", f"offerId is longer than {MAX_OFFER_ID}: offerId = '{offer_id}'")
            )
            continue
        body = offer.get("price")
        if not isinstance(body, dict) or body.get("value") is None:
            out.errors.append(("BAD_REQUEST", f"Missing price value: offerId = '{offer_id}'"))
            continue
        value = _number(body["value"])
        if value is None:  # §3.1 BasePriceDTO: a number (the message is the simulator's)
            out.errors.append(
                ("BAD_REQUEST", f"Offer at index '{index}' should have a numeric 'value'")
            )
            continue
        error = _price_error(index, offer_id, body, value, currency, by, exclusive)
        if error is not None:
            out.errors.append(("BAD_REQUEST", error))
            continue
        out.prices.append(
            (
                offer_id,
                Price(
                    value,
                    _number(body.get("discountBase")),
                    _number(body.get("minimumForBestseller")),
                    currency,
                ),
            )
        )
    return out


def _price_error(
    index: int,
    offer_id: str,
    body: JsonObject,
    value: Decimal,
    currency: str,
    by: str,
    exclusive: bool = False,
) -> str | None:
    if value <= 0:  # §3.1 BasePriceDTO: value > 0 (the message is the simulator's)
        return f"Offer at index '{index}' should have positive 'value'"
    if decimal_places(value) > MAX_DIGITS:
        return f"Offer at index '{index}' should not have 'value' with too many digits"
    given = body.get("currencyId")
    if given is None:  # §3.1: required (the message is the simulator's)
        return f"Missing currencyId: offerId = '{offer_id}'"
    if given != currency:
        return f"Offer at index '{index}' should not have 'currencyId' with '{given}' currency"
    if "discountBase" in body and body["discountBase"] is not None:
        base = _number(body["discountBase"])
        if base is None or base != base.to_integral_value():  # §3.1: an integer
            return f"discountBase should be an integer: offerId = '{offer_id}'"
        if base < value:
            return f"discountBase is less than value: offerId = '{offer_id}'"
        percent = (base - value) * 100 / base
        within = DISCOUNT_MIN < percent < DISCOUNT_MAX
        if not (within or (not exclusive and percent in (DISCOUNT_MIN, DISCOUNT_MAX))):
            who = f"Offer at index '{index}'" if by == "index" else f"Offer '{offer_id}'"
            return (
                f"{who} should have valid discount value. Discount percentage must be between "
                f"'{DISCOUNT_MIN}' and '{DISCOUNT_MAX}', actual '{percent.quantize(Decimal(1))}'"
            )
    if "minimumForBestseller" in body and body["minimumForBestseller"] is not None:
        least = _number(body["minimumForBestseller"])
        if least is None or not 0 < least <= MAX_BESTSELLER:
            return (
                f"minimumForBestseller must be greater than 0 and at most {MAX_BESTSELLER}: "
                f"offerId = '{offer_id}'"
            )
    return None


class Budget:
    """§3.3: a method's resource, ``limit`` offers a window of one simulated minute; windows are
    aligned on the epoch (a calendar minute at scale 1; the research does not say)."""

    def __init__(
        self, limit: int | None, clock: SimClock, switches: YmSwitches | None = None
    ) -> None:
        self.limit, self.clock = limit, clock
        self.switches = switches or YmSwitches()
        self._window = -1
        self._used = 0

    def _roll(self) -> tuple[float, float]:
        length = self.clock.wall(WINDOW)
        now = self.clock.wall_now()
        window = math.floor(now / length)
        if window != self._window:
            self._window, self._used = window, 0
        return now, (window + 1) * length

    def headers(self) -> dict[str, str]:
        if self.limit is None:
            return {}
        _, until = self._roll()
        return {
            "X-RateLimit-Resource-Limit": str(self.limit),
            "X-RateLimit-Resource-Remaining": str(max(0, self.limit - self._used)),
            "X-RateLimit-Resource-Until": rfc822(until, self.switches.until_rounding),
        }

    def take(self, cost: int, overdraft: bool) -> bool:
        """Charge ``cost`` offers; False (nothing charged) when the window cannot take it."""
        if self.limit is None:
            return True
        self._roll()
        left = self.limit - self._used
        if left <= 0 or (cost > left and not overdraft):
            return False
        self._used = min(self.limit, self._used + cost)
        return True


class YmSimulator(LoopbackServer):
    def __init__(
        self,
        api_key: str = "ym-test-key",
        business_id: int = 1001,
        *,
        clock: SimClock | None = None,
        oauth_token: str | None = None,
        scope: str = "pricing",
        offers_per_minute: int | None = OFFERS_PER_MINUTE,
        read_offers_per_minute: int | None = OFFERS_PER_MINUTE,
        quarantine_offers_per_minute: int | None = OFFERS_PER_MINUTE,
        confirm_offers_per_minute: int | None = OFFERS_PER_MINUTE,
        switches: YmSwitches | None = None,
    ) -> None:
        """``catalogue`` None: every offerId exists but those starting ``NOSUCH`` (as the shop
        simulators have it); a set: those offers and no others. ``read_offers_per_minute``:
        getDefaultPrices' own resource (its reference page in YM-OAS says 10 000 a minute).
        ``quarantine_offers_per_minute``, ``confirm_offers_per_minute``: the resources of
        ``price-quarantine`` and of its ``confirm`` (§3.3: a resource limit per method, a 420
        "for resource 'R'" and the headers on every answer; the research names no figure for
        them, so Yandex's reference pages' 10 000 a minute; None: not limited)."""
        super().__init__()
        self.handler = _YmHandler
        self.api_key, self.business_id = api_key, business_id
        self.oauth_token, self.scope = oauth_token, scope
        self.clock = clock or SimClock()
        self.switches = switches or YmSwitches()
        self.faults = YmFaults()
        self.currency = CURRENCY
        self.catalogue: set[str] | None = None
        self.market_min: dict[str, Decimal] = {}  # §3.4 LOW_PRICE's MIN_PRICE per offer
        self.offers: dict[str, Offer] = {}
        self.budgets = {
            UPDATE_RESOURCE: Budget(offers_per_minute, self.clock, self.switches),
            READ_RESOURCE: Budget(read_offers_per_minute, self.clock, self.switches),
            QUARANTINE_RESOURCE: Budget(quarantine_offers_per_minute, self.clock, self.switches),
            CONFIRM_RESOURCE: Budget(confirm_offers_per_minute, self.clock, self.switches),
        }
        self.requests: collections.Counter[str] = collections.Counter()
        self.accepted = 0  # offers accepted with a 200 (or beside a non-atomic 400)
        self.accepted_offers: set[str] = set()  # the offerIds of those, for tests
        self.refused_420 = 0  # 420s answered (its pace refusals), for tests
        self.in_flight = 0
        self.most_in_flight = 0
        self._pending: list[Pending] = []
        self._seq = 0
        self._history: dict[str, list[Decimal]] = collections.defaultdict(list)
        self._applied: dict[str, list[Price]] = collections.defaultdict(list)
        self._state = threading.RLock()
        # A test's hand in the cabinet at a moment it chooses (a seller's confirmation landing
        # between two of a client's requests, say): told each request's method, once the
        # request is authenticated and before it is served; an ``ApiError`` it raises is the
        # answer (an error a test arms for one request). Not a behaviour of Yandex's.
        self.on_request: Callable[[str], None] | None = None

    # -- bookkeeping for tests ------------------------------------------------------------------

    def known(self, offer_id: str) -> bool:
        if self.catalogue is None:
            return not offer_id.startswith("NOSUCH")
        return offer_id in self.catalogue

    def live(self, offer_id: str) -> Price | None:
        """The price buyers see now (after what is due has been applied)."""
        with self._state:
            self.settle()
            offer = self.offers.get(offer_id)
            return offer.live if offer else None

    def history(self, offer_id: str) -> list[Decimal]:
        """Every value the offer's live price took, in order."""
        with self._state:
            self.settle()
            return list(self._history[offer_id])

    def quarantined(self) -> dict[str, Quarantined]:
        with self._state:
            self.settle()
            return {k: o.quarantine for k, o in self.offers.items() if o.quarantine}

    def applied(self, offer_id: str) -> list[Price]:
        """Every price the offer went live with, in order (``history`` with its
        ``discountBase`` and ``minimumForBestseller``)."""
        with self._state:
            self.settle()
            return list(self._applied[offer_id])

    def lives(self) -> dict[str, Price | None]:
        """Every offer's live price at once (``live`` of each, in one look)."""
        with self._state:
            self.settle()
            return {k: o.live for k, o in self.offers.items()}

    def histories(self) -> dict[str, list[Decimal]]:
        """``history`` of every offer at once."""
        with self._state:
            self.settle()
            return {k: list(v) for k, v in self._history.items()}

    def set_live(self, offer_id: str, value: Decimal) -> None:
        """The price the offer holds before a run (set in the cabinet earlier): live, the last
        valid price a new one is judged against (§3.4), not in ``history``."""
        with self._state:
            offer = self._offer(offer_id)
            offer.live, offer.updated_at = Price(value), self.clock.wall_now()

    def price_in_cabinet(self, offer_id: str, value: Decimal) -> None:
        """The seller sets the offer's price in the cabinet: live at once, and the quarantine
        released (§3.4: "or set a correct price"), as a price that passes does."""
        with self._state:
            self.settle()
            self._go_live(self._offer(offer_id), Price(value), self.clock.wall_now())

    # -- the model ------------------------------------------------------------------------------

    def _offer(self, offer_id: str) -> Offer:
        if offer_id not in self.offers:
            self.offers[offer_id] = Offer(offer_id)
        return self.offers[offer_id]

    def _schedule(self, offer_id: str, price: Price, confirmed: bool = False) -> None:
        self._seq += 1
        due = self.clock.wall_now() + self.clock.wall(self.switches.apply_delay)
        self._pending.append(Pending(due, self._seq, offer_id, price, confirmed))

    def settle(self) -> None:
        """Apply every accepted price that is due (§3.4: applied asynchronously)."""
        with self._state:
            now = self.clock.wall_now()
            due = sorted((p for p in self._pending if p.due <= now), key=self._order)
            if not due:
                return
            self._pending = [p for p in self._pending if p.due > now]
            for pending in due:
                self._apply(pending, pending.due)

    def _order(self, pending: Pending) -> tuple[float, int]:
        """The order pending updates are applied in (§3.5: none promised; ``apply_order``)."""
        if self.switches.apply_order == "newest-first":
            return (0.0, -pending.seq)
        return (pending.due, pending.seq)

    def _apply(self, pending: Pending, at: float) -> None:
        offer = self._offer(pending.offer_id)
        if pending.confirmed:
            if offer.quarantine is None or offer.quarantine.current != pending.price:
                return  # a newer price replaced the one confirmed
            self._go_live(offer, pending.price, at)
            return
        if offer.live == pending.price and self.switches.repeat_price == "ignore":
            offer.quarantine = None
            return
        verdicts = quarantine_verdicts(
            pending.price,
            offer.live,
            self.market_min.get(offer.offer_id),
            self.switches.quarantine_change,
        )
        if verdicts:  # §3.4: accepted with 200, withheld; the last valid price stays
            offer.quarantine = Quarantined(pending.price, offer.live, verdicts, at)
            return
        self._go_live(offer, pending.price, at)

    def _go_live(self, offer: Offer, price: Price, at: float) -> None:
        offer.quarantine = None  # §3.4: a correct price (or the confirmation) releases it
        offer.live, offer.updated_at = price, at
        self._history[offer.offer_id].append(price.value)
        self._applied[offer.offer_id].append(price)

    def _current(self, offer_id: str) -> Price | None:
        """The price the offer will hold once what is pending lands (for ``repeat_price``)."""
        for pending in sorted(self._pending, key=self._order, reverse=True):
            if pending.offer_id == offer_id and not pending.confirmed:
                return pending.price
        offer = self.offers.get(offer_id)
        return offer.live if offer else None

    # -- the methods ----------------------------------------------------------------------------

    def update(self, offers: list[Any]) -> None:
        """§3.1 updateBusinessPrices after the budget: validation, then accept."""
        if not 1 <= len(offers) <= MAX_UPDATE:
            raise bad_request(
                f"offers size must be between 1 and {MAX_UPDATE}, actual {len(offers)}"
            )
        checked = check_offers(
            offers,
            self.currency,
            self.switches.discount_error_by,
            exclusive=self.switches.discount_bounds == "exclusive",
        )
        prices: list[tuple[str, Price]] = []
        for offer_id, price in checked.prices:
            if not self.known(offer_id) and self.switches.unknown_offer == "reject":
                checked.errors.append(
                    ("OFFER_NOT_FOUND", f"Offer not found: offerId = '{offer_id}'")
                )
            elif self.switches.repeat_price == "refuse" and self._current(offer_id) == price:
                checked.errors.append(
                    ("BAD_REQUEST", f"Price is already set: offerId = '{offer_id}'")
                )
            else:
                prices.append((offer_id, price))
        if not checked.errors or not self.switches.atomic_400:
            for offer_id, price in prices:
                self.accepted += 1
                self.accepted_offers.add(offer_id)
                if self.known(offer_id):  # an unknown offer is never applied (§3.4, §8)
                    self._schedule(offer_id, price)
        if checked.errors:
            named = checked.errors[:1] if self.switches.errors_named == "first" else checked.errors
            if self.switches.errors_named == "none":
                named = [("BAD_REQUEST", "Internal validation failed")]
            raise ApiError(400, named)

    def read(self, offer_ids: list[str] | None, limit: int, token: int) -> JsonObject:
        """§3.4 getDefaultPrices: the offers asked for that exist, with their price."""
        if offer_ids is None:
            names = sorted(k for k, o in self.offers.items() if o.live or o.quarantine)
        else:
            names = [i for i in offer_ids if self.known(i)]
        page = names[token : token + limit] if offer_ids is None else names
        result: list[JsonObject] = []
        for offer_id in page:
            offer = self.offers.get(offer_id)
            shown, at = (offer.live, offer.updated_at) if offer else (None, None)
            if (
                offer is not None
                and offer.quarantine is not None
                and self.switches.readback_quarantined == "new"
            ):
                shown, at = offer.quarantine.current, offer.quarantine.since
            item: JsonObject = {"offerId": offer_id}
            if shown is not None and at is not None:
                item["price"] = {**shown.json(), "updatedAt": iso(at)}
            result.append(item)
        paging: JsonObject = {}
        if offer_ids is None and token + limit < len(names):
            paging["nextPageToken"] = str(token + limit)
        return {"status": "OK", "result": {"offers": result, "paging": paging}}

    def quarantine_page(self, offer_ids: list[str] | None, limit: int, token: int) -> JsonObject:
        """§3.4 getBusinessQuarantineOffers: the withheld offers with their verdicts."""
        names = sorted(k for k, o in self.offers.items() if o.quarantine)
        if offer_ids is not None:
            names = [n for n in names if n in set(offer_ids)]
        page = names[token : token + limit]
        result = []
        for offer_id in page:
            entry = self.offers[offer_id].quarantine
            assert entry is not None
            item: JsonObject = {
                "offerId": offer_id,
                "currentPrice": {
                    "value": entry.current.value,
                    "currencyId": entry.current.currency,
                },
                "verdicts": [v.json() for v in entry.verdicts],
            }
            if entry.last_valid is not None:
                item["lastValidPrice"] = {
                    "value": entry.last_valid.value,
                    "currencyId": entry.last_valid.currency,
                }
            result.append(item)
        paging: JsonObject = {}
        if token + limit < len(names):
            paging["nextPageToken"] = str(token + limit)
        return {"status": "OK", "result": {"offers": result, "paging": paging}}

    def confirm(self, offer_ids: list[str]) -> None:
        """§3.4 confirmBusinessPrices: the quarantined price goes live (as any price does,
        after the apply delay); an offer not in quarantine is left as it is. The seller's
        confirmation in the cabinet too (a test's, between requests)."""
        with self._state:
            for offer_id in offer_ids:
                offer = self.offers.get(offer_id)
                if offer is not None and offer.quarantine is not None:
                    self._schedule(offer_id, offer.quarantine.current, confirmed=True)


# -- JSON with decimals ----------------------------------------------------------------------------


def dump(value: Any) -> str:
    """JSON text, a ``Decimal`` written as the number it is (never through a float)."""
    if isinstance(value, Decimal):
        text = format(value, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


# -- HTTP ------------------------------------------------------------------------------------------

_ROUTE = re.compile(
    r"^(?P<v2>/v2)?/businesses/(?P<business>[^/]+)/"
    r"(?P<method>offer-prices/updates|offer-prices|price-quarantine/confirm|price-quarantine)/?$"
)


class _YmHandler(Handler):
    server_version = "nginx"

    @property
    def sim(self) -> YmSimulator:
        return self.server.sim  # type: ignore[attr-defined, no-any-return]

    def reply(self, status: int, body: JsonObject, headers: dict[str, str]) -> None:
        self.answer(status, dump(body).encode(), "application/json;charset=utf-8", headers)

    def fail(self, error: ApiError, headers: dict[str, str]) -> None:
        if error.status == 420:
            with self.sim._state:
                self.sim.refused_420 += 1
        body = {
            "status": self.sim.switches.error_status,
            "errors": [{"code": c, "message": m} for c, m in error.errors],
        }
        self.reply(error.status, body, {**headers, **error.headers})

    def do_GET(self) -> None:
        self.fail(ApiError(405, [("METHOD_NOT_ALLOWED", "Method not allowed")]), {})

    def do_POST(self) -> None:
        raw = self.body()
        sim = self.sim
        parts = urlsplit(self.path)
        route = _ROUTE.match(parts.path)
        if route is None or (route["v2"] is None and not sim.switches.unversioned_paths):
            self.fail(ApiError(404, [("NOT_FOUND", "Resource not found")]), {})
            return
        method = route["method"]
        with sim.lock:
            sim.requests[method] += 1
        try:
            self._authenticate(route["business"], method)
            if sim.faults.in_migration:  # §3.4, §7.3
                raise ApiError(423, [("LOCKED", "Business is in migration")])
            if sim.faults.outage == 503:  # §3.3
                raise ApiError(
                    503,
                    [
                        (
                            "SERVICE_UNAVAILABLE",
                            "Service temporarily unavailable. Please, try again later",
                        )
                    ],
                )
            if sim.faults.outage is not None:
                raise ApiError(sim.faults.outage, [("INTERNAL_ERROR", "Internal server error")])
            if sim.on_request is not None:
                sim.on_request(method)  # a test's hand: it may answer with an error (ApiError)
        except ApiError as error:
            self.fail(error, {})
            return
        with sim._state:
            parallel = sim.switches.parallel
            if sim.in_flight >= parallel:  # §3.3 global parallelism, every method counts
                refused = True
            else:
                refused = False
                sim.in_flight += 1
                sim.most_in_flight = max(sim.most_in_flight, sim.in_flight)
        budget = sim.budgets[RESOURCES[method]]
        if refused:  # §3.3: the headers on every answer, this one's too (its method's resource)
            with sim._state:
                headers = budget.headers() if budget else {}
            self.fail(
                ApiError(
                    420,
                    [
                        (
                            "LIMIT_EXCEEDED",
                            f"Hit rate limit of '{parallel}' parallel requests for "
                            f"businessId {sim.business_id}",
                        )
                    ],
                ),
                headers,
            )
            return
        try:
            if sim.faults.hold:
                time.sleep(sim.faults.hold)
            status, body, headers = self._serve(method, raw, parts.query, budget)
        finally:
            with sim._state:
                sim.in_flight -= 1
        if isinstance(body, ApiError):
            self.fail(body, headers)
        else:
            self.reply(status, body, headers)

    def _authenticate(self, business: str, method: str) -> None:
        """§3.2: Api-Key (or the legacy OAuth ``Authorization``), scope, business."""
        sim = self.sim
        key = self.headers.get("Api-Key")
        authorization = self.headers.get("Authorization")
        if key is None and authorization and sim.oauth_token is not None:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() not in ("bearer", "oauth"):
                raise ApiError(401, [("UNAUTHORIZED", "Api-Key token is invalid")])
            token = token.strip().removeprefix("oauth_token=").strip('"')
            if not hmac.compare_digest(token.encode(), sim.oauth_token.encode()):
                raise ApiError(403, [("FORBIDDEN", "OAuth token is invalid")])
        elif key is None or not hmac.compare_digest(key.encode(), sim.api_key.encode()):
            raise ApiError(401, [("UNAUTHORIZED", "Api-Key token is invalid")])
        writes = method in ("offer-prices/updates", "price-quarantine/confirm")
        if sim.scope not in (WRITE_SCOPES if writes else READ_SCOPES):
            raise ApiError(
                403,
                [("FORBIDDEN", "Token does not have any of the scopes to access the API method")],
            )
        if business != str(sim.business_id):
            raise ApiError(403, [("FORBIDDEN", f"Access denied to businessId {business}")])
        header = self.headers.get("X-Business-Id")
        if header is not None and header != business:
            raise ApiError(400, [("BAD_REQUEST", "X-Business-Id does not match the URL")])

    def _serve(
        self, method: str, raw: bytes, query: str, budget: Budget | None
    ) -> tuple[int, JsonObject | ApiError, dict[str, str]]:
        sim = self.sim
        with sim._state:
            sim.settle()
            headers = budget.headers() if budget else {}
            if len(raw) > MAX_BODY:  # §3.1
                return 400, bad_request("The request is too big"), headers
            try:
                body = json.loads(raw or b"{}", parse_float=Decimal)
                if not isinstance(body, dict):
                    raise ValueError
            except ValueError:
                return 400, bad_request("Request body is not valid JSON"), headers
            items = body.get("offers" if method == "offer-prices/updates" else "offerIds")
            if budget is not None:
                cost = len(items) if isinstance(items, list) else 1
                if not budget.take(cost, sim.switches.overdraft == "overdraft"):
                    resource = RESOURCES[method]
                    return (
                        420,
                        ApiError(
                            420,
                            [
                                (
                                    "LIMIT_EXCEEDED",
                                    f"Hit rate limit of '{budget.limit}' requests per "
                                    f"'1 minute' for resource '{resource}' for businessId "
                                    f"{sim.business_id}",
                                )
                            ],
                        ),
                        budget.headers(),
                    )
                headers = budget.headers()  # §3.3: 4xx too are charged, from here on
            try:
                return 200, self._method(method, body, items, query), headers
            except ApiError as error:
                return error.status, error, headers

    def _method(self, method: str, body: JsonObject, items: Any, query: str) -> JsonObject:
        sim = self.sim
        args = dict(parse_qsl(query))
        limit = int(args.get("limit", "0") or 0)
        token = int(args.get("page_token", "0") or 0)
        if method == "offer-prices/updates":
            if not isinstance(items, list):
                raise bad_request("offers must be a list")
            sim.update(items)
            return {"status": "OK"}
        ids = _offer_ids(items)
        if method == "offer-prices":
            if ids is None and sim.switches.read_without_ids == "refuse":
                raise bad_request(f"offerIds size must be between 1 and {MAX_READ}")
            if ids is not None and not 1 <= len(ids) <= MAX_READ:
                raise bad_request(f"offerIds size must be between 1 and {MAX_READ}")
            return sim.read(ids, limit or MAX_READ, token)
        if method == "price-quarantine":
            return sim.quarantine_page(ids, min(limit or QUARANTINE_PAGE, QUARANTINE_PAGE), token)
        if ids is None or not 1 <= len(ids) <= MAX_CONFIRM or len(set(ids)) != len(ids):
            raise bad_request(f"offerIds must hold 1 to {MAX_CONFIRM} unique offers")
        sim.confirm(ids)
        return {"status": "OK"}


def _offer_ids(items: Any) -> list[str] | None:
    if items is None:
        return None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise bad_request("offerIds must be a list of strings")
    return [trim_offer_id(i) for i in items]


# -- in the foreground -----------------------------------------------------------------------------


def key_file(path: str | None) -> tuple[str, str]:
    """The key the simulator takes, and the file that holds it (as the channel's
    ``ym_api_key_file`` names it): the file given when it exists; a file given that does not
    exist yet is written with the demo key (as ozonsim does); none given: a fresh file with
    the demo key. ``OSError`` when the file cannot be read or written."""
    key = "ym-demo-key"
    if path:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip(), path
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(key + "\n")
        return key, path
    fd, made = tempfile.mkstemp(prefix="ymsim-key-", text=True)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    return key, made


def channel_settings(sim: YmSimulator, key_path: str) -> JsonObject:
    """A channel pointed at ``sim`` (contract 14's settings), its pace in real time: the
    simulated minute lasts 60/scale seconds, so the per-minute budget and the apply timeout
    are scaled for a client on the real clock."""
    pace = sim.clock.pace
    limit = sim.budgets[UPDATE_RESOURCE].limit
    settings: JsonObject = {
        "target": "yandex-market",
        "ym_api_url": sim.url,
        "ym_business_id": sim.business_id,
        "ym_api_key_file": key_path,
        "ym_parallel": sim.switches.parallel,
        "ym_price_types": {"retail": "value"},
        "currency": "RUB",  # Yandex's RUR is the target's to write (contract 14)
    }
    if limit is not None:
        settings["ym_offers_per_minute"] = int(limit * pace)
    if pace != 1:
        settings["ym_apply_timeout"] = round(600 / pace, 3)
    return settings


def main(argv: list[str] | None = None) -> None:
    """``python -m exchange.dev.ymsim --port N``: Yandex Market's price API in the foreground,
    for ``exchange check`` and ``exchange run`` (every offerId exists but ``NOSUCH*``)."""
    from exchange.dev.httpsim import arguments, run_in_foreground, setting_line, switches_line

    parser = arguments(
        "python -m exchange.dev.ymsim", "Serve a simulated Yandex Market price API until Ctrl-C."
    )
    parser.add_argument("--business-id", type=int, default=1001)
    parser.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="the key it takes (a file that does not exist is written with a demo key; "
        "default: a demo key in a new file)",
    )
    parser.add_argument(
        "--time-scale", type=time_scale, default=1.0, help="simulated seconds a second"
    )
    parser.add_argument("--offers-per-minute", type=int, default=OFFERS_PER_MINUTE)
    parser.add_argument(
        "--unconfirmed",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="play an unconfirmed point one way, e.g. atomic_400=false, apply_delay=5",
    )
    args = parser.parse_args(argv)
    switches = YmSwitches()
    for item in args.unconfirmed:
        name, _, text = item.partition("=")
        try:
            set_switch(switches, name.strip(), text.strip())
        except ValueError as exc:
            parser.exit(2, f"error: {exc}\n")
    try:
        key, path = key_file(args.api_key_file)
    except OSError as exc:
        parser.exit(2, f"error: the key file {args.api_key_file}: {exc.strerror or exc}\n")
    sim = YmSimulator(
        key,
        args.business_id,
        clock=SimClock(args.time_scale),
        offers_per_minute=args.offers_per_minute,
        switches=switches,
    )
    sim.host, sim.port = args.host, args.port

    def settings(s: LoopbackServer) -> list[str]:
        channels = {"yandex-market": channel_settings(sim, path)}
        return [setting_line("EXCHANGE_CHANNELS", json.dumps(channels)), switches_line(switches)]

    try:
        run_in_foreground(sim, "Yandex Market", settings)
    finally:
        if not args.api_key_file:  # the demo key's file is ours to remove
            os.unlink(path)


if __name__ == "__main__":
    main()

"""What Yandex Market's answers mean (contract 14; ``../shared/research/marketplaces.md`` §3).

Yandex answers an error as ``ApiErrorResponse``: ``{"status": "ERROR", "errors": [{"code",
"message"}]}`` (§3.4; the published examples show ``"status": "OK"`` inside 4xx bodies, so the
status word is never trusted: the HTTP status is). The readings here are the only place the
target's answers are judged; the verdicts are those of ``exchange.domain.verdicts``.

- 200: accepted (``offer-prices/updates``: not applied yet, §3.4) or the read's result; but a
  200 whose body is an ``ApiErrorResponse`` (``"status": "ERROR"``, §3.4) is Yandex's error,
  never an acceptance (``error_in_200``): temporary, sent again (charged).
- 420 (never 429, §3.3), Yandex's pace, never a failure (AWAITING when still refused after
  the target waited it out): ``Hit rate limit of 'N' parallel requests …`` lowers the parallelism;
  ``Hit rate limit of 'N' requests per '…' for resource …`` waits until
  ``X-RateLimit-Resource-Until`` (an RFC 822 date).
- 400 naming offers (by ``offerId = '…'``, ``Offer '…'`` or ``Offer at index 'N'``, §3.4
  YM-ERR #prices): those offers are terminal, the others are sent again. One refused only for
  its discount (``discountBase``, §3.1: ``rule_fields``) is a price rule: where the discount
  base was new beside the value, only it is refused (issue 32).
- 401, 403: the key is refused or may not write: delivery pauses, the cause in words.
- 423 ``Business is in migration`` (§3.4): the cabinet's, temporary, not the offers' fault.
- 404: not the Partner API at ``ym_api_url`` (no price method answers 404 for an offer): pause.
- 5xx, 499: temporary.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

import httpx

from exchange.domain.pause import MARKETPLACE_KEY_REFUSED
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.marketplace.behind import BEHIND
from exchange.targets.marketplace.items import seconds_said
from exchange.targets.wire import STATUSES

BODY_CAP = 4 * 1024 * 1024
# A refused key or one without the right to change prices: the marketplace's key (the pause
# says so in Yandex Market's and the channel's words, never "the site refused the token").
KEY_REFUSED = NO_WRITE_RIGHTS = MARKETPLACE_KEY_REFUSED
RATE_LIMITED = "RateLimited"
MIGRATING = "BusinessMigrating"
NOT_THE_API = "NotTheApi"
PRICE_RULE = "YandexPriceRule"  # a 400 refused an offer by its discount (§3.1)

_BY_ID = (re.compile(r"offerId = '([^']*)'"), re.compile(r"^Offer '([^']*)'"))
_BY_INDEX = re.compile(r"[Oo]ffer at index '(\d+)'")
# The dependent price a 400's words for an offer concern (issue 32: only it is refused where it
# was new beside the value): Yandex's discount errors (§3.1, §3.4 YM-ERR #prices:
# "discountBase is less than value: offerId = …", "… should have valid discount value.
# Discount percentage must be between 'min' and 'max', actual 'val'"; a field named
# 'discountBase' in "should not have 'fieldName' with too many digits"). Any other words
# concern the offer's value itself.
_RULE_FIELDS = ((re.compile(r"discountBase|discount value|Discount percentage"), "discountBase"),)


# Yandex's words for an offer that concern the offer as sent, whatever Yandex held before
# (§3.4 YM-ERR #prices: the discount, a duplicate, a missing offerId or value, the currency,
# too many digits, VAT; a field or value said to be invalid; §3.1's bounds of
# minimumForBestseller and offerId): the same offer in an earlier request was refused by the
# same words, so an earlier 400 that took the rest of its request (§8) did not take it.
_OF_THE_OFFER = re.compile(
    r"discountBase|discount value|Discount percentage|Duplicate offer|Missing offerId|"
    r"Missing price value|currency|too many digits|\bvat\b|OFFER_NOT_FOUND|\bvalue\b|"
    r"minimumForBestseller|offerId is longer|\binvalid\b",
    re.IGNORECASE,
)
# Words that say the price is Yandex's already (a repeat refused: §3.5 leaves open whether a
# price sent twice is answered 200; WB answers such a repeat "already set", §2.4).
_ALREADY = re.compile(r"already", re.IGNORECASE)
# The code a refusal of an offer Yandex does not know carries (§3.4 ApiErrorCodeType; §8:
# whether Yandex refuses an unknown offerId at all is open).
NOT_FOUND = "OFFER_NOT_FOUND"


def not_found(said: str) -> bool:
    """Whether Yandex's words for an offer (``CODE message``) refuse it as not in the
    catalogue (contract 14: ``unknown-sku``)."""
    return said.startswith(NOT_FOUND)


def already_set(said: str) -> bool:
    """Whether Yandex's words for an offer say its price is set already (a repeat refused)."""
    return _ALREADY.search(said) is not None


def maybe_taken(said: str, *, refused_before: bool) -> bool:
    """Whether an offer a 400 refused with ``said`` (``CODE message``) may be Yandex's all
    the same: its words say the price is already set, or the offer was in an earlier 400
    that did not name it (``refused_before``: Yandex may have taken the rest of that
    request, §8) and the words are not about the offer as sent (a repeat of a price taken
    then may be refused in any words, "Internal validation failed" among them). Such an
    offer is read back, never ended at once."""
    if already_set(said):
        return True
    return refused_before and not _OF_THE_OFFER.search(said)


class Throttle(StrEnum):
    """Which of Yandex's two limits a 420 names (§3.3)."""

    PARALLEL = "parallel"
    BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class ApiError:
    code: str
    message: str


def uncleared_words(offer: str, replaced: str, refusal: str) -> str:
    """Said after the read-back of an accepted update whose send once more without the
    dependent price 1C replaced (``replaced``: ``discountBase 1400``) a 400 refused in
    ``refusal`` (``YandexMarketTarget._clearing_refused``): Yandex still shows that price,
    a discount 1C no longer gives, until 1C's next price of the SKU goes without it."""
    return (
        f"; Yandex Market refused the update of offer {offer!r} without {replaced}, the "
        f"strikethrough price 1C replaced ({refusal}): buyers see it until 1C's next price of "
        "this SKU goes without it"
    )


def behind_words(offer: str, value: str, held: str, *, shown: str | None = None) -> str:
    """The wait of ``value``, which Yandex shows for ``offer`` already (a repeat refused "already
    set"), behind ``held`` (``_Listed.said``: the price and its verdicts), the price Yandex's
    quarantine still lists for the offer (review ym34): confirmed in the cabinet, the held price
    would go live over this one (§3.4); a correct price set there releases the quarantine. Said
    of the look that wrote them: a confirmation in the cabinet since may have put the held price
    live (review rev35ym, WORDS 3: ``find`` said 1000 was live while Yandex showed 300). «When
    looked up», never «at the last look»: the same wait looked at again writes no new history
    row (``queue.record._same_wait``), so the row kept is its first look's, and later looks
    happened (words38 item 2).

    ``shown``: the value the read-back showed where it is not ``value`` (the list naming
    ``value`` as the last valid price; the simulator's ``readback_quarantined=new``, or a
    confirmation landing between the list and the read-back): the words say what the
    read-back showed and that buyers see ``value``, the last valid price, until the held one
    is confirmed, never that Yandex held ``value`` already (the held price is the
    quarantined one)."""
    if shown is not None:
        return (
            f"When looked up, Yandex Market's read-back showed value={shown} for offer "
            f"{offer!r}, {BEHIND} {held} for it and names value={value}, this price, as the "
            f"last valid one: buyers see {value} until the held price is confirmed in the "
            f"cabinet, which would put it live in place of {value}. The seller should not "
            f"confirm it but leave it, or set {value} in the cabinet (a correct price releases "
            "the quarantine); this price waits, "
            "uncharged, until the quarantine no longer lists the offer, and is sent again over "
            "the held one should that be confirmed"
        )
    return (
        f"When looked up, Yandex Market held value={value} for offer {offer!r} already, "
        f"{BEHIND} {held} for "
        f"it: confirmed in the cabinet, it would replace {value}. The seller should not confirm "
        f"it but leave it, or set {value} in the cabinet (a correct price releases the "
        "quarantine); this price waits, uncharged, until the quarantine no longer lists the "
        "offer, and is sent again over the held one should that be confirmed"
    )


def body(response: httpx.Response) -> Any:
    """The answer's JSON with numbers as ``Decimal``; None when it is not JSON."""
    try:
        return json.loads(response.content[:BODY_CAP], parse_float=Decimal)
    except ValueError:
        return None


def errors(response: httpx.Response) -> list[ApiError]:
    """The ``errors[]`` of an ``ApiErrorResponse`` (§3.4), whatever its ``status`` says."""
    parsed = body(response)
    listed = parsed.get("errors") if isinstance(parsed, dict) else None
    if not isinstance(listed, list):
        return []
    return [
        ApiError(str(e.get("code", ""))[:100], str(e.get("message", ""))[:500])
        for e in listed
        if isinstance(e, dict)
    ]


def words(response: httpx.Response) -> str:
    """Yandex's own words for an answer, short: ``CODE message; …``."""
    said = "; ".join(f"{e.code} {e.message}".strip() for e in errors(response)[:5])
    return f"HTTP {response.status_code}: {said or response.reason_phrase or 'no words'}"


def throttle(response: httpx.Response) -> Throttle:
    """A 420's limit: the parallel cap when its message says so, else the per-minute budget."""
    text = " ".join(e.message for e in errors(response)).lower()
    return Throttle.PARALLEL if "parallel" in text else Throttle.BUDGET


def until(response: httpx.Response) -> datetime | None:
    """``X-RateLimit-Resource-Until`` (§3.3: an RFC 822 date after which the resource is
    usable again), or None when absent or not a date."""
    text = response.headers.get("X-RateLimit-Resource-Until")
    if not text:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return moment if moment.tzinfo is not None else None


def resource_limit(response: httpx.Response) -> int | None:
    """``X-RateLimit-Resource-Limit`` (§3.3: on every answer, the resource's limit: offers a
    minute for the price methods), or None when absent or not a positive whole number."""
    text = (response.headers.get("X-RateLimit-Resource-Limit") or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def remaining(response: httpx.Response) -> int | None:
    """``X-RateLimit-Resource-Remaining`` (§3.3: on every answer, what is left of the resource
    until ``-Until``), or None when absent or not a whole number."""
    text = (response.headers.get("X-RateLimit-Resource-Remaining") or "").strip()
    return int(text) if text.isdigit() else None


def named_offers(response: httpx.Response, sent: list[str]) -> dict[str, str]:
    """The offers a 400 names, each with its words: by ``offerId`` (as Yandex trims it, so as
    sent) or by its index in the request's ``offers``. Offers not in ``sent`` are left out."""
    named: dict[str, str] = {}
    for found, error in _named(response, sent):
        named.setdefault(found, f"{error.code} {error.message}".strip())
    return named


def rule_fields(response: httpx.Response, sent: list[str]) -> dict[str, frozenset[str]]:
    """The offers a 400 refused by a rule of a dependent price only (``discountBase``: its
    discount, §3.1), with the fields it concerns; an offer named by any other error is left
    out (the refusal concerns its value itself)."""
    about: dict[str, set[str]] = {}
    other: set[str] = set()
    for found, error in _named(response, sent):
        fields = {f for pattern, f in _RULE_FIELDS if pattern.search(error.message)}
        if fields:
            about.setdefault(found, set()).update(fields)
        else:
            other.add(found)
    return {offer: frozenset(f) for offer, f in about.items() if offer not in other}


def refused_by_rule(offer: str, said: str) -> Classification:
    """An offer a 400 refused by its discount (``rule_fields``): a price rule of Yandex's,
    terminal, ``channel-rule``, with Yandex's words (contract 14)."""
    return Classification(
        Verdict.TERMINAL,
        f"HTTP 400: Yandex Market refused offer {offer!r}: {said}",
        http_status=400,
        error_class=PRICE_RULE,
        reason=Reason.CHANNEL_RULE,
    )


def _named(response: httpx.Response, sent: list[str]) -> list[tuple[str, ApiError]]:
    """Each error of a 400 that names an offer of ``sent``, with that offer."""
    known = set(sent)
    named: list[tuple[str, ApiError]] = []
    for error in errors(response):
        found: str | None = None
        for pattern in _BY_ID:
            match = pattern.search(error.message)
            if match and match.group(1).strip() in known:
                found = match.group(1).strip()
                break
        if found is None:
            match = _BY_INDEX.search(error.message)
            if match and int(match.group(1)) < len(sent):
                found = sent[int(match.group(1))]
        if found is not None:
            named.append((found, error))
    return named


def error_in_200(response: httpx.Response) -> Classification | None:
    """A 200 whose body says ``"status": "ERROR"`` (§3.4: ``ApiErrorResponse``; Yandex's
    acceptance is ``{"status": "OK"}``): an error that names no HTTP class, so temporary, with
    Yandex's words; None for any other 200. Only an explicit ERROR counts: a 200 without a
    status word is judged by what it carries."""
    parsed = body(response)
    if not isinstance(parsed, dict) or parsed.get("status") != "ERROR":
        return None
    return Classification(
        Verdict.TEMPORARY,
        f"{words(response)}: Yandex Market answered 200 with status ERROR (an error, not an "
        "acceptance): sent again",
        http_status=200,
        error_class="ErrorIn200",
    )


def whole(response: httpx.Response) -> Classification:
    """An answer that is not a 200 and decides every offer of its request."""
    status = response.status_code
    said = words(response)
    if status == 401:
        return Classification(
            Verdict.PAUSE,
            f"{said}: Yandex Market refused the Api-Key (ym_api_key_file): make an Api-Key "
            "token in the cabinet with the «Pricing» (pricing) or «All methods» access (Yandex's "
            "guide: yandex.ru/dev/market/partner-api/doc/ru/concepts/api-key)",
            http_status=401,
            error_class=KEY_REFUSED,
        )
    if status == 403:
        scope = "scope" in said.lower()
        return Classification(
            Verdict.PAUSE,
            f"{said}: "
            + (
                # The advice is the pause's words (ops/attention.py), in the reader's
                # language: this detail is said inside them.
                "the Api-Key's access is read-only"
                if scope
                else "Yandex Market refuses this key for this business (ym_business_id): check "
                "the cabinet's id and that its API is enabled"
            ),
            http_status=403,
            error_class=MARKETPLACE_KEY_REFUSED,
        )
    if status in (404, 405):
        # No price method answers 404 for an offer (§3.4 names offers inside a 400): the
        # address is not the Partner API's (ym_api_url, the /v2 path), about the channel.
        return Classification(
            Verdict.PAUSE,
            f"{said}: the Partner API's price methods are not at this address: check "
            "ym_api_url (https://api.partner.market.yandex.ru)",
            http_status=status,
            error_class=NOT_THE_API,
        )
    if status == 420:
        return paced(response, 60.0)
    if status == 423:
        return Classification(
            Verdict.TEMPORARY,
            f"{said}: the cabinet is locked by Yandex Market (a business in migration)",
            http_status=423,
            error_class=MIGRATING,
            site_wide=True,
        )
    if status == 499:
        return Classification(Verdict.TEMPORARY, said, http_status=499)
    verdict = STATUSES.verdict(status)
    return Classification(verdict, said, http_status=status)


def paced(response: httpx.Response, wait: float) -> Classification:
    """A 420 still refused after the target waited it out: Yandex Market's pace, never a
    failure (contract 14): ``AWAITING``, not charged and not counted by the circuit breaker,
    due again after ``wait`` seconds (until ``X-RateLimit-Resource-Until``). No HTTP status:
    a limit reached proves nothing about the key (a pause on write trial goes on)."""
    return Classification(
        Verdict.AWAITING,
        f"{words(response)}: Yandex Market's limit, waited for and still reached; sent again "
        f"in {seconds_said(wait)} s",
        error_class=RATE_LIMITED,
        again_in=wait,
    )


def budget_held(wait: float, per_minute: int, account: int | None = None) -> Classification:
    """The target's budget (pace.py) would hold a request longer than a send waits
    (``LONGEST_WAIT``): not sent now, ``AWAITING``, not charged and not counted by the circuit
    breaker, due again in whole seconds (at least one) when the budget has room.
    ``per_minute``: this worker's share of the business's ``account`` (the channel's live
    workers divide it): said as a share, never as Yandex's budget."""
    seconds = max(1, math.ceil(wait))
    whose = (
        f"this worker's share ({per_minute}) of Yandex Market's budget of {account}"
        if account is not None and per_minute < account
        else f"Yandex Market's budget of {per_minute}"
    )
    return Classification(
        Verdict.AWAITING,
        f"held: {whose} offers a minute is spent; sent in {seconds} s, not charged",
        error_class=RATE_LIMITED,
        again_in=float(seconds),
    )


def unreadable(response: httpx.Response, why: str) -> Classification:
    return Classification(
        Verdict.UNKNOWN, f"HTTP {response.status_code}: {why}", http_status=response.status_code
    )

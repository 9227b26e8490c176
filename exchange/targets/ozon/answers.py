"""What Ozon's answers to ``POST /v1/product/import/prices`` mean (contract 14), from the research
(../shared/research/marketplaces.md §1.2-§1.4: the official error table OZ-ERR, the observed
bodies of integrators): the one place that reads them.

    200, an item ``updated: true``            DELIVERED
    200, an item ``NOT_FOUND_ERROR``          TERMINAL unknown-sku
    200, an item refused by a price rule      TERMINAL channel-rule, Ozon's code and meaning
    200, an item over the 10 updates an hour  AWAITING (tried again an hour later, not charged)
    200, an item error of another code        UNKNOWN (never guessed)
    200 without a result for an item          UNKNOWN for that item alone; the others by theirs
    429 (code 8)                              TEMPORARY, the pace (a 429)
    "Circle is open", whatever its status     AWAITING a few minutes (the target holds the
                                              method meanwhile), not charged
    404 code 5, "missing a required role"     PAUSE: the key, in words
    400/401/403 with Ozon's words of the key  PAUSE: the key, in words
    400-404 with Ozon's words of the Client-Id PAUSE: ozon_client_id, in words (§1.2: a 400
                                              code 3 "Client-Id header value should be
                                              positive integer"), never split
    any other 404                             UNKNOWN (a wrong path is not a bad key)
    400                                       TERMINAL http-400 (the request's items split,
                                              within a bound: target.py, SPLITS)
    other statuses                            the table every target shares (targets/wire.py)
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from exchange.domain.pause import (
    MARKETPLACE_KEY_REFUSED,
    OZON_CLIENT_ID_REFUSED,
    OZON_KEY_IP_RESTRICTED,
    OZON_OFFER_NOT_SIGNED,
)
from exchange.domain.prices import OZON_HOUR
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.wire import STATUSES

# §1.4 and §1.1: the per-item codes of the method, each with the meaning of the official table
# (in Russian, as OZ-ERR gives it): what a person reads beside the quarantined price.
RULES: dict[str, str] = {
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
    "price_out_of_range": "Цена ниже или выше порога категории.",
}
# The dependent price each rule of two price types concerns (issue 32: only it is refused
# where it was new beside the price); a code not here concerns the price itself.
RULE_FIELDS: dict[str, str] = {
    "discount_for_low_price_is_too_small": "old_price",
    "discount_for_average_price_is_too_small": "old_price",
    "discount_for_top_price_is_too_small": "old_price",
    "discount_too_big": "old_price",
    "old_price_less_than_price": "old_price",
    "min_auto_price_too_small": "min_price",
    "min_auto_price_too_big": "min_price",
    "price_less_than_min_auto_price": "min_price",
}
NOT_FOUND = "NOT_FOUND_ERROR"
# §1.3/§1.4: the per-item limit, in the table's words and as integrators saw it live (wrapped
# in "price-batch-set for seller api: rpc error: code = ResourceExhausted desc = …").
ITEM_LIMIT = "acquire limit per item"
# §1.2/§1.3: Ozon's texts for the whole request.
RATE_LIMITED = "request rate limit"
CIRCLE_OPEN = "circle is open"
MISSING_ROLE = "missing a required role"
KEY_WORDS = ("api-key", "api key", "offer not signed")
# §1.2: two refusals of the key's words that no new key mends: the seller's offer (оферта) not
# accepted, and a key bound to other IP addresses. Each pauses with its own advice.
OFFER_NOT_SIGNED = "offer not signed"
IP_RESTRICTED = "restricted to specific ip"
KEY_PAUSES = (
    MARKETPLACE_KEY_REFUSED,
    OZON_CLIENT_ID_REFUSED,
    OZON_OFFER_NOT_SIGNED,
    OZON_KEY_IP_RESTRICTED,
)
CLIENT_ID_WORDS = ("client-id", "client id")  # §1.2: "Client-Id header value should be …"
# "Circle is open": Ozon blocks the method and it "starts working as usual in a few minutes"
# (§1.3, §7.3): the refused items, and every item after them, wait three minutes before one
# request tries the method again (OzonTarget holds it), not charged. Its HTTP status is
# UNCONFIRMED (§8): the words decide, whatever the status.
CIRCLE_SECONDS = 180.0
CIRCLE = "OzonCircleOpen"

KEY_SETTINGS = "ozon_client_id and ozon_api_key_file"


class HasOffer(Protocol):
    @property
    def offer_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ItemAnswer:
    """One item's result: its verdict, and whether it was the per-product limit."""

    verdict: Classification
    limited: bool = False
    updated: bool = False
    # A price rule's refusal: the dependent fields its codes concern (``RULE_FIELDS``); empty
    # when any code concerns the price itself.
    rule_fields: frozenset[str] = frozenset()


def item_answer(result: Any) -> ItemAnswer:
    """One element of ``result`` in a 200 (§1.4)."""
    if not isinstance(result, dict):
        return ItemAnswer(Classification(Verdict.UNKNOWN, "an item's result is not an object"))
    if result.get("updated") is True:
        receipt = json.dumps({"product_id": result.get("product_id")}, separators=(",", ":"))
        return ItemAnswer(
            Classification(Verdict.DELIVERED, "updated", http_status=200, receipt=receipt),
            updated=True,
        )
    given = result.get("errors")
    errors: list[Any] = given if isinstance(given, list) else []
    codes = [
        (str(e.get("code") or ""), str(e.get("message") or ""))
        for e in errors
        if isinstance(e, dict)
    ]
    if any(ITEM_LIMIT in f"{code} {message}" for code, message in codes):
        return ItemAnswer(
            Classification(
                Verdict.AWAITING,
                # Ozon's hourly limit as Ozon names it, never a number it did not say
                # (review ozon 34b: its limit may be another than 10)
                "Ozon: over Ozon's hourly limit of price updates of this product "
                "(error limiting: acquire limit per item)",
                http_status=200,
                error_class=OZON_HOUR,
            ),
            limited=True,
        )
    if any(code == NOT_FOUND for code, _ in codes):
        return ItemAnswer(
            Classification(
                Verdict.TERMINAL,
                f"Ozon: {NOT_FOUND}: no product with this offer_id in the seller's account",
                http_status=200,
                error_class="OzonNotFound",
                reason=Reason.UNKNOWN_SKU,
            )
        )
    known = [(code, RULES[code]) for code, _ in codes if code in RULES]
    if known:
        said = "; ".join(f"{code}: {meaning}" for code, meaning in known)
        return ItemAnswer(
            Classification(
                Verdict.TERMINAL,
                f"Ozon: {said}",
                http_status=200,
                error_class="OzonPriceRule",
                reason=Reason.CHANNEL_RULE,
            ),
            rule_fields=frozenset(
                RULE_FIELDS[code] for code, _ in known if all(c in RULE_FIELDS for c, _ in known)
            ),
        )
    said = "; ".join(f"{code}: {message}"[:200] for code, message in codes) or "no error given"
    return ItemAnswer(
        Classification(Verdict.UNKNOWN, f"Ozon: not updated: {said}", http_status=200)
    )


def matched(items: Sequence[HasOffer], results: list[Any]) -> list[Any | None]:
    """Each item's element of ``result`` (§1.4: one per item, in order), None where Ozon gave
    none. A result naming an item's ``offer_id`` is that item's; a result without one (an
    ``offer_id`` left empty) is the item its place says only where that is sure: between two
    named results (in order), as many unnamed results as unanswered items. So a result left
    out (or one more) never moves another item's answer onto its neighbour."""
    found: list[Any | None] = [None] * len(items)
    free: dict[str, list[int]] = {}
    for n, item in enumerate(items):
        free.setdefault(item.offer_id, []).append(n)
    places: list[int | None] = []  # each result's item; None: unnamed; -1: no item of ours
    for result in results:
        offer = result.get("offer_id") if isinstance(result, dict) else None
        if not isinstance(offer, str) or not offer:
            places.append(None)
            continue
        left = free.get(offer)
        place = left.pop(0) if left else -1
        if place >= 0:
            found[place] = result
        places.append(place)
    named = [p for p in places if p is not None and p >= 0]
    if named != sorted(named):
        return found  # not in order: an unnamed result's place says nothing
    gap: list[Any] = []
    start = 0
    for result, at in [*zip(results, places, strict=True), (None, len(items))]:
        if at is None:
            gap.append(result)
            continue
        if at < 0:
            continue
        unanswered = [n for n in range(start, at) if found[n] is None]
        if len(unanswered) == len(gap):
            for n, unnamed in zip(unanswered, gap, strict=True):
                found[n] = unnamed
        gap, start = [], at + 1
    return found


def circle_in(body: Any) -> bool:
    """The whole answer (its parsed JSON) is Ozon's rpcStatus saying "Circle is open" (§1.2,
    §1.3), not a ``result``: whatever the status it came with (UNCONFIRMED, §8), a 200 too."""
    if not isinstance(body, dict) or "result" in body:
        return False
    message = body.get("message")
    return isinstance(message, str) and CIRCLE_OPEN in message.casefold()


def refusal(status: int, body: bytes, retry_after: str | None) -> Classification:
    """A whole request's answer other than 200 (§1.2, §1.3)."""
    code, message = _rpc_status(body)
    words = message.casefold()
    shown = f"HTTP {status}" + (f" code {code}" if code is not None else "")
    said = f"{shown}: {message[:200]}" if message else shown
    if CIRCLE_OPEN in words:
        # Ozon blocks the method for a few minutes (§1.3): a wait, not a failure, nor a "too
        # many per second" for the pace. Its status is said as Ozon gave it, in the words: an
        # AWAITING's ``http_status`` would say the channel took the write (the worker ends a
        # read-only pause on it), and this one took nothing.
        return circle_held(f"Ozon: {said}: the method is blocked for a few minutes", CIRCLE_SECONDS)
    if status == 429 or code == 8 or RATE_LIMITED in words:
        return Classification(
            Verdict.TEMPORARY,
            f"Ozon: {said}",
            http_status=429,
            retry_after=retry_after or "1",
            error_class="OzonRateLimited",
        )
    if status in (400, 401, 403, 404) and OFFER_NOT_SIGNED in words:
        return Classification(
            Verdict.PAUSE,
            f"Ozon: {said}: the seller has not accepted Ozon's current offer",
            http_status=status,
            error_class=OZON_OFFER_NOT_SIGNED,
        )
    if status in (400, 401, 403, 404) and IP_RESTRICTED in words:
        return Classification(
            Verdict.PAUSE,
            f"Ozon: {said}: the API key is bound to other IP addresses than this server's",
            http_status=status,
            error_class=OZON_KEY_IP_RESTRICTED,
        )
    if MISSING_ROLE in words:
        return Classification(
            Verdict.PAUSE,
            # Ozon's words, then what they mean; where the key gets its role is the pause's
            # words (ops/attention.py), said once (review 32b finding 5)
            f"Ozon: {said}: the API key has no role that may set prices",
            http_status=status,
            error_class=MARKETPLACE_KEY_REFUSED,
        )
    if status in (400, 401, 403, 404) and any(w in words for w in CLIENT_ID_WORDS):
        # §1.2: Ozon cannot read the seller's Client-Id; every request gets the same answer
        # (§1.3: erroneous requests may get the account restricted): a pause, never a split.
        return Classification(
            Verdict.PAUSE,
            f"Ozon refused the Client-Id ({said}); check ozon_client_id",
            http_status=status,
            error_class=OZON_CLIENT_ID_REFUSED,
        )
    if (status == 404 and code == 5) or (
        status in (400, 401, 403) and any(w in words for w in KEY_WORDS)
    ):
        return Classification(
            Verdict.PAUSE,
            f"Ozon refused the Client-Id or the API key ({said}); check {KEY_SETTINGS}",
            http_status=status,
            error_class=MARKETPLACE_KEY_REFUSED,
        )
    if status == 404:
        return Classification(
            Verdict.UNKNOWN,
            f"Ozon: {said}: not an answer of the prices method (check ozon_api_url)",
            http_status=status,
        )
    verdict = STATUSES.verdict(status)
    return Classification(
        verdict,
        f"Ozon: {said}",
        http_status=status,
        retry_after=retry_after if verdict is Verdict.TEMPORARY else None,
    )


def circle_held(said: str, seconds: float) -> Classification:
    """An item waiting out "Circle is open" (§1.3): due again in ``seconds``, not charged."""
    wait = max(1, math.ceil(seconds))
    return Classification(
        Verdict.AWAITING,
        f"{said}; tried again in {wait} s, not charged",
        again_in=float(wait),
        error_class=CIRCLE,
    )


def _rpc_status(body: bytes) -> tuple[int | None, str]:
    """Ozon's error body (rpcStatus ``{code, message, details}``, §1.2); (None, "") otherwise."""
    try:
        parsed = json.loads(body[:65536])
    except ValueError:
        return None, ""
    if not isinstance(parsed, dict):
        return None, ""
    code = parsed.get("code")
    message = parsed.get("message")
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        message if isinstance(message, str) else "",
    )

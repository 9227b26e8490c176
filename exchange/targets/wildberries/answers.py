"""What Wildberries' answers mean (research §2.1-2.4): the whole answer of a request, and each
good's line in a processed task. The one place the target reads WB's words."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from exchange.domain.pause import SETTING_MISSING, WB_READ_ONLY_TOKEN, WB_TOKEN_REFUSED
from exchange.domain.reasons import Reason
from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.wildberries.behind import BEHIND as BEHIND
from exchange.targets.wildberries.behind import behind_words as behind_words
from exchange.targets.wildberries.behind import waits_behind as waits_behind
from exchange.targets.wire import STATUSES

BODY_CAP = 4 * 1024 * 1024

# research §2.1: the whole-request 400s that say nothing is wrong with the price itself.
ALREADY_SET = "already set"  # "The specified prices and discounts are already set"
ALL_WRONG = "specified incorrectly"  # "All item Nos. are specified incorrectly, or …"
# research §2.4: a good's errorText in a processed task.
QUARANTINE = "price quarantine"  # "… Item has been moved to Price Quarantine"
SALE_LOCK = "added to the sale"  # "You can't change the item price. Item was added to the Sale…"
INVALID_NM = "invalid item no"  # "Invalid item No."
READ_ONLY = "read-only"  # research §2.2: "read-only token scope not allowed for this route"
RATE_LIMITED = "RateLimited"  # error_class of prices the budget holds (``budget_held``)

# A sale for high inventory lasts hours or days (research §2.4, §2.6 item 7): each try waits
# the longest the worker allows (its Retry-After cap, retry_max_delay), never the backoff's
# first fractions of a second, so that the attempts span as long as the settings let them.
SALE_LOCK_WAIT = "86400"

# error_class of a PAUSE for the token: the pause's cause (domain/pause.py) says, in both
# languages, where the seller makes a token with the Prices category and write access; the
# details say only what WB answered.
TOKEN_REFUSED = WB_TOKEN_REFUSED
READ_ONLY_TOKEN = WB_READ_ONLY_TOKEN
WHERE_TO_RELEASE = (
    "Wildberries sells at the old price until the seller confirms the new one in the seller's "
    "cabinet (Цены и скидки → Карантин цен) or a newer price is sent"
)


# What a sale lock means and what the seller can do (research §2.4's errorText, §2.6 item 7),
# after WB's own words, as ``WHERE_TO_RELEASE`` follows the quarantine's (review wbcat 3: a
# Russian page showed WB's English alone).
WHILE_ON_SALE = (
    "Wildberries does not change the price of a good while it is in a sale for its high "
    "inventory (often hours or days): the price is tried again, each try retry_max_delay "
    "after the last, and if the sale outlasts the tries it is quarantined (retry-limit); the "
    "seller can see the sale in Wildberries' seller cabinet and take the good out of it there "
    "where Wildberries allows it"
)


def body(response: httpx.Response) -> Any:
    try:
        return json.loads(response.content[:BODY_CAP])
    except ValueError:
        return None


def error_text(response: httpx.Response) -> str:
    """WB's own words: ``errorText`` of the envelope, or ``detail`` of the problem body."""
    found = body(response)
    if isinstance(found, dict):
        for key in ("errorText", "detail", "title", "message"):
            value = found.get(key)
            if isinstance(value, str) and value:
                return value[:300]
    return "(no text)"


def retry_in(response: httpx.Response) -> str | None:
    """research §2.3: a 429 says when to come back in ``X-Ratelimit-Retry`` (seconds); no
    ``Retry-After`` is documented (taken when present all the same)."""
    found: str | None = response.headers.get("X-Ratelimit-Retry") or response.headers.get(
        "Retry-After"
    )
    return found


def budget_held(wait: float) -> Classification:
    """The account's budget (budget.py: a 429's ``X-Ratelimit-Retry`` bars every request)
    would hold a request longer than a send waits (``LONGEST_WAIT``): not sent now,
    ``AWAITING``, not charged, due again in whole seconds (at least one) when it may go."""
    seconds = max(1, math.ceil(wait))
    return Classification(
        Verdict.AWAITING,
        f"held: Wildberries' limit for the Prices category bars requests for {seconds} s "
        "(X-Ratelimit-Retry); sent then, not charged",
        error_class=RATE_LIMITED,
        again_in=float(seconds),
    )


def token_missing() -> Classification:
    return Classification(
        Verdict.PAUSE,
        "wb_token_file is not set or empty: Wildberries needs the seller's API token",
        error_class=SETTING_MISSING,
    )


def whole(response: httpx.Response, what: str) -> Classification:
    """A request's answer that is not its success, for every good it carried."""
    status, words = response.status_code, error_text(response)
    if status == 401:
        if READ_ONLY in words.lower():
            return Classification(
                Verdict.PAUSE,
                f"HTTP 401 {words}: the Wildberries token is read-only",
                http_status=401,
                error_class=READ_ONLY_TOKEN,
            )
        return Classification(
            Verdict.PAUSE,
            f"HTTP 401 {words}: Wildberries refused the token",
            http_status=401,
            error_class=TOKEN_REFUSED,
        )
    if status == 403:
        return Classification(
            Verdict.PAUSE,
            f"HTTP 403 {words}: Wildberries denies the account's access (the token's user was "
            "deleted, or the method is blocked for the seller)",
            http_status=403,
            error_class=TOKEN_REFUSED,
        )
    if status == 429:
        return Classification(
            Verdict.TEMPORARY,
            f"HTTP 429 {words}: Wildberries' limit for the Prices category ({what})",
            http_status=429,
            retry_after=retry_in(response),
        )
    if status in (409, 422):
        # research §2.1: 409 while the account switches currency; 422 "Unexpected result",
        # which WB asks to take to its support: tried again within max_attempts, then the
        # delivery ends retry-limit with WB's words.
        return Classification(
            Verdict.TEMPORARY, f"HTTP {status} {words} ({what})", http_status=status
        )
    if status == 400:
        return Classification(
            Verdict.TERMINAL,
            f"HTTP 400 {words} ({what})",
            http_status=400,
            reason=Reason.CHANNEL_RULE,
        )
    verdict = STATUSES.verdict(status)
    if verdict is Verdict.DELIVERED:  # a 2xx this target does not expect
        verdict = Verdict.UNKNOWN
    return Classification(verdict, f"HTTP {status} {words} ({what})", http_status=status)


def item_words(row: dict[str, Any]) -> str:
    text = row.get("errorText")
    return str(text)[:300] if text else "(no error text)"


def item_error(row: dict[str, Any], upload_id: int) -> tuple[str, Classification]:
    """A good WB did not update (item status 3): what it means (``already-set``,
    ``refused-nm``, or a verdict for the delivery)."""
    words = item_words(row)
    low = words.lower()
    receipt = f"wb-task:{upload_id}"
    if ALREADY_SET in low:
        return "already-set", Classification(
            Verdict.DELIVERED,
            f"Wildberries: {words} (task {upload_id})",
            http_status=200,
            receipt=receipt,
        )
    if INVALID_NM in low:
        return "refused-nm", Classification(
            Verdict.TERMINAL,
            f"Wildberries refused the nmID: {words} (task {upload_id})",
            http_status=200,
            reason=Reason.UNKNOWN_SKU,
        )
    if QUARANTINE in low:
        return "withheld", Classification(
            Verdict.WITHHELD,
            f"Wildberries: {words} (task {upload_id}). {WHERE_TO_RELEASE}",
            http_status=200,
            receipt=receipt,
        )
    if SALE_LOCK in low:
        # research §2.6 item 7: locked while the good is in an inventory sale: temporary,
        # charged, so that it ends retry-limit with WB's words if the sale outlasts the tries;
        # each try a retry_max_delay apart (``SALE_LOCK_WAIT``, capped by the worker).
        return "sale-lock", Classification(
            Verdict.TEMPORARY,
            f"Wildberries: {words} (task {upload_id}). {WHILE_ON_SALE}",
            http_status=200,
            error_class="SaleLock",
            retry_after=SALE_LOCK_WAIT,
            about_item=True,  # WB answered well; this good alone is locked
        )
    return "refused", Classification(
        Verdict.TERMINAL,
        f"Wildberries refused the price: {words} (task {upload_id})",
        http_status=200,
        reason=Reason.CHANNEL_RULE,
    )

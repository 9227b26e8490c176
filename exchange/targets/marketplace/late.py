"""A send whose answer was lost may still land, after a newer one (contract 14: never a version
at or below the one delivered over a newer one).

A request that timed out, or whose connection was cut, after it may have reached the
marketplace may be applied late: the marketplace may still be working on it when the service
has given up on its answer, and two updates of one good have no documented order (research
§1.5 for Ozon: "Two racing updates: no documented ordering guarantee"; §2.4, §2.5 for
Wildberries). Sent again, or followed by a newer price, it may land last: the good ends on the
older price while the service says the newer one was delivered.

So, after such a send, the good's next send (the same price again or a newer one) waits,
uncharged, and reads what the marketplace shows, until it shows the lost send's prices (it
landed, and cannot land again: that version is delivered without a request, a newer one may
go) or ``hold`` seconds have passed since the send (taken for never applied: the price goes).
Shown, the lost prices may be another sender's while the request may still apply: Ozon's newer
price waits out ``hold`` all the same (``holds``, review ozlost38 H4).
Never sent again blindly: identical requests may get the account restricted (§1.3).

What a target shares here: the lost send as its receipt keeps it (``LostSend``, ``token``,
``read_token``), whether a read shows it (``shows``) and the words of the wait (``waits``).
The target reads and writes the receipts (its database port) and the marketplace."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from exchange.domain.verdicts import Classification, Verdict
from exchange.targets.marketplace.money import text

LOST_SEND = "LostSend"  # error_class: a good waits for a lost send to land, or its bound


@dataclass(frozen=True, slots=True)
class LostSend:
    """A send whose answer was lost: when it left (epoch seconds on the target's clock) and
    the prices it set (the marketplace's field -> amount)."""

    at: float
    prices: dict[str, Decimal]


def token(prefix: str, lost: LostSend) -> str:
    """The lost send as one word of a delivery's receipt (no spaces): ``prefix``, its time,
    then ``field=amount`` pairs (``ozon-lost:1700000000.000:price=1100,old_price=0``)."""
    return f"{prefix}{lost.at:.3f}:{pairs(lost.prices)}"


def pairs(prices: Mapping[str, Decimal]) -> str:
    """Prices as ``token`` writes them (no spaces): ``price=1100,old_price=0``."""
    return ",".join(f"{field}={text(amount)}" for field, amount in sorted(prices.items()))


def read_token(prefix: str, word: str) -> LostSend | None:
    """A ``token``'s lost send; None: not one (another word, or unreadable)."""
    if not word.startswith(prefix):
        return None
    at, _, pairs = word[len(prefix) :].partition(":")
    try:
        prices = {}
        for pair in filter(None, pairs.split(",")):
            field, _, amount = pair.partition("=")
            prices[field] = Decimal(amount)
        return LostSend(float(at), prices)
    except (ValueError, InvalidOperation):
        return None


def tokens(prefix: str, receipts: Iterable[str | None]) -> list[str]:
    """The ``token`` words the receipts hold (a receipt is space-separated words)."""
    return sorted({w for r in receipts for w in (r or "").split() if w.startswith(prefix)})


def shows(lost: LostSend, shown: Mapping[str, Decimal | None]) -> bool:
    """Whether the marketplace's prices read now (field -> amount; None: not shown) are the
    lost send's: every field it set. A zero (an old price cleared, research §1.1 ``"0"``)
    is shown as zero or as none."""
    for field, amount in lost.prices.items():
        held = shown.get(field)
        if amount == 0 and not held:
            continue
        if held is None or held != amount:
            return False
    return True


def said(prices: Mapping[str, Decimal | None]) -> str:
    """Prices in words: ``price 1100, old_price 0``."""
    return ", ".join(
        f"{field} {'none' if amount is None else text(amount)}"
        for field, amount in sorted(prices.items())
    )


def waits(
    marketplace: str, lost: LostSend, found: str, now: float, hold: float, every: float
) -> Classification:
    """The good's wait while ``lost`` may still land: ``found``, what the read found (the
    prices shown, in ``said``'s words, or why it could not be read), due again in ``every``
    seconds, at most until ``lost.at + hold``."""
    until = lost.at + hold
    left = max(until - now, 0.0)
    return Classification(
        Verdict.AWAITING,
        f"{marketplace} may still apply the send of {said(lost.prices)} at "
        f"{_moment(lost.at)} UTC whose answer was lost; {found}: the good waits until "
        f"{marketplace} shows it, at most until {_moment(until)} UTC, not charged",
        error_class=LOST_SEND,
        # Whole seconds, at least one: never due again at once.
        again_in=float(max(1, math.ceil(min(every, left)))),
    )


def holds(marketplace: str, lost: LostSend, now: float, hold: float) -> Classification:
    """A newer price's wait while the marketplace shows ``lost``'s prices: they may be another
    sender's, and ``lost`` may still apply after the newer one (review ozlost38 H4: Ozon
    showed 800, set by another program; 900 went at once and the lost 800 landed after it).
    Seeing them delivers their version without a request, never the newer one before the
    bound: due again at ``lost.at + hold``."""
    until = lost.at + hold
    return Classification(
        Verdict.AWAITING,
        f"{marketplace} shows {said(lost.prices)}, the prices of the send at "
        f"{_moment(lost.at)} UTC whose answer was lost; that send may still apply after a "
        f"newer one: the good waits until {_moment(until)} UTC, not charged",
        error_class=LOST_SEND,
        again_in=float(max(1, math.ceil(until - now))),
    )


def _moment(at: float) -> str:
    return f"{datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M:%S}"

"""Ozon's limit of 10 price updates of one product an hour (contract 14; research §1.3), counted
by the target itself: the channel's sends per product (every worker's, counted in the database
and the send's slot taken there, committed, before its request leaves: ``SentTimes.reserve``;
without one, this process's own), so that the 11th is held until the
oldest of the last ten is an hour old, and a product Ozon refused anyway (another sender, a
restart that forgot) is tried once more an hour after the refusal.

Time is the target's clock in seconds (``time.time``; the simulator's scaled clock in tests).
A rolling hour: a fixed clock hour (research §7.2, UNCONFIRMED) never refuses what the rolling
one allows, since the current clock hour is a part of the last 3,600 seconds.
"""

from __future__ import annotations

import collections
import secrets
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

LIMIT = 10  # §1.3: "не больше 10 раз в час"
HOUR = 3600.0
# After a refusal the product goes again an hour later, a little after, so that the rolling
# hour of every update Ozon counted has ended: the latest price lands at most 61 minutes after.
AFTER_REFUSAL = HOUR + 30.0
# The receipt of a delivery Ozon refused for the limit: ``ozon-refused:<epoch seconds>``, stored
# with its AWAITING, so that a restart still waits the product's hour (exchange/db/sent_times.py).
REFUSED = "ozon-refused:"
# The receipt a send carries from before its request leaves, committed (``SentTimes.reserve``):
# ``ozon-sending:<epoch seconds>:<nonce>`` (the earlier attempts' within the hour kept after it),
# so that another worker counting the product's hour meanwhile counts it, and a send whose
# answer never came still counts (review 32).
SENDING = "ozon-sending:"
# A send whose answer was lost (a timeout, a connection cut after the request may have reached
# Ozon): ``ozon-lost:<epoch seconds>:<field>=<amount>,...`` added after the send's mark on its
# deliveries, so that the product's next send waits until Ozon shows those prices, whichever
# worker sends it (``marketplace.late``; target.py ``_late``).
LOST = "ozon-lost:"
# Beside a lost send's word, where that send cleared the old price of a price Ozon refused by
# its rule (target.py ``_clear_refused``): ``ozon-ruled:<code>,...``, Ozon's codes of that
# refusal, so that the price's later waits still say it (review rev39 W3).
RULED = "ozon-ruled:"


def sending_receipt(at: float) -> str:
    """A send's mark: its time and a nonce (two sends at one clock time are two)."""
    return f"{SENDING}{at:.3f}:{secrets.token_hex(4)}"


def refused_receipt(at: float) -> str:
    return f"{REFUSED}{at:.3f}"


def refused_at(receipt: str | None) -> float | None:
    """The time a ``refused_receipt`` names; None: not one."""
    if not receipt or not receipt.startswith(REFUSED):
        return None
    try:
        return float(receipt[len(REFUSED) :])
    except ValueError:
        return None


class SentTimes(Protocol):
    """The port the target reads the sends before this process through
    (``exchange.db.sent_times``)."""

    def since(self, skus: Iterable[str], moment: datetime) -> dict[str, list[float]]:
        """For each of ``skus``, the times (epoch seconds) of its accepted sends since
        ``moment``."""
        ...

    def receipts_since(
        self, skus: Iterable[str], moment: datetime, prefix: str
    ) -> dict[str, list[str]]:
        """For each of ``skus``, the receipts starting with ``prefix`` of its deliveries
        recorded since ``moment`` (``REFUSED``: Ozon's refusals for the hourly limit, kept by a
        superseded version too: the wait belongs to the product, not to the version)."""
        ...

    def reserve(
        self,
        items: Mapping[str, Sequence[str]],
        mark: str,
        moment: datetime,
        limit: int,
        prefix: str,
        goods: Mapping[str, str] | None = None,
        prefixes: Iterable[str] = (),
        *,
        by_article: bool = False,
        priced: Mapping[str, str] | None = None,
    ) -> tuple[dict[str, list[float]], dict[str, str]]:
        """Before a request leaves: for each SKU of ``items`` (SKU -> its item's messages),
        one worker at a time, its sends since ``moment`` counted (accepted ones and the ones
        marked with ``prefix``) and, under ``limit``, ``mark`` written on its deliveries,
        committed. With ``goods`` (SKU -> its offer_id), one offer at a time across workers
        too (``marketplace.holders``): a SKU whose offer another SKU was already sent to
        (a receipt beginning with one of ``prefixes``, delivered, withheld) is not marked.
        The SKUs that may not go: those whose hour is full, with the times of their sends;
        those whose offer another SKU keeps, with that SKU. ``priced`` (SKU -> the prices
        it sets, ``late.pairs``): written after the SKU's mark (``mark:pairs``), what a send
        never answered may still set (``lost_since``)."""
        ...

    def unmark(self, receipts: Mapping[str, str | None], mark: str) -> None:
        """A marked send whose request never left: each message's delivery still holding
        ``mark`` gets back its receipt before (``receipts``: message_id -> receipt)."""
        ...

    def lost(self, message_ids: Iterable[str], mark: str, word: str) -> None:
        """A marked send whose answer was lost: each message's delivery still holding
        ``mark`` gets ``word`` (``LOST``) after its receipt, committed."""
        ...

    def answered(self, priced: Mapping[str, str], mark: str) -> None:
        """A marked send was answered: each message's delivery still holding ``mark`` first
        with its prices (``priced``: message_id -> ``late.pairs``) keeps the mark without
        them, so that ``lost_since`` never reads it as a send never answered."""
        ...

    def lost_since(
        self,
        skus: Iterable[str],
        moment: datetime,
        prefix: str,
        marked: str | None = None,
        *,
        now: datetime,
    ) -> dict[str, list[str]]:
        """For each of ``skus``, the receipts holding a word beginning with ``prefix`` (after
        the first) of its deliveries recorded since ``moment``, whatever their state; with
        ``marked`` (the sends' mark, ``SENDING``), and a ``prefix`` word for each send marked
        on the channel, or a dropped channel of the account, and never answered (its worker
        died, or the channel was dropped: reviews ozlost38 H1, ozon 35); ``now``: a send under
        a lease run out by then is a dead worker's (review rev39 H1)."""
        ...

    def settle(self, skus: Iterable[str], words: Iterable[str]) -> None:
        """The lost sends ``words`` (``lost``'s) have landed or are past their wait: taken out
        of the receipts of these SKUs' deliveries."""
        ...


class _NoneSent:
    def since(self, skus: Iterable[str], moment: datetime) -> dict[str, list[float]]:
        return {}

    def receipts_since(
        self, skus: Iterable[str], moment: datetime, prefix: str
    ) -> dict[str, list[str]]:
        return {}

    def reserve(
        self,
        items: Mapping[str, Sequence[str]],
        mark: str,
        moment: datetime,
        limit: int,
        prefix: str,
        goods: Mapping[str, str] | None = None,
        prefixes: Iterable[str] = (),
        *,
        by_article: bool = False,
        priced: Mapping[str, str] | None = None,
    ) -> tuple[dict[str, list[float]], dict[str, str]]:
        return {}, {}

    def unmark(self, receipts: Mapping[str, str | None], mark: str) -> None:
        return None

    def lost(self, message_ids: Iterable[str], mark: str, word: str) -> None:
        return None

    def answered(self, priced: Mapping[str, str], mark: str) -> None:
        return None

    def lost_since(
        self,
        skus: Iterable[str],
        moment: datetime,
        prefix: str,
        marked: str | None = None,
        *,
        now: datetime,
    ) -> dict[str, list[str]]:
        return {}

    def settle(self, skus: Iterable[str], words: Iterable[str]) -> None:
        return None


NO_SENT_TIMES: SentTimes = _NoneSent()


class ProductHours:
    def __init__(self, limit: int = LIMIT, hour: float = HOUR) -> None:
        self.limit, self.hour = limit, hour
        self.after_refusal = hour * AFTER_REFUSAL / HOUR
        self._sent: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._refused_until: dict[str, float] = {}

    def remember(self, offer_id: str, times: Iterable[float]) -> None:
        """Sends made before this process (read from the deliveries' history)."""
        sent = self._sent[offer_id]
        for at in sorted(set(times) | set(sent)):
            if at not in sent:
                sent.append(at)
        self._sent[offer_id] = collections.deque(sorted(sent))

    def recount(self, offer_id: str, times: Iterable[float]) -> None:
        """The product's accepted sends as the channel's history holds them, every worker's
        (this process's own among them): they replace what this process counted. Two sends
        at one time (two workers' marks, a clock that did not move) are two."""
        self._sent[offer_id] = collections.deque(sorted(times))

    def by_refusal(self, offer_id: str, at: float) -> bool:
        """Whether the wait ending at ``at`` (``free_at``'s) is Ozon's refusal's, not this
        target's own count of its sends: the words of the hold say which (review 32)."""
        return self._refused_until.get(offer_id) == at

    def free_at(self, offer_id: str, now: float) -> float | None:
        """When the product may be sent again; None: now."""
        waits: list[float] = []
        refused = self._refused_until.get(offer_id)
        if refused is not None:
            if refused > now:
                waits.append(refused)
            else:
                del self._refused_until[offer_id]
        sent = self._sent.get(offer_id)
        if sent:
            while sent and sent[0] <= now - self.hour:
                sent.popleft()
            if len(sent) >= self.limit:
                waits.append(sent[-self.limit] + self.hour)
        return max(waits) if waits else None

    def charge(self, offer_id: str, now: float) -> None:
        """Ozon accepted an update of the product (``updated: true``)."""
        self._sent[offer_id].append(now)

    def refused(self, offer_id: str, now: float) -> float:
        """Ozon refused the product for its hourly limit (at ``now``): it is tried again at the
        time returned, and not before."""
        until = now + self.after_refusal
        self._refused_until[offer_id] = max(until, self._refused_until.get(offer_id, until))
        return self._refused_until[offer_id]

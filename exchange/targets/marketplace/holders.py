"""One 1C SKU a marketplace good (contract 14): two 1C SKUs the marketplace reads as one good
(Yandex trims ``offerId``, research §3.1 ``ShopSku``; under ``sku_source = article`` two 1C
offers may share an article, one Wildberries ``nmID`` or one Yandex offer) would overwrite each
other's price there. The first SKU sent keeps the good; the other is ``invalid-for-channel``,
in the target's words naming both. ``wildberries``, ``yandex-market`` and ``ozon`` decide it
here (``OneSkuAGood.split`` for a target's items; ``shared_article``: the words under
``sku_source = article``).

``OfferHolders`` is the port the decision reads the channel's earlier sends through, whichever
worker made them (``exchange.db.sent_times.DbSentTimes.offer_holders``); ``NO_HOLDERS`` is its
no-database default (``exchange check``, the tests of one process): this process's memory only.

Two workers may claim both SKUs of one good at once: each sees the other's in flight. Both
then rank the SKUs alike (the database's order: a SKU already sent first, then the earliest
lease, the earliest message, the SKU's name), so exactly one keeps the good (issue 32). A
worker may also read before the other's claim is in, and the other before this one's mark is:
each ranks its own SKU first. So the targets check once more as they write the mark that
their SKU's price leaves now, one good at a time across workers (``DbSentTimes.sending_first``
for Yandex Market, ``DbWbStore.put_first`` for Wildberries, ``DbSentTimes.reserve`` for Ozon,
each ``lock_goods`` and ``taken`` in exchange/db/sent_times.py): a SKU whose good another SKU
was sent to meanwhile is not sent (``OneSkuAGood.lost``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def shared_article(keeper: str, sku: str, article: str, marketplace: str) -> str:
    """Why ``sku`` is ``invalid-for-channel``: it shares ``article`` with ``keeper``, sent to
    the marketplace's offer first (one offer, one price: each would overwrite the other's)."""
    return (
        f"SKUs {keeper!r} and {sku!r} share the article (Артикул) {article!r}, one "
        f"{marketplace} offer (one price): SKU {keeper!r} was sent to it first, and {sku!r} "
        "would overwrite its price; give each SKU its own article in 1C"
    )


class OfferHolders(Protocol):
    def offer_holders(
        self,
        offers: Iterable[str],
        prefixes: Iterable[str],
        *,
        by_article: bool = False,
    ) -> dict[str, list[str]]:
        """For each of ``offers``, the SKUs whose prices the channel gave that offer or is
        giving it (delivered, withheld, in flight, tried and due again, or a receipt beginning
        with one of ``prefixes``; the asking batch's own among them), the one that keeps the
        offer first: the SKU trimmed is the offer, or its article trimmed when
        ``by_article``."""
        ...


class NoHolders:
    def offer_holders(
        self,
        offers: Iterable[str],
        prefixes: Iterable[str],
        *,
        by_article: bool = False,
    ) -> dict[str, list[str]]:
        return {}


# Without a database (``exchange check``, the tests of one process): this process's memory only.
NO_HOLDERS: OfferHolders = NoHolders()


class OneSkuAGood:
    """The decision, for one target: which SKU keeps each offer. The database's order first
    (any worker, before a restart too); where the database names no other SKU, this process's
    own claims (a batch sent meanwhile sees them before the database does)."""

    def __init__(self, holders: OfferHolders, prefixes: Iterable[str], channel: str) -> None:
        """``prefixes``: the receipts of this channel's sends that may have reached it;
        ``channel``: the marketplace's name, for the log."""
        self.holders = holders
        self.prefixes = tuple(prefixes)
        self.channel = channel
        self._claimed: dict[str, str] = {}  # offer -> the SKU this process gave it first

    async def read(self, offers: Iterable[str], *, by_article: bool) -> dict[str, list[str]]:
        """The channel's holders of ``offers`` (``OfferHolders``), read in a thread; none when
        the database cannot be read (this process's memory still holds)."""
        wanted = sorted(set(offers))
        if not wanted:
            return {}
        try:
            return await asyncio.to_thread(
                self.holders.offer_holders, wanted, self.prefixes, by_article=by_article
            )
        except Exception as exc:  # the service's database
            log.warning(
                "%s: the SKUs of the offers could not be read (%s)",
                self.channel,
                type(exc).__name__,
            )
            return {}

    def keeper(self, offer: str, sku: str, held: Mapping[str, list[str]]) -> str:
        """The SKU that keeps ``offer`` (``sku`` itself when it may go): the first of the
        database's ``held`` (read by ``read``) when that is another SKU; else this process's
        first claim of the offer, claimed now for ``sku`` when there is none."""
        ranked = held.get(offer) or []
        if ranked and ranked[0] != sku:
            return ranked[0]
        return self._claimed.setdefault(offer, sku)

    async def split(
        self,
        goods: Sequence[T],
        offer: Callable[[T], str],
        sku: Callable[[T], str],
        *,
        by_article: bool,
    ) -> tuple[list[T], list[tuple[T, str]]]:
        """``goods`` (a target's items, each naming its ``offer`` and ``sku``) as the ones that
        may go and the others, each with the SKU that keeps its offer (``read``, ``keeper``:
        the database's order, then this process's claims, one request's goods among them)."""
        held = await self.read((offer(g) for g in goods), by_article=by_article)
        kept: list[T] = []
        refused: list[tuple[T, str]] = []
        for good in goods:
            other = self.keeper(offer(good), sku(good), held)
            if other == sku(good):
                kept.append(good)
            else:
                refused.append((good, other))
        return kept, refused

    def lost(self, offer: str, other: str) -> None:
        """``other`` was sent to ``offer`` first, found when this process's SKU was about to
        leave (the database's check at the mark, one good at a time across workers): this
        process's memory names ``other`` too."""
        self._claimed[offer] = other

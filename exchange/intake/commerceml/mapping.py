"""Offers -> ``price`` rows (contract 9a), pure: no database, no clock.

One row per offer and mapped price type: ``sku`` is the offer's ``Ид`` (or its ``Артикул``),
the aggregate is ``<sku>/<price_type>`` (contract 1: one aggregate is one price). What cannot
be a valid price is still written (an unknown currency, a price that is not a decimal, an
offer without an article) so that intake quarantines it ``invalid-contract`` with its reason:
nothing is dropped silently. What must never reach a shop is not written and is counted:
unmapped price types (purchase and cost prices) and prices not of the base unit.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Literal

from exchange.intake.commerceml.parse import MAX_PRICES, Offer, PriceType
from exchange.intake.contracts import (
    NAME_CHARS,
    STAGING_TEXT_LIMITS,
    price_fields_problem,
    shortened,
)

RUB_NAMES = frozenset({"руб", "руб.", "rur", "rub", "643", "р", "р.", "рубль"})
_PLAIN = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
_SPACES = re.compile(r"[\s\u00a0\u202f]")

SkuMode = Literal["id", "article"]
AGGREGATE_CHARS = STAGING_TEXT_LIMITS["aggregate"]
NO_TYPE = "(a price without ИдТипаЦены)"  # how such a price's type is named to 1C's user


@functools.lru_cache(maxsize=256)
def currency(raw: str) -> str:
    """руб, RUR and 643 mean RUB; anything else passes as it is (intake refuses what is not
    three upper-case letters: such a price becomes ``invalid-contract``)."""
    text = raw.strip()
    return "RUB" if text.lower() in RUB_NAMES else text


_CANONICAL = re.compile(r"^(0|[1-9][0-9]*)(\.[0-9]+)?$")


def amount(raw: str) -> str:
    """``ЦенаЗаЕдиницу`` as a plain decimal string, never a float. Spaces (also NBSP) are
    dropped and a decimal comma read as a point, as Bitrix reads it; what still is not a
    decimal passes as it is, for intake to refuse."""
    if _CANONICAL.match(raw):  # the usual case: already as Decimal would write it
        return raw
    text = _SPACES.sub("", raw).replace(",", ".")
    if not _PLAIN.match(text):
        return raw.strip()
    try:
        return format(Decimal(text), "f")
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        return raw.strip()


@functools.lru_cache(maxsize=256)
def _is_one(text: str) -> bool:
    try:
        return not text or Decimal(_SPACES.sub("", text).replace(",", ".")) == 1
    except InvalidOperation:
        return False


@functools.lru_cache(maxsize=256)
def _above_one(text: str) -> bool:
    try:
        return bool(text) and Decimal(_SPACES.sub("", text).replace(",", ".")) > 1
    except InvalidOperation:
        return True


_PLAIN_TEXT = re.compile(r'^[^"\\\x00-\x1f\x7f]*$')


def _payload(payload: dict[str, str]) -> str:
    """The payload's JSON: written directly when no value needs escaping (the usual case, and
    the same text json.dumps writes), else by json.dumps."""
    if _PLAIN_TEXT.match("".join(payload.values())):
        return (
            f'{{"sku":"{payload["sku"]}","price":"{payload["price"]}",'
            f'"currency":"{payload["currency"]}","price_type":"{payload["price_type"]}"}}'
        )
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def _tail(iso: str, code: str) -> str | None:
    """The payload's end after the price, when neither value needs escaping."""
    if _PLAIN_TEXT.match(iso) and _PLAIN_TEXT.match(code):
        return f',"currency":"{iso}","price_type":"{code}"}}'
    return None


@dataclass(slots=True)
class Counts:
    offers: int = 0
    offers_without_prices: int = 0
    prices: int = 0
    intents: int = 0
    not_base_unit: int = 0
    unmapped: Counter[str] = field(default_factory=Counter)
    no_article: int = 0
    no_article_prices: int = 0  # written, and quarantined by intake: never sent (issue 34)
    too_many_prices: int = 0  # offers with more than MAX_PRICES prices: invalid-contract
    # prices of an offer whose sku (Ид or Артикул) is longer than the contract allows
    too_long: int = 0
    # earlier offers of an aggregate a later offer of the package maps to, of another price:
    # invalid-contract, «повтор в пакете» (counted by ``publish``, which finds them)
    repeated: int = 0
    # written, and refused by intake for their fields (an unknown currency, a price that is
    # not a decimal): the contract's own judgement (``price_fields_problem``), made here
    invalid: int = 0
    # written, and refused by intake: their (sku, price type) is owned by another aggregate
    # (contract 15; counted by ``publish``, which reads the owners)
    owned_elsewhere: int = 0

    def not_sent(self) -> int:
        """The prices of the file that will never reach a shop, each counted once."""
        return (
            self.not_base_unit
            + sum(self.unmapped.values())
            + self.too_many_prices
            + self.too_long
            + self.repeated
            + self.no_article_prices
            + self.invalid
            + self.owned_elsewhere
        )

    def sent(self) -> int:
        """The staged prices that go on to the shop: the rows written, less those intake
        will refuse."""
        written_not_sent = (
            self.no_article_prices
            + self.too_long
            + self.repeated
            + self.invalid
            + self.owned_elsewhere
        )
        return max(self.intents - written_not_sent, 0)

    def summary(self) -> str:
        """What 1C is told (issue 34 item 11: honest counts): the prices that go on to the
        shop, then every offer and price that does not and why."""
        parts = [f"{self.sent()} prices staged from {self.offers} offers"]
        if self.offers_without_prices:
            parts.append(f"{self.offers_without_prices} offers without prices: nothing to send")
        if self.unmapped:
            names = ", ".join(sorted(self.unmapped))
            parts.append(
                f"{sum(self.unmapped.values())} of unmapped price types not sent ({names})"
            )
        if self.not_base_unit:
            parts.append(
                f"{self.not_base_unit} not sent: not of the base unit (Коэффициент/МинКоличество)"
            )
        if self.no_article:
            parts.append(
                f"{self.no_article} offers without an article: their {self.no_article_prices} "
                "prices not sent (quarantined)"
            )
        if self.too_many_prices:
            parts.append(
                f"{self.too_many_prices} offers with more than {MAX_PRICES} prices not sent "
                "(invalid-contract)"
            )
        if self.too_long:
            parts.append(
                f"{self.too_long} prices not sent: the offer's id or article is longer than "
                f"{NAME_CHARS} characters (invalid-contract)"
            )
        if self.repeated:
            parts.append(
                f"{self.repeated} prices repeated in the package not sent: a later offer maps "
                "to the same aggregate (invalid-contract)"
            )
        if self.invalid:
            parts.append(
                f"{self.invalid} prices not sent: an unknown currency or a price that is not a "
                "decimal (invalid-contract)"
            )
        if self.owned_elsewhere:
            parts.append(
                f"{self.owned_elsewhere} prices not sent: their sku and price type belong to "
                "another aggregate (invalid-contract)"
            )
        return "; ".join(parts)


NAME_LIMIT = 500  # staging_intents.name (contract 1)


class Mapper:
    """A ``parse.Sink`` that writes one row per price to ``out(aggregate, payload, name)``:
    ``name`` is the offer's ``Наименование``, else its product's (``names``: the catalogue
    files of this 1C exchange, ``Товар``/``Наименование`` by the product's ``Ид``; an offer of
    a characteristic, ``<product>#<characteristic>``, takes its product's), None without
    either; kept beside the message for people and never in the payload (contract 1: a name is
    never sent to a shop). An offer's own name wins: 1C names an offer of a characteristic
    «Товар (характеристика)», more than its product's name says."""

    def __init__(
        self,
        *,
        price_types: Mapping[str, str],
        sku_mode: SkuMode,
        known_types: dict[str, PriceType],
        articles: Mapping[str, str],
        out: Callable[[str, str, str | None], None],
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.map = price_types
        self.sku_mode = sku_mode
        self.types = known_types
        self.articles = dict(articles)
        self.out = out
        self.counts = Counts()
        self.new_types: dict[str, PriceType] = {}
        self.new_articles: dict[str, str] = {}
        self.names = dict(names or {})
        self.new_names: dict[str, str] = {}
        self._resolved: dict[str, tuple[str, str, str]] = {}
        # The aggregates written so far, by their hash (8 bytes each, not the text), and those
        # written again (contract 15: within one package the later offer wins; ``publish``
        # finds and records them, reading only when there are any). A hash seen twice may be
        # two aggregates: ``publish`` counts the rows, so such a guess costs a read, nothing else.
        self._written: set[int] = set()
        self.repeated: set[str] = set()
        # The aggregates written whose last offer in the file holds a price not of the base
        # unit (not written): the later offer wins whatever it holds, so the earlier are not
        # sent either («повтор в пакете»; ``publish`` records them). A hash that is another
        # aggregate's names one with no row in the package: recorded, it refuses nothing.
        self.shadowed: set[str] = set()

    # -- parse.Sink ------------------------------------------------------------------------

    def price_type(self, price_type: PriceType) -> None:
        if price_type.id:
            self.types[price_type.id] = price_type
            self.new_types[price_type.id] = price_type
            self._resolved.clear()

    def article(self, product_id: str, article: str) -> None:
        self.articles[product_id] = article
        self.new_articles[product_id] = article

    def product_name(self, product_id: str, name: str) -> None:
        self.names[product_id] = name
        self.new_names[product_id] = name

    def _name(self, offer: Offer) -> str | None:
        """The offer's own name, else its product's (by its whole Ид, then by the part
        before ``#``), cut to the staging column; None without either."""
        name = offer.name
        if not name and self.names:
            name = self.names.get(offer.id) or self.names.get(offer.id.partition("#")[0], "")
        return name[:NAME_LIMIT] or None

    def _resolve(self, type_id: str) -> tuple[str, str, str]:
        """(name, code or "", the type's currency) of a price type, kept per Ид."""
        resolved = self._resolved.get(type_id)
        if resolved is None:
            known = self.types.get(type_id)
            name = known.name if known is not None and known.name else type_id or NO_TYPE
            code = self.map.get(type_id) or self.map.get(name) or ""
            resolved = (name, code, known.currency if known is not None else "")
            self._resolved[type_id] = resolved
        return resolved

    def offer(self, offer: Offer) -> None:
        counts = self.counts
        counts.offers += 1
        if offer.too_many_prices:
            counts.too_many_prices += 1
            return
        if not offer.prices:
            counts.offers_without_prices += 1
            return
        sku = self._sku(offer)
        key = sku or offer.id
        plain_sku = _PLAIN_TEXT.match(sku) is not None
        out = self.out
        product = self._name(offer)
        own: set[str] = set()  # the aggregates this offer wrote
        for price in offer.prices:
            counts.prices += 1
            name, code, type_currency = self._resolve(price.type_id)
            if not code:
                counts.unmapped[name] += 1
                continue
            if (price.coefficient and not _is_one(price.coefficient)) or (
                price.min_quantity and _above_one(price.min_quantity)
            ):
                counts.not_base_unit += 1
                # A later offer's (an offer's own price of another unit, beside its base
                # price, is no later offer).
                shadow = f"{key}/{code}"
                if shadow not in own and hash(shadow) in self._written:
                    self.shadowed.add(shadow)
                continue
            raw_currency = price.currency or type_currency
            iso = currency(raw_currency) if raw_currency else "RUB"
            value = amount(price.value)
            tail = _tail(iso, code)
            if plain_sku and tail is not None and _PLAIN_TEXT.match(value):
                payload = f'{{"sku":"{sku}","price":"{value}"{tail}'
            else:
                payload = _payload(
                    {"sku": sku, "price": value, "currency": iso, "price_type": code}
                )
            aggregate = f"{key}/{code}"
            if len(aggregate) > AGGREGATE_CHARS or len(sku) > NAME_CHARS:
                # Contract 15: an over-long id is one invalid-contract record (intake refuses
                # the sku), never a package that fails its insert as a whole: the aggregate is
                # kept to its column, with «…» at the cut. Two such ids cut to one aggregate
                # are two records, never a repeat (the aggregate is not theirs).
                counts.too_long += 1
                room = max(AGGREGATE_CHARS - len(code) - 1, 1)
                aggregate = shortened(f"{shortened(key, room)}/{code}", AGGREGATE_CHARS)
                out(aggregate, payload, product)
                counts.intents += 1
                continue
            digest = hash(aggregate)
            if digest in self._written:
                # The later offer wins whatever it holds (contract 15, docs/1c.ru.md): an
                # invalid later price makes the earlier a «повтор в пакете» record too.
                self.repeated.add(aggregate)
            else:
                self._written.add(digest)
            self.shadowed.discard(aggregate)
            own.add(aggregate)
            out(aggregate, payload, product)
            counts.intents += 1
            if not sku:
                counts.no_article_prices += 1
            elif price_fields_problem(sku, value, iso, code) is not None:
                counts.invalid += 1

    def _sku(self, offer: Offer) -> str:
        if self.sku_mode == "id":
            return offer.id
        product, _, characteristic = offer.id.partition("#")
        article = offer.article or self.articles.get(product, "")
        if not article:
            self.counts.no_article += 1
            return ""  # intake quarantines it: a price needs a sku
        return f"{article}#{characteristic}" if characteristic else article

    def failure(self) -> str | None:
        """Why the file fails as a whole: it carries prices, none of a mapped type."""
        counts = self.counts
        if counts.prices and not counts.intents and not counts.not_base_unit:
            found = ", ".join(sorted(counts.unmapped))
            return (
                f"no price of a mapped type: the file has {found}; map them in "
                "EXCHANGE_1C_PRICE_TYPES"
            )
        return None

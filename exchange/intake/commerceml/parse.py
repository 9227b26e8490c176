"""A streaming, safe reader of CommerceML files (2.03–2.10 and 3.x).

Safety: expat is fed in blocks and configured as defusedxml configures it (a document type
declaration, an entity declaration or an external entity reference stops the parse), so no
entity is ever expanded or fetched; a text node is capped. Speed and memory: no tree is built,
only the fields the exchange needs are kept, one offer at a time (defusedxml's own
``iterparse`` builds elements in pure Python and ran at half the speed of this reader on a
100,000-offer file; the protection is the same four handlers).

Only what prices need is read: price types (``ТипЦены``, in offers files up to 2.08 and in the
catalogue's ``Классификатор`` from 2.09), products' articles (``Товар``/``Артикул``) and offers
with their prices. ``Представление`` (display text) is never read.
"""

from __future__ import annotations

import pyexpat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

ROOT = "КоммерческаяИнформация"
RECORDS = frozenset({"Предложение", "Цена", "ТипЦены", "Товар"})
# The elements whose start matters (a record opens, a header); any other start only nests.
OFFER_PACKAGES = frozenset({"ПакетПредложений", "ИзмененияПакетаПредложений"})
CATALOGUE = frozenset({"Каталог", "Классификатор"})
STARTS = RECORDS | OFFER_PACKAGES | CATALOGUE | {"Цены"}
BLOCK = 1 << 16
MAX_TEXT = 1 << 16  # no field the exchange reads is longer; a larger text node is refused
MAX_DEPTH = 64
# The leaves whose text is read; every other element is only a place in the path.
FIELDS = frozenset(
    {
        "Ид",
        "Артикул",
        "Наименование",
        "Валюта",
        "ИдТипаЦены",
        "ЦенаЗаЕдиницу",
        "Коэффициент",
        "МинКоличество",
    }
)


class CmlError(ValueError):
    """The file cannot be read as CommerceML; the message is one line, fit for 1C's user."""


@dataclass(slots=True)
class Price:
    type_id: str = ""
    value: str = ""
    currency: str = ""
    coefficient: str = ""
    min_quantity: str = ""


@dataclass(slots=True)
class Offer:
    id: str = ""
    article: str = ""
    prices: list[Price] = field(default_factory=list)
    has_prices: bool = False


@dataclass(slots=True)
class PriceType:
    id: str = ""
    name: str = ""
    currency: str = ""


@dataclass(slots=True)
class Header:
    schema_version: str = ""
    generated_at: str = ""
    offers_package: bool = False
    catalogue: bool = False
    only_changes: str = ""


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class Sink(Protocol):
    def price_type(self, price_type: PriceType) -> None: ...
    def article(self, product_id: str, article: str) -> None: ...
    def offer(self, offer: Offer) -> None: ...


def _local(name: str) -> str:
    return name.rpartition(":")[2]


READ = FIELDS | RECORDS  # the elements whose end matters


class _Reader:
    """The handlers expat calls. Hot path: one call per element start, end and text node, so
    each does the least it can (a set lookup, a list push or pop); the rest is in ``_start``
    and ``_end``, reached only for the few elements that open a record or are read."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.header = Header()
        self.stack: list[str] = []
        self.text: list[str] | None = None  # a list only inside a field that is read
        self.offer: Offer | None = None
        self.price: Price | None = None
        self.price_type: PriceType | None = None
        self.product: tuple[str, str] | None = None  # (Ид, Артикул) while inside a Товар
        self.offers = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if ":" in name:
            name = _local(name)
        stack = self.stack
        stack.append(name)
        self.text = [] if name in FIELDS else None
        if name in STARTS or not 1 < len(stack) <= MAX_DEPTH:
            self._start(name, attrs)

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        stack = self.stack
        depth = len(stack) - 1
        if depth == 0:
            if name != ROOT:
                raise CmlError(f"not a CommerceML file: the root element is <{name}>, not <{ROOT}>")
            self.header.schema_version = attrs.get("ВерсияСхемы", "")
            self.header.generated_at = attrs.get("ДатаФормирования", "")
            return
        if depth >= MAX_DEPTH:
            raise CmlError(f"elements nested deeper than {MAX_DEPTH}")
        parent = stack[-2]
        if name == "Предложение" and parent == "Предложения":
            self.offer = Offer()
        elif name == "Цена" and parent == "Цены" and self.offer is not None:
            self.price = Price()
        elif name == "Цены" and self.offer is not None and parent == "Предложение":
            self.offer.has_prices = True
        elif name == "ТипЦены" and parent == "ТипыЦен":
            self.price_type = PriceType()
        elif name == "Товар" and parent == "Товары":
            self.product = ("", "")
        elif name in OFFER_PACKAGES and depth == 1:
            self.header.offers_package = True
            self.header.only_changes = attrs.get("СодержитТолькоИзменения", "")
        elif name in CATALOGUE and depth == 1:
            self.header.catalogue = True

    def end(self, _name: str) -> None:
        name = self.stack.pop()
        if name in READ:
            self._end(name)
        self.text = None

    def _end(self, name: str) -> None:
        stack = self.stack
        parent = stack[-1] if stack else ""
        if self.price is not None:
            if name == "Цена" and parent == "Цены":
                assert self.offer is not None
                self.offer.prices.append(self.price)
                self.price = None
            elif parent == "Цена" or name in ("Коэффициент", "МинКоличество"):
                self._price_field(name)
        elif self.offer is not None:
            if name == "Предложение" and parent == "Предложения":
                self.offers += 1
                self.sink.offer(self.offer)
                self.offer = None
            elif parent == "Предложение":
                if name == "Ид":
                    self.offer.id = self._text()
                elif name == "Артикул":
                    self.offer.article = self._text()
        elif self.price_type is not None:
            if name == "ТипЦены":
                self.sink.price_type(self.price_type)
                self.price_type = None
            elif parent == "ТипЦены":
                if name == "Ид":
                    self.price_type.id = self._text()
                elif name == "Наименование":
                    self.price_type.name = self._text()
                elif name == "Валюта":
                    self.price_type.currency = self._text()
        elif self.product is not None:
            if name == "Товар" and parent == "Товары":
                product_id, article = self.product
                if product_id and article:
                    self.sink.article(product_id, article)
                self.product = None
            elif parent == "Товар":
                if name == "Ид":
                    self.product = (self._text(), self.product[1])
                elif name == "Артикул":
                    self.product = (self.product[0], self._text())

    def _price_field(self, name: str) -> None:
        price = self.price
        assert price is not None
        if name == "ИдТипаЦены":
            price.type_id = self._text()
        elif name == "ЦенаЗаЕдиницу":
            price.value = self._text()
        elif name == "Валюта":
            price.currency = self._text()
        elif name == "Коэффициент":
            price.coefficient = self._text()
        elif name == "МинКоличество":
            price.min_quantity = self._text()

    def _text(self) -> str:
        text = self.text
        if not text:
            return ""
        return (text[0] if len(text) == 1 else "".join(text)).strip()

    def chars(self, data: str) -> None:
        text = self.text
        if text is not None:  # text is read only in the fields kept
            text.append(data)
            if len(text) > 1:  # one node comes in one call unless it is long (buffer_text)
                self._cap()

    def _cap(self) -> None:
        assert self.text is not None
        if sum(map(len, self.text)) > MAX_TEXT:
            raise CmlError(f"a text node longer than {MAX_TEXT} characters in <{self.stack[-1]}>")


def _refuse_dtd(*_: object) -> None:
    raise CmlError("a document type declaration (DTD) is not allowed in a CommerceML file")


def _refuse_entity(*_: object) -> None:
    raise CmlError("entity declarations are not allowed in a CommerceML file")


def _refuse_external(*_: object) -> int:
    raise CmlError("external entities are not allowed in a CommerceML file")


def parse(
    stream: Readable,
    sink: Sink,
    *,
    progress: Callable[[int, int], None] | None = None,
    header: Header | None = None,
) -> Header:
    """Read ``stream`` to its end, telling ``sink`` what it finds; raise CmlError (one line)
    for a file that is not well-formed XML, not CommerceML, or unsafe. ``progress(bytes,
    offers)`` is called after each block; ``header``, when given, is filled as it is read."""
    reader = _Reader(sink)
    if header is not None:
        reader.header = header
    parser = pyexpat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = MAX_TEXT  # a text node longer than this comes in several calls
    parser.ordered_attributes = False
    parser.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_dtd
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_external
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.chars
    read = 0
    try:
        while block := stream.read(BLOCK):
            read += len(block)
            parser.Parse(block, False)
            if progress is not None:
                progress(read, reader.offers)
        parser.Parse(b"", True)
    except pyexpat.ExpatError as exc:
        if read == 0:
            raise CmlError("the file is empty") from None
        raise CmlError(
            f"not well-formed XML at line {exc.lineno}, column {exc.offset}: "
            f"{pyexpat.ErrorString(exc.code)}"
        ) from None
    except RecursionError:
        raise CmlError("the file is nested too deeply") from None
    if not reader.stack and reader.header.schema_version == "" and not read:
        raise CmlError("the file is empty")
    return reader.header

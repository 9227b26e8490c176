"""CommerceML written for tests and the bench: small packages built from values, and a large
offers file written as a stream (100,000 offers in bounded memory)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape


@dataclass(frozen=True)
class CmlPrice:
    type_id: str
    value: str
    currency: str | None = None
    coefficient: str | None = None
    min_quantity: str | None = None


@dataclass(frozen=True)
class CmlOffer:
    id: str
    prices: Sequence[CmlPrice] = ()
    article: str | None = None
    with_prices: bool = True


@dataclass(frozen=True)
class CmlType:
    id: str
    name: str
    currency: str = "RUB"


@dataclass
class Package:
    offers: Sequence[CmlOffer] = ()
    types: Sequence[CmlType] = ()
    schema: str = "2.07"
    generated_at: str = "2026-12-01T10:00:00"
    only_changes: str = "true"
    namespace: str | None = "urn:1C.ru:commerceml_2"
    extra: list[str] = field(default_factory=list)


def _e(text: str) -> str:
    return escape(text)


def _price(price: CmlPrice) -> str:
    parts = [
        f"<Представление>{_e(price.value)} за шт</Представление>",
        f"<ИдТипаЦены>{_e(price.type_id)}</ИдТипаЦены>",
        f"<ЦенаЗаЕдиницу>{_e(price.value)}</ЦенаЗаЕдиницу>",
    ]
    if price.currency is not None:
        parts.append(f"<Валюта>{_e(price.currency)}</Валюта>")
    if price.coefficient is not None:
        parts.append(f"<Единица>шт</Единица><Коэффициент>{_e(price.coefficient)}</Коэффициент>")
    if price.min_quantity is not None:
        parts.append(f"<МинКоличество>{_e(price.min_quantity)}</МинКоличество>")
    return "<Цена>" + "".join(parts) + "</Цена>"


def _offer(offer: CmlOffer) -> str:
    parts = [f"<Ид>{_e(offer.id)}</Ид>"]
    if offer.article is not None:
        parts.append(f"<Артикул>{_e(offer.article)}</Артикул>")
    parts.append("<Наименование>Товар</Наименование>")
    if offer.with_prices:
        parts.append("<Цены>" + "".join(_price(p) for p in offer.prices) + "</Цены>")
    return "<Предложение>" + "".join(parts) + "</Предложение>"


def _types(types: Sequence[CmlType]) -> str:
    if not types:
        return ""
    return (
        "<ТипыЦен>"
        + "".join(
            f"<ТипЦены><Ид>{_e(t.id)}</Ид><Наименование>{_e(t.name)}</Наименование>"
            f"<Валюта>{_e(t.currency)}</Валюта></ТипЦены>"
            for t in types
        )
        + "</ТипыЦен>"
    )


def _open(package: Package) -> str:
    ns = f' xmlns="{package.namespace}"' if package.namespace else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<КоммерческаяИнформация{ns} ВерсияСхемы="{package.schema}" '
        f'ДатаФормирования="{package.generated_at}">'
    )


def offers_xml(package: Package) -> bytes:
    body = (
        _open(package)
        + f'<ПакетПредложений СодержитТолькоИзменения="{package.only_changes}">'
        + "<Ид>package#</Ид><Наименование>Пакет предложений</Наименование>"
        + _types(package.types)
        + "<Предложения>"
        + "".join(_offer(o) for o in package.offers)
        + "</Предложения></ПакетПредложений>"
        + "".join(package.extra)
        + "</КоммерческаяИнформация>\n"
    )
    return b"\xef\xbb\xbf" + body.encode("utf-8")


def catalogue_xml(
    types: Sequence[CmlType] = (), articles: Sequence[tuple[str, str]] = (), schema: str = "2.09"
) -> bytes:
    package = Package(schema=schema)
    products = "".join(
        f"<Товар><Ид>{_e(pid)}</Ид><Артикул>{_e(article)}</Артикул>"
        f"<Наименование>Товар</Наименование></Товар>"
        for pid, article in articles
    )
    body = (
        _open(package)
        + "<Классификатор><Ид>c</Ид><Наименование>Классификатор</Наименование>"
        + _types(types)
        + "</Классификатор>"
        + f'<Каталог СодержитТолькоИзменения="false"><Ид>c</Ид><Товары>{products}</Товары>'
        + "</Каталог></КоммерческаяИнформация>\n"
    )
    return b"\xef\xbb\xbf" + body.encode("utf-8")


BENCH_TYPES = [
    CmlType(str(uuid.UUID(int=i + 1)), name, "руб")
    for i, name in enumerate(("Розничная", "Оптовая", "Закупочная"))
]


def write_big_offers(path: Path, offers: int, types: Sequence[CmlType] = BENCH_TYPES) -> int:
    """A realistic 1C offers file of ``offers`` offers with one price per type, written as a
    stream; returns its size in bytes."""
    package = Package(types=types, only_changes="false")
    with path.open("w", encoding="utf-8") as out:
        out.write("\ufeff" + _open(package) + '<ПакетПредложений СодержитТолькоИзменения="false">')
        out.write("<Ид>package#</Ид><Наименование>Пакет предложений</Наименование>")
        out.write(_types(types) + "<Предложения>\n")
        for n in range(offers):
            offer = CmlOffer(
                f"{uuid.UUID(int=10**9 + n)}#{uuid.UUID(int=2 * 10**9 + n)}",
                [
                    CmlPrice(t.id, f"{n % 100000 + i}.{n % 100:02d}", "руб", "1")
                    for i, t in enumerate(types)
                ],
                article=f"A-{n}",
            )
            out.write(_offer(offer) + "\n")
        out.write("</Предложения></ПакетПредложений></КоммерческаяИнформация>\n")
    return path.stat().st_size

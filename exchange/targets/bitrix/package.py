"""A leased batch as one CommerceML offers package for 1C-Bitrix (contract 10).

Always ``СодержитТолькоИзменения="true"``: a package saying ``false`` makes Bitrix deactivate
every element it does not name (BX-cml2 ``DeactivateElement``), so this module has no way to
write anything else. One ``Предложение`` per SKU (its ``Ид`` is the SKU) with the prices of
that SKU's messages in the batch; each price type named by the site's price type
(``EXCHANGE_BITRIX_PRICE_TYPES``), declared once in ``ТипыЦен``. Amounts are written as the
Decimal text they arrived as (dot-decimal, no exponent), never through a float.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from xml.sax.saxutils import escape, quoteattr

ONLY_CHANGES = "true"  # never "false": see the module's docstring


@dataclass(frozen=True, slots=True)
class Price:
    sku: str
    price_type: str  # the site's name for it
    amount: Decimal
    currency: str


def amount_text(amount: Decimal) -> str:
    return format(amount, "f")


def build(prices: list[Price], *, catalog_id: str, now: datetime) -> bytes:
    """The package as UTF-8 bytes (the encoding the XML declaration names)."""
    by_sku: dict[str, list[Price]] = {}
    for price in prices:
        by_sku.setdefault(price.sku, []).append(price)
    types: dict[str, str] = {}
    for price in prices:
        types.setdefault(price.price_type, price.currency)
    digest = hashlib.sha256(
        "\n".join(f"{p.sku}\t{p.price_type}\t{p.amount}" for p in prices).encode()
    ).hexdigest()[:16]
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<КоммерческаяИнформация ВерсияСхемы="2.08" ДатаФормирования="{stamp}">',
        f"<ПакетПредложений СодержитТолькоИзменения={quoteattr(ONLY_CHANGES)}>",
        f"<Ид>{escape(catalog_id)}#exchange-{digest}</Ид>",
        "<Наименование>Цены (exchange)</Наименование>",
        f"<ИдКаталога>{escape(catalog_id)}</ИдКаталога>",
        f"<ИдКлассификатора>{escape(catalog_id)}</ИдКлассификатора>",
        "<ТипыЦен>",
    ]
    for name, currency in types.items():
        out.append(
            f"<ТипЦены><Ид>{escape(name)}</Ид><Наименование>{escape(name)}</Наименование>"
            f"<Валюта>{escape(currency)}</Валюта></ТипЦены>"
        )
    out += ["</ТипыЦен>", "<Предложения>"]
    for sku, own in by_sku.items():
        out.append(f"<Предложение><Ид>{escape(sku)}</Ид><Цены>")
        for p in own:
            out.append(
                f"<Цена><ИдТипаЦены>{escape(p.price_type)}</ИдТипаЦены>"
                f"<ЦенаЗаЕдиницу>{amount_text(p.amount)}</ЦенаЗаЕдиницу>"
                f"<Валюта>{escape(p.currency)}</Валюта></Цена>"
            )
        out.append("</Цены></Предложение>")
    out += ["</Предложения>", "</ПакетПредложений>", "</КоммерческаяИнформация>", ""]
    return "\n".join(out).encode("utf-8")

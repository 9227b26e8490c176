"""The Bitrix target's pure parts (contract 10): the package it builds, how it reads answers."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from decimal import Decimal

import httpx
import pytest

from exchange.domain.verdicts import Verdict
from exchange.targets.bitrix.package import Price, build
from exchange.targets.bitrix.target import decode

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def test_one_offer_per_sku_with_its_prices_and_only_changes_always_true() -> None:
    prices = [
        Price("SKU-1", "Розничная", Decimal("1234.50"), "RUB"),
        Price("SKU-1", "Оптовая", Decimal("1E+3"), "RUB"),
        Price("SKU-2", "Розничная", Decimal("0.10"), "RUB"),
    ]

    root = ET.fromstring(build(prices, catalog_id="cat-1", now=NOW))

    package = root.find("ПакетПредложений")
    assert package is not None
    assert "true" == package.get("СодержитТолькоИзменения")
    assert "cat-1" == package.findtext("ИдКаталога")
    offers = {
        o.findtext("Ид"): [
            (p.findtext("ИдТипаЦены"), p.findtext("ЦенаЗаЕдиницу")) for p in o.iter("Цена")
        ]
        for o in package.iter("Предложение")
    }
    assert {
        "SKU-1": [("Розничная", "1234.50"), ("Оптовая", "1000")],
        "SKU-2": [("Розничная", "0.10")],
    } == offers
    assert ["Розничная", "Оптовая"] == [t.findtext("Ид") for t in package.iter("ТипЦены")]


def test_hostile_sku_text_stays_text() -> None:
    sku = "A<&>\"'B"
    root = ET.fromstring(build([Price(sku, "R", Decimal("1"), "RUB")], catalog_id="c", now=NOW))
    assert [sku] == [o.findtext("Ид") for o in root.iter("Предложение")]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        ("failure\nОшибка авторизации".encode("windows-1251"), "text/html; charset=windows-1251"),
        ("failure\nОшибка авторизации".encode("windows-1251"), "text/html"),
        ("failure\nОшибка авторизации".encode(), "text/html; charset=utf-8"),
        ("\ufefffailure\nОшибка авторизации".encode(), "text/plain"),
    ],
)
def test_windows_1251_and_utf8_answers_both_read(content: bytes, content_type: str) -> None:
    response = httpx.Response(200, content=content, headers={"Content-Type": content_type})
    assert "failure\nОшибка авторизации" == decode(response)


def test_an_import_whose_answer_never_came_is_sent_again_after_the_window() -> None:
    import asyncio

    from conformance import price

    from exchange.dev.bitrixsim import PATH, BitrixSimulator
    from exchange.targets.bitrix.target import BitrixTarget

    site = BitrixSimulator("u", "p", step_size=100)
    site.faults.import_delay = 0.5
    site.start()
    target = BitrixTarget(
        site.url + PATH,
        "u",
        lambda: "p",
        catalog_id="c",
        price_types={"retail": "Розничная"},
        max_import_steps=5,
        timeout=0.2,
    )

    async def go() -> tuple[list[object], list[object]]:
        try:
            first = await target.send([price("SKU-1", 1)])
            site.faults.import_delay = 0
            return first, await target.send([price("SKU-1", 1)])
        finally:
            await target.aclose()

    try:
        (first,), (again,) = asyncio.run(go())
    finally:
        site.stop()
    assert (Verdict.TEMPORARY, True, "1") == (
        first.verdict,  # type: ignore[attr-defined]
        first.result_unknown,  # type: ignore[attr-defined]
        first.retry_after,  # type: ignore[attr-defined]
    )
    assert Verdict.DELIVERED == again.verdict  # type: ignore[attr-defined]
    assert "1.00" == site.price("SKU-1")


def test_when_the_known_prices_cannot_be_read_nothing_is_sent_and_delivery_pauses() -> None:
    """Issue 33 item 17: an offer without its other price types would clear them at a whole-set
    receiver (wc1c, and Bitrix's own import: CIBlockCMLImport::SetProductPrice deletes the
    price types an offer does not name): when the port's store fails, the package waits.
    Issue 34: a pause of its own (the service's database, not the site: never site-wide)."""
    import asyncio
    from collections.abc import Iterable

    from conformance import price

    from exchange.dev.bitrixsim import BitrixSimulator
    from exchange.targets.bitrix.target import BitrixTarget
    from exchange.targets.prices import KnownPrice

    class Broken:
        def latest(self, skus: Iterable[str]) -> list[KnownPrice]:
            raise OSError("the database went away")

    with BitrixSimulator("u", "p", receiver="wc1c") as site:
        target = BitrixTarget(
            site.receiver_url,  # type: ignore[attr-defined]
            "u",
            lambda: "p",
            catalog_id="c",
            price_types={"retail": "Розничная"},
            max_import_steps=5,
            timeout=2,
            known=Broken(),
        )

        async def go() -> list[object]:
            try:
                return list(await target.send([price("SKU-1", 1)]))
            finally:
                await target.aclose()

        (judged,) = asyncio.run(go())
        assert [] == site.packages  # type: ignore[attr-defined]
    assert (Verdict.PAUSE, False, "KnownPricesUnread") == (
        judged.verdict,  # type: ignore[attr-defined]
        judged.site_wide,  # type: ignore[attr-defined]
        judged.error_class,  # type: ignore[attr-defined]
    )

"""A 1C-Bitrix offer carries its whole set of prices (issue 33 item 17, contract 10): wc1c reads
an offer's prices as the product's whole set and clears a price type the offer does not name
(wc1c's assignOffersItemPrices; BitrixSimulator(receiver="wc1c") follows it), so each
``Предложение`` carries every mapped price type whose latest price the service knows: the
latest version delivered or being delivered of the sibling aggregates. Real worker, real
database (SQLite and PostgreSQL), the receiver over HTTP."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.db.known_prices import DbKnownPrices
from exchange.dev.bitrixsim import BitrixSimulator
from exchange.dev.testing import fast_settings, price_row, run_worker, stage
from exchange.ops import prune
from exchange.worker import Worker

TYPES = {"retail": "Розничная", "sale": "Распродажа", "wholesale": None}


@pytest.fixture
def wc1c() -> Iterator[BitrixSimulator]:
    with BitrixSimulator("exchange", "secret", receiver="wc1c") as site:
        yield site  # type: ignore[misc]


def row(sku: str, price_type: str, version: int, price: str) -> dict[str, Any]:
    staged = price_row(sku, version, price, aggregate=f"{sku}/{price_type}")
    staged["payload"] = staged["payload"].replace('"retail"', json.dumps(price_type))
    return staged


def worker(db_url: str, engine: Engine, site: BitrixSimulator) -> Worker:
    settings = fast_settings(
        db_url,
        None,
        target="bitrix",
        bitrix_url=site.receiver_url,
        bitrix_user="exchange",
        bitrix_password="secret",
        bitrix_catalog_id="catalog-1",
        bitrix_price_types=TYPES,
    )
    return bootstrap.worker(settings, engine, rng=random.Random(5))


def offers(package: bytes) -> dict[str, dict[str, str]]:
    root = ET.fromstring(package)
    return {
        offer.findtext("Ид") or "": {
            p.findtext("ИдТипаЦены") or "": p.findtext("ЦенаЗаЕдиницу") or ""
            for p in offer.iter("Цена")
        }
        for offer in root.iter("Предложение")
    }


def held(site: BitrixSimulator, sku: str) -> tuple[str | None, str | None]:
    return site.price(sku, "Розничная"), site.price(sku, "Распродажа")


def test_a_package_with_one_price_type_keeps_the_others_at_a_whole_set_receiver(
    db_url: str, engine: Engine, wc1c: BitrixSimulator
) -> None:
    stage(engine, [row("SKU-1", "retail", 1, "100.00"), row("SKU-1", "sale", 1, "80.00")])
    run_worker(worker(db_url, engine, wc1c))
    assert ("100.00", "80.00") == held(wc1c, "SKU-1")

    stage(engine, [row("SKU-1", "sale", 2, "70.00")])  # only the sale price changed
    run_worker(worker(db_url, engine, wc1c))
    assert ("100.00", "70.00") == held(wc1c, "SKU-1"), "the regular price was not cleared"
    assert {"SKU-1": {"Распродажа": "70.00", "Розничная": "100.00"}} == offers(wc1c.packages[-1])

    stage(engine, [row("SKU-1", "retail", 2, "110.00")])  # a retail-only package
    run_worker(worker(db_url, engine, wc1c))
    assert ("110.00", "70.00") == held(wc1c, "SKU-1"), "the sale price was not cleared"


def test_only_mapped_price_types_ride_along_and_only_for_the_skus_sent(
    db_url: str, engine: Engine, wc1c: BitrixSimulator
) -> None:
    stage(
        engine,
        [
            row("SKU-1", "retail", 1, "100.00"),
            row("SKU-1", "wholesale", 1, "60.00"),  # mapped to null: left out of this shop
            row("SKU-2", "retail", 1, "20.00"),
            row("SKU-2", "sale", 1, "15.00"),
        ],
    )
    run_worker(worker(db_url, engine, wc1c))
    stage(engine, [row("SKU-1", "retail", 2, "101.00")])
    run_worker(worker(db_url, engine, wc1c))

    assert {"SKU-1": {"Розничная": "101.00"}} == offers(wc1c.packages[-1])
    assert ("20.00", "15.00") == held(wc1c, "SKU-2")


def test_the_known_price_is_the_latest_delivered_never_one_the_shop_refused(
    db_url: str, engine: Engine, wc1c: BitrixSimulator
) -> None:
    stage(engine, [row("SKU-1", "retail", 1, "100.00"), row("SKU-1", "sale", 1, "80.00")])
    run_worker(worker(db_url, engine, wc1c))
    wc1c.faults.answer_fault = "html"  # the next package meets a PHP fatal error: not applied
    stage(engine, [row("SKU-1", "sale", 2, "75.00")])
    run_worker(worker(db_url, engine, wc1c))

    known = {
        (k.sku, k.price_type): (str(k.amount), k.version)
        for k in DbKnownPrices(engine).latest(["SKU-1", "SKU-NONE"])
    }
    assert {("SKU-1", "retail"): ("100.00", 1), ("SKU-1", "sale"): ("80.00", 1)} == known


def test_a_price_past_the_retention_still_rides_along_after_prune(
    db_url: str, engine: Engine, wc1c: BitrixSimulator
) -> None:
    """Contract 13, "Prune": prune never removes a price's latest message (nor its latest
    delivered one), so a sale price unchanged for longer than EXCHANGE_RETENTION_DAYS still
    rides along and the whole-set receiver keeps it; the retail price's older version goes."""
    stage(engine, [row("SKU-1", "retail", 1, "100.00"), row("SKU-1", "sale", 1, "80.00")])
    run_worker(worker(db_url, engine, wc1c))
    stage(engine, [row("SKU-1", "retail", 2, "110.00")])
    run_worker(worker(db_url, engine, wc1c))

    later = datetime.now(UTC) + timedelta(days=31)
    kinds = fast_settings(db_url).policies
    report = prune.prune(engine, None, now=later, retention_days=30, kinds=kinds)

    stage(engine, [row("SKU-1", "retail", 3, "120.00")])  # only the retail price changed
    run_worker(worker(db_url, engine, wc1c))
    assert {"SKU-1": {"Розничная": "120.00", "Распродажа": "80.00"}} == offers(wc1c.packages[-1])
    assert ("120.00", "80.00") == held(wc1c, "SKU-1"), "the sale price was not cleared"
    assert 1 == report.messages, "retail v1, replaced by v2, went"


DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_wc1c_says_success_for_an_offer_it_skipped_and_the_docs_say_how_an_owner_checks(
    db_url: str, engine: Engine, wc1c: BitrixSimulator
) -> None:
    """Issue 33 item 18: the protocol has no result per offer; wc1c logs «Product not found.
    Offer update skipped.» and answers success. The service cannot know (delivered); the docs
    say so per receiver, and how the owner checks (the receiver's log, `exchange verify`)."""
    wc1c.wc1c_products = {"SKU-1"}
    stage(engine, [row("SKU-1", "retail", 1, "10.00"), row("SKU-GONE", "retail", 1, "20.00")])
    run_worker(worker(db_url, engine, wc1c))

    assert ["SKU-GONE"] == wc1c.skipped
    assert (None, None) == held(wc1c, "SKU-GONE")
    for page, words in (
        ("targets.md", ("cannot tell: skipped offers", "Offer update skipped", "exchange verify")),
        ("targets.ru.md", ("пропущенные предложения", "Offer update skipped", "exchange verify")),
    ):
        text = (DOCS / page).read_text(encoding="utf-8")
        assert all(word in text for word in words), page

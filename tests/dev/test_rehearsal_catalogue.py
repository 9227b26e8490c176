"""The shop owner's rehearsal (issue 34 item 10, contract 15): the simulated WooCommerce shop
takes her catalogue (a list of SKUs, or WooCommerce's product CSV export as
WC_Product_CSV_Exporter writes it) and reports the SKUs 1C sends that it lacks, instead of
inventing a product on first lookup."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.catalogue import CatalogueError, parse_catalogue, read_catalogue
from exchange.dev.testing import price_row, run_worker, stage
from exchange.dev.woosim import WooSimulator
from exchange.i18n import Lang
from exchange.targets.base import HeldPrice, OutgoingMessage
from exchange.targets.woocommerce.ids import MemorySkuIds
from exchange.targets.woocommerce.target import WooCommerceTarget
from tests.integration.test_woocommerce import states, woo_settings

# The header row as WooCommerce 9 exports it in English (get_default_column_names), and the
# same columns as a Russian shop exports them; a UTF-8 byte order mark first (export()).
ENGLISH = (
    '\ufeffID,Type,SKU,"GTIN, UPC, EAN, or ISBN",Name,Published,"Regular price",Parent\n'
    '11,simple,SKU-1,,"Чайник, 1,7 л",1,1990,\n'
    "12,variable,SHIRT,,Рубашка,1,,\n"
    '13,variation,SHIRT-M,,"Рубашка - M",1,990,SHIRT\n'
    "14,simple,,,Без артикула,1,10,\n"
    "15,simple,'-5%-OFF,,Скидка,1,1,\n"
)
RUSSIAN = "\ufeffID;Тип;Артикул;Имя\n21;simple;АРТ-7;Молоко\n22;variation;АРТ-7-1;Молоко 1 л\n"


def outgoing(sku: str) -> OutgoingMessage:
    payload = json.dumps({"sku": sku, "price": "1.00", "price_type": "retail"})
    return OutgoingMessage(f"price.{sku}.v1", "price", sku, 1, payload, datetime.now(UTC))


def test_a_list_of_skus_one_a_line() -> None:
    catalogue = parse_catalogue("SKU-1\n\n# a comment\n  SKU-2  \nSKU-1\n")
    assert (["SKU-1", "SKU-2"], frozenset()) == (catalogue.skus, catalogue.variations)


def test_woocommerces_english_export_gives_its_skus_and_variations() -> None:
    catalogue = parse_catalogue(ENGLISH)
    # No SKU: nothing to match; "'-5%-OFF" was escaped by escape_data and is "-5%-OFF".
    assert ["SKU-1", "SHIRT", "SHIRT-M", "-5%-OFF"] == catalogue.skus
    assert frozenset({"SHIRT-M"}) == catalogue.variations


def test_a_russian_shops_export_with_semicolons_is_read_by_its_russian_headers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wc-product-export-5-12-2026.csv"
    path.write_text(RUSSIAN, encoding="utf-8")
    catalogue = read_catalogue(path)
    assert (["АРТ-7", "АРТ-7-1"], frozenset({"АРТ-7-1"})) == (
        catalogue.skus,
        catalogue.variations,
    )


def test_an_exports_rows_without_an_sku_are_counted_as_skipped_and_a_list_has_none() -> None:
    """The rehearsal says how many SKUs it read and how many rows had no article (skipped):
    never a product dropped without a word."""
    assert 1 == parse_catalogue(ENGLISH).without_sku
    assert 0 == parse_catalogue(RUSSIAN).without_sku
    two = RUSSIAN + "23;simple;;Без артикула\n24;simple;  ;Пробелы\n"
    assert (["АРТ-7", "АРТ-7-1"], 2) == (
        parse_catalogue(two).skus,
        parse_catalogue(two).without_sku,
    )
    assert parse_catalogue("SKU-1\n\n# a comment\n").without_sku is None  # a list: no rows


def test_the_rehearsal_says_what_it_read_in_one_line_in_the_owners_language() -> None:
    from io import StringIO

    from rich.console import Console

    from exchange.dev.demo import print_catalogue

    def said(text: str, lang: Lang) -> str:
        output = StringIO()
        print_catalogue(Console(file=output, width=200), parse_catalogue(text), lang)
        return output.getvalue()

    two = RUSSIAN + "23;simple;;Без артикула\n24;simple;;Тоже\n"
    assert (
        "из каталога прочитано 2 артикула, в магазине только они; 2 строки без артикула пропущены\n"
    ) == said(two, "ru")
    assert (
        "the shop holds the 4 SKUs read from the catalogue and no others; 1 row without an SKU "
        "skipped\n"
    ) == said(ENGLISH, "en")
    assert "из каталога прочитан 1 артикул, в магазине только он\n" == said("АРТ-1\n", "ru")


def test_a_catalogue_that_cannot_be_read_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_bytes("SKU\nА\n".encode("cp1251"))
    with pytest.raises(CatalogueError, match="is not UTF-8 text"):
        read_catalogue(path)
    with pytest.raises(CatalogueError, match="cannot be read"):
        read_catalogue(tmp_path / "missing.csv")


def test_the_rehearsal_shop_invents_nothing_and_reports_what_it_lacks(
    db_url: str, engine: Engine
) -> None:
    told: list[str] = []
    shop = WooSimulator(key="ck_k", secret="cs_s")
    shop.hold(parse_catalogue(ENGLISH))
    shop.on_lacking = told.append
    with shop:
        stage(
            engine,
            [
                price_row("SKU-1", 1, "1990.00"),
                price_row("SHIRT-M", 1, "990.00"),
                price_row("ABSENT-1", 1, "5.00"),  # 1C sends it; the shop has no such product
            ],
        )
        run_worker(bootstrap.worker(woo_settings(db_url, shop), engine, rng=random.Random(3)))
    assert ["ABSENT-1"] == list(shop.lacking) == told
    assert shop.by_sku("ABSENT-1") is None, "never invented, not even on a second lookup"
    assert ("quarantined", "unknown-sku") == states(engine)[("ABSENT-1", 1)]
    assert ("1990.00", "990.00") == (shop.price("SKU-1"), shop.price("SHIRT-M"))


def test_the_simulator_command_takes_the_catalogue_and_lists_what_the_shop_lacks(
    tmp_path: Path,
) -> None:
    catalogue = tmp_path / "skus.txt"
    catalogue.write_text("SKU-1\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "exchange.dev.woosim", "--port", "0", "--catalogue", str(catalogue)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline:
            line = process.stdout.readline() if process.stdout else ""
            if "listening on" in line:
                url = line.split()[-1]
        assert url is not None
        target = WooCommerceTarget(
            url,
            lambda: ("ck_demo_key", "cs_demo_secret"),
            MemorySkuIds(),
            price_fields={"retail": "regular_price"},
            timeout=10,
        )

        async def read() -> list[HeldPrice]:
            try:
                return await target.read_prices([outgoing("SKU-1"), outgoing("NOT-IN-SHOP")])
            finally:
                await target.aclose()

        held = asyncio.run(read())
        assert [True, False] == [h.found for h in held]
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert "the shop lacks SKU 'NOT-IN-SHOP'" in out, out + err
    assert "SKUs sent that the shop lacks: 1\n  NOT-IN-SHOP\n" in out


def test_the_demos_skus_become_the_owners_and_the_rest_stay_skus_her_shop_lacks() -> None:
    """``exchange demo --catalogue`` (issue 34): the first SKUs the demo's 1C sends are hers,
    in her file's order; the others keep the demo's names, never one of hers."""
    from exchange.dev.catalogue import Catalogue, rehearsal_names

    hers = Catalogue(["АРТ-1", "SKU-0003", "АРТ-2"])
    demo = [f"SKU-{n:04d}" for n in range(5)]
    assert {
        "SKU-0000": "АРТ-1",
        "SKU-0001": "SKU-0003",
        "SKU-0002": "АРТ-2",
        "SKU-0003": "NOT-IN-SHOP-0001",  # her name: a SKU she lacks must be another
        "SKU-0004": "SKU-0004",
    } == rehearsal_names(demo, hers, held=3)


def test_renamed_rows_carry_her_sku_in_the_aggregate_and_the_payload_and_bad_rows_stay() -> None:
    from exchange.dev.catalogue import renamed

    rows = [
        price_row("SKU-0001/retail", 1),
        {**price_row("SKU-0001", 2), "aggregate": "SKU-0001"},
        {**price_row("SKU-BAD", 1), "payload": '{"sku": "SKU-0001", "price": 8.4e2}'},
        {**price_row("SKU-BAD", 1), "payload": "{not json"},
    ]
    rows[0]["payload"] = json.dumps({"sku": "SKU-0001", "price": "1.00"})
    out = renamed(rows, {"SKU-0001": "АРТ-1"})
    assert ["АРТ-1/retail", "АРТ-1", "SKU-BAD", "SKU-BAD"] == [r["aggregate"] for r in out]
    assert "АРТ-1" == json.loads(out[0]["payload"])["sku"] == json.loads(out[1]["payload"])["sku"]
    assert '{"sku": "АРТ-1", "price": 8.4e2}' == out[2]["payload"]  # still an exponent
    assert "{not json" == out[3]["payload"]
